package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
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

// The promise: a round of plan records in chunks only up to its next tick
// instant, and leaves the rest of its fires to that tick, at once if the
// round ran past it; that round records from where this one stopped to
// its own frontier, so every fire is recorded once and the margin ahead
// of the fires stays recordAhead. (A round that went on to its own
// frontier on a slow database ended with its last fires due within a
// second, and the next round's first fires ran late.)
func TestARoundPastItsTickLeavesTheRestToIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC) // a tick instant
	f := newShareFleet(t, t0, "* * * * * *")
	a, slow := f.slowRecorder("replica-a") // alone: it claims every slot
	slow.per = 5 * time.Millisecond
	perSecond := func() map[string]int64 {
		var rows []struct {
			RunTime int64
			N       int64
		}
		require.NoError(t, f.db.Model(&store.Execution{}).Where("app = ?", f.app).
			Select("run_time, COUNT(*) AS n").Group("run_time").Scan(&rows).Error)
		out := map[string]int64{}
		for _, r := range rows {
			out[time.UnixMilli(r.RunTime).UTC().Format(time.TimeOnly)] = r.N
		}
		return out
	}

	// Recording the urgent fires (10:00:00 to 10:00:03, 256 rows) takes
	// 1.28 s: the round is past its tick instant, 10:00:01.5, and records
	// nothing more.
	require.NoError(t, a.planner.plan(ctx, t0))
	require.Equal(t, map[string]int64{"10:00:00": 64, "10:00:01": 64, "10:00:02": 64, "10:00:03": 64}, perSecond())
	require.Equal(t, t0.Add(time.Second), a.planner.replanAt, "the tick it ran past comes at once")
	require.True(t, f.clock.Now().After(a.planner.replanAt))

	// That tick records the rest, up to its own frontier (10:00:06.78).
	slow.per = 0
	require.NoError(t, a.planner.plan(ctx, f.clock.Now()))
	require.Equal(t, map[string]int64{"10:00:00": 64, "10:00:01": 64, "10:00:02": 64, "10:00:03": 64,
		"10:00:04": 64, "10:00:05": 64, "10:00:06": 64}, perSecond())
}

// recordedUpTo: a slot with no fire left is recorded up to the frontier,
// one with fires left up to just before the earliest of them.
func TestRecordedUpToStopsBeforeEachSlotsFirstFireLeft(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	a, b := &taskState{code: "a", bucket: 1}, &taskState{code: "b", bucket: 2}
	m := t0.Unix() / 60
	won := []slotKey{{m, 1}, {m, 2}, {m, 3}}
	frontier := t0.Add(6 * time.Second)
	left := []fire{{b, t0.Add(4 * time.Second)}, {a, t0.Add(5 * time.Second)}, {b, t0.Add(5 * time.Second)}}
	require.Equal(t, map[slotKey]time.Time{
		{m, 1}: t0.Add(5*time.Second - time.Nanosecond),
		{m, 2}: t0.Add(4*time.Second - time.Nanosecond),
		{m, 3}: frontier,
	}, recordedUpTo(won, frontier, left))
	require.Equal(t, map[slotKey]time.Time{{m, 1}: frontier}, recordedUpTo(won[:1], frontier, nil), "all recorded")
}

// clockArmer is the dispatcher whose arming of each recorded fire moves
// the injected clock on by per: a round whose recording takes time.
type clockArmer struct {
	fireArmer
	clock *fakeclock.Clock
	per   time.Duration
}

func (c *clockArmer) arm(r store.Execution) {
	c.fireArmer.arm(r)
	c.clock.Advance(c.per)
}

// slowRecorder is a replica of the fleet that runs its tasks, so that it
// arms the fires it records, through a clockArmer (per zero until set).
func (f *shareFleet) slowRecorder(id string) (*Engine, *clockArmer) {
	s := f.replica(id)
	for i := range 64 {
		mustRegister(f.t, s, fmt.Sprintf("report.%02d", i), f.spec, func(context.Context, *Attempt) error { return nil })
	}
	slow := &clockArmer{fireArmer: s.planner.fires, clock: f.clock}
	s.planner.fires = slow
	return s, slow
}

