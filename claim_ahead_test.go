package xtimer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/testsvc"
	"github.com/xtimer-go/xtimer/store"
)

// The promise: fires are claimed a little ahead of their run time, so that
// handlers start on time without a database round trip; a claimed fire
// still starts at its run time, never before, and one claimed when the
// replica stops is handed on unstarted.
func TestFireClaimedAheadStartsAtItsRunTimeAndIsReleasedOnStop(t *testing.T) {
	t.Parallel()
	for _, stopFirst := range []bool{false, true} {
		name := "runs"
		if stopFirst {
			name = "stopped before its run time"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, app := testsvc.SQLite(t), testsvc.App(t)
			ctx := context.Background()
			clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
			iv := newInvocations()
			s := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, nil)
			require.NoError(t, s.Register("a", "0 * * * * *", iv.handler(nil)))
			require.NoError(t, s.Start(ctx))
			stopOnCleanup(t, s)
			row := func() store.Execution {
				var out []store.Execution
				require.NoError(t, db.Where("app = ?", app).Find(&out).Error)
				if len(out) != 1 {
					return store.Execution{}
				}
				return out[0]
			}
			require.NoError(t, clock.BlockUntil(ctx, 3))
			clock.Advance(54*time.Second + 500*time.Millisecond) // 10:00:55: the 10:01 fire is recorded
			require.Eventually(t, func() bool { return row().ID != 0 }, 10*time.Second, 10*time.Millisecond)
			runTime := time.Date(2026, 11, 30, 10, 1, 0, 0, time.UTC).UnixMilli()

			// 1 ms before the run time: within any claim lead (at least 2 ms).
			require.NoError(t, clock.BlockUntil(ctx, 3))
			clock.Advance(5*time.Second - time.Millisecond)
			require.Eventually(t, func() bool { return row().StartedMs != 0 }, 10*time.Second, 10*time.Millisecond)
			r := row()
			require.Equal(t, runTime, r.StartedMs, "the start is recorded at the run time")
			require.Zero(t, r.LatenessMs)
			select {
			case run := <-iv.ch:
				t.Fatalf("handler called at %s, before its run time %s", clock.Now(), run.ScheduledAt)
			case <-time.After(200 * time.Millisecond):
			}

			if stopFirst {
				stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				require.NoError(t, s.Stop(stopCtx))
				r = row()
				require.Equal(t, store.StatusScheduled, r.Status)
				require.Zero(t, r.StartedMs, "unclaimed")
				require.Empty(t, r.Replica, "handed on for another replica to claim")
				require.Empty(t, iv.calls)
				return
			}
			clock.Advance(time.Millisecond) // 10:01:00
			run := iv.next(t, 10*time.Second)
			require.Equal(t, runTime, run.ScheduledAt.UnixMilli())
			require.Eventually(t, func() bool { return row().Status == store.StatusSucceeded }, 10*time.Second, 10*time.Millisecond)
			require.Equal(t, runTime, row().StartedMs)
		})
	}
}
