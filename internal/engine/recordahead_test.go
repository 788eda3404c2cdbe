package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise: a held slot's fires are recorded as time goes, recordAhead
// before their run times, each tick the next second of them, and not a
// minute of rows at the slot's claim; the slot is marked done once the
// last fire of its minute is recorded, and every fire runs once. (A
// minute of 10,000 fires a second recorded at once held the database for
// the first seconds of the next.)
func TestASlotIsRecordedAsTimeGoes(t *testing.T) {
	for _, b := range testsvc.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx, db := context.Background(), b.Open(t)
			s, clock, iv := startTasks(ctx, t, db, "* * * * * *", "every")
			app := s.opts.App
			latest := func(c assert.TestingT) time.Time {
				var ms int64
				assert.NoError(c, db.Model(&store.Execution{}).Where("app = ?", app).Select("COALESCE(MAX(run_time), 0)").Scan(&ms).Error)
				return time.UnixMilli(ms).UTC()
			}
			done := func(minute time.Time) bool {
				var n int64
				require.NoError(t, db.Model(&store.Slot{}).Where("app = ? AND minute = ? AND done = ?", app, minute.Unix()/60, true).Count(&n).Error)
				return n > 0
			}
			minute := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

			// Each tick, half a second past a second S, records up to S+5.
			for now := clock.Now(); now.Before(minute.Add(time.Minute + 3*time.Second)); now = now.Add(time.Second) {
				waitSettled(ctx, t, clock, s)
				clock.Set(now.Add(time.Second))
				want := clock.Now().Truncate(time.Second).Add(recordAhead)
				require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, want, latest(c)) }, 10*time.Second, 5*time.Millisecond,
					"at %s, the fires up to %s are recorded, and none after", clock.Now().Format(time.TimeOnly), want.Format(time.TimeOnly))
				if want.Before(minute.Add(time.Minute)) {
					require.False(t, done(minute), "at %s, 10:00's last fires are not recorded yet", clock.Now().Format(time.TimeOnly))
				}
			}
			require.True(t, done(minute), "10:00's last fire is recorded: its slot is done")

			var rows []store.Execution
			require.NoError(t, db.Where("app = ? AND run_time < ?", app, minute.Add(time.Minute).UnixMilli()).Order("run_time").Find(&rows).Error)
			require.Len(t, rows, 59, "10:00:01 (the task's first fire after its creation) to 10:00:59, one row each")
			for _, r := range rows {
				require.Equal(t, s.opts.InstanceID, r.Replica)
			}
			waitSettled(ctx, t, clock, s)
			iv.mu.Lock()
			defer iv.mu.Unlock()
			for id, calls := range iv.calls {
				require.Len(t, calls, 1, "fire %s", id)
			}
		})
	}
}

// dueFires picks a round's fires: after upTo and up to the frontier, and
// before upTo those of the tasks whose fires changed.
func TestDueFiresPicksTheRoundsSpan(t *testing.T) {
	a, b := &taskState{code: "a"}, &taskState{code: "b"}
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var f []fire
	for i := range 6 {
		f = append(f, fire{a, t0.Add(time.Duration(i) * time.Second)}, fire{b, t0.Add(time.Duration(i) * time.Second)})
	}
	at := func(fs []fire) (out []string) {
		for _, f := range fs {
			out = append(out, f.task.code+f.at.Format(":05"))
		}
		return out
	}
	require.Equal(t, []string{"a:00", "b:00", "a:01", "b:01", "a:02", "b:02"}, at(dueFires(f, time.Time{}, t0.Add(2*time.Second), nil)), "nothing recorded yet")
	require.Equal(t, []string{"a:03", "b:03", "a:04", "b:04"}, at(dueFires(f, t0.Add(2*time.Second), t0.Add(4*time.Second), nil)))
	require.Equal(t, []string{"b:00", "b:01", "b:02", "a:03", "b:03"}, at(dueFires(f, t0.Add(2*time.Second), t0.Add(3500*time.Millisecond), map[string]bool{"b": true})),
		"b's fires changed: recorded again before upTo")
	require.Empty(t, dueFires(f, t0.Add(4*time.Second), t0.Add(3*time.Second), nil), "a clock gone back records nothing")
	require.Empty(t, dueFires(f, t0.Add(5*time.Second), t0.Add(9*time.Second), nil), "all recorded")
}