// A task whose fires changed (its slot's only) has them recorded again
// before the slot's upTo; a round that stops before those of them in its
// chunks leaves the slot's upTo before them, so that the next round
// records them.
func TestARoundPastItsTickKeepsTheChangedFiresLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC)
	f := newShareFleet(t, t0, "*/2 * * * * *")
	a, slow := f.slowRecorder("replica-a")
	recorded := func(at time.Time) bool {
		var n int64
		require.NoError(t, f.db.Model(&store.Execution{}).Where("app = ? AND task_code = ? AND run_time = ?", f.app, "report.00",
			at.UnixMilli()).Count(&n).Error)
		return n == 1
	}
	at := func(s int) time.Time { return t0.Truncate(time.Minute).Add(time.Duration(s) * time.Second) }
	require.NoError(t, a.planner.plan(ctx, t0)) // 10:00:00, :02, :04
	require.True(t, recorded(at(4)))

	// report.00 moves to the odd seconds at 10:00:01.5; the round then
	// records its 10:00:03 (urgent; its fires before the change are not
	// planned), and stops past its tick with its :05 left.
	f.clock.Set(t0.Add(time.Second))
	a.view.adoptTask(store.Task{ID: 1, App: f.app, Code: "report.00", Kind: store.KindFunc, Spec: "1/2 * * * * *",
		TimeZone: "UTC", Status: store.TaskActive, MaxAttempts: 1, CreatedMs: t0.Add(-time.Hour).UnixMilli(),
		UpdatedMs: f.clock.Now().UnixMilli(), Version: 2})
	slow.per = 1500 * time.Millisecond
	require.NoError(t, a.planner.plan(ctx, f.clock.Now()))
	require.True(t, recorded(at(3)))
	require.False(t, recorded(at(5)), "left to the next round")

	slow.per = 0
	require.NoError(t, a.planner.plan(ctx, f.clock.Now()))
	require.True(t, recorded(at(5)), "recorded by the next round")
}

// slotInstantEnd ends a chunk after the last fire of its last slot at its
// last instant.
func TestSlotInstantEndKeepsASlotsInstantWhole(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	a, b, c := &taskState{code: "a", bucket: 1}, &taskState{code: "b", bucket: 1}, &taskState{code: "c", bucket: 2}
	later := []fire{{a, t0}, {b, t0}, {c, t0}, {a, t0.Add(time.Second)}, {b, t0.Add(time.Second)}}
	for n, want := range map[int]int{0: 0, 1: 2, 2: 2, 3: 3, 4: 5, 5: 5} {
		require.Equal(t, want, slotInstantEnd(later, n), "a chunk of %d", n)
	}
}

// urgentCall records the fires due by now in one call, with the instant
// after them while they are few, then an instant a call, joining the
// instants of fewer than minRecordChunk fires.
func TestUrgentCallRecordsAnInstantACall(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 10, 0, 0, 300*int(time.Millisecond), time.UTC)
	sec := now.Truncate(time.Second)
	task := &taskState{code: "a", bucket: 1}
	var urgent []fire
	add := func(at time.Time, n int) {
		for range n {
			urgent = append(urgent, fire{task, at})
		}
	}
	add(sec.Add(-20*time.Second), 1) // missed
	add(sec, 1)                      // due
	add(sec.Add(time.Second), 300)
	add(sec.Add(2*time.Second), minRecordChunk)
	add(sec.Add(3*time.Second), 50)
	add(sec.Add(4*time.Second), 60)
	var calls []int
	for left := urgent; len(left) > 0; {
		n := urgentCall(left, now)
		calls = append(calls, n)
		left = left[n:]
	}
	require.Equal(t, []int{302, minRecordChunk, 110}, calls)

	// Due fires alone make a call when they are many.
	urgent = nil
	add(sec, minRecordChunk)
	add(sec.Add(time.Second), 10)
	require.Equal(t, minRecordChunk, urgentCall(urgent, now))
}
