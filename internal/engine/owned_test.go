package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise: a fire whose row this replica owns runs, even if the
// replica never armed it. The row here is what an InsertFires leaves when
// its commit reached the database but its answer did not (a connection
// cut by a failover): the planner records the minute again, finds the row
// there already, and does not arm it; since its owner lives, no other
// replica claims it. Before rearmOwned it stayed scheduled until the
// replica stopped (the chaos runs' stuck fires with replica ”).
//
// Such a write fails, and the failure is noted (noteDB): for ownedDoubt
// after it the replica reads its unstarted fires every tick, and the fire
// runs within ownedGrace and a tick of its run time. The 10:01 fire comes
// with no failure noted, a row only the read every ownedEvery finds; the
// 10:02 fire comes with the failure its write would have had.
func TestFireOwnedHereButNeverArmedRuns(t *testing.T) {
	t.Parallel()
	onPostgresAndSQLite(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s, clock, iv := startEveryMinute(ctx, t, db, "lost", "armed")
		app := s.opts.App
		rows := func(t assert.TestingT, runTime time.Time) map[string]store.Execution {
			var rs []store.Execution
			assert.NoError(t, db.Where("app = ? AND run_time = ?", app, runTime.UnixMilli()).Find(&rs).Error)
			byTask := map[string]store.Execution{}
			for _, r := range rs {
				byTask[r.TaskCode] = r
			}
			return byTask
		}
		// lose creates the row of the fire of "lost" at runTime, before
		// the planner records that minute, and ticks on until the minute
		// is recorded, the planner having found the row there already.
		lose := func(runTime time.Time) store.Execution {
			lost := store.Execution{App: app, TaskCode: "lost", RunTime: runTime.UnixMilli(), Status: store.StatusScheduled,
				Source: store.SourceSchedule, MaxAttempts: 1, Replica: s.opts.InstanceID}
			require.NoError(t, db.Create(&lost).Error)
			for len(rows(t, runTime)) < 2 {
				waitSettled(ctx, t, clock, s)
				clock.Advance(time.Second)
			}
			require.Equal(t, lost.ID, rows(t, runTime)["lost"].ID, "the planner found the row there already")
			return lost
		}
		// runs ticks on until both fires of runTime ran, at most until
		// runTime+within, and returns the lost fire's row.
		runs := func(runTime time.Time, within time.Duration) store.Execution {
			for {
				waitSettled(ctx, t, clock, s)
				r := rows(t, runTime)
				if r["armed"].Status == store.StatusSucceeded && r["lost"].Status == store.StatusSucceeded {
					require.Equal(t, s.opts.InstanceID, r["lost"].Replica)
					return r["lost"]
				}
				require.True(t, clock.Now().Before(runTime.Add(within)), "the fires of %s not both run by %s", runTime, clock.Now())
				clock.Advance(time.Second)
			}
		}

		// 10:00:48.5: the jump is one tick, which reads (the first read
		// was the first tick's, 10:00:01.5), so the reads without a
		// failure come at 10:01:03.5, 10:01:18.5, 10:01:33.5 and so on.
		clock.Advance(48 * time.Second)
		first := time.Date(2026, 11, 30, 10, 1, 0, 0, time.UTC)
		lose(first)
		lost := runs(first, ownedEvery+ownedGrace+2*time.Second)
		require.Greater(t, lost.LatenessMs, (ownedGrace + 2*time.Second).Milliseconds(),
			"with no failure noted, found by the read every ownedEvery, not at the first tick it could be")
		require.LessOrEqual(t, lost.LatenessMs, (ownedEvery + ownedGrace + 2*time.Second).Milliseconds())

		for clock.Now().Before(first.Add(50 * time.Second)) {
			waitSettled(ctx, t, clock, s)
			clock.Advance(time.Second)
		}
		second := first.Add(time.Minute)
		lose(second)
		s.noteDB(errors.New("the insert's answer: connection reset by peer"))
		lost = runs(second, ownedGrace+2*time.Second)
		require.Greater(t, lost.StartedMs, second.UnixMilli(), "the lost fire started late, once armed again")
		require.LessOrEqual(t, lost.LatenessMs, (ownedGrace + 2*time.Second).Milliseconds(), "read every tick after a failure")

		// Each ran once, though the ticks after go on reading the replica's
		// unstarted fires.
		for range 3 {
			waitIdle(ctx, t, clock, s)
			clock.Advance(time.Second)
		}
		waitIdle(ctx, t, clock, s)
		iv.mu.Lock()
		defer iv.mu.Unlock()
		require.Len(t, iv.calls, 4)
		for id, starts := range iv.calls {
			require.Len(t, starts, 1, "attempt %s", id)
		}
	})
}

// A manual run or a backfill whose insert failed may have been recorded
// all the same, owned here and never armed (the caller's deadline ran out
// while the commit was on its way): Trigger and Backfill note the doubt
// (doubtOwned), and the replica reads its unstarted fires every tick for
// ownedDoubt after, as it does after a failed call of the tick loop. The
// call here fails on its own deadline, which no other call of the engine
// sees, its insert waiting on a lock of the table a test transaction
// holds; the row is the one the insert would have left had its commit
// landed.
func TestFailedTriggerReadsOwnedFiresEveryTick(t *testing.T) {
	t.Parallel()
	calls := map[string]func(ctx context.Context, s *Engine, at time.Time) (source string, runTime time.Time, err error){
		"trigger": func(ctx context.Context, s *Engine, at time.Time) (string, time.Time, error) {
			_, _, err := s.Trigger(ctx, "manual")
			return store.SourceManual, at, err
		},
		"backfill": func(ctx context.Context, s *Engine, at time.Time) (string, time.Time, error) {
			from := at.Truncate(time.Minute).Add(-time.Minute) // 09:59, within the misfire window
			_, err := s.Backfill(ctx, "manual", from, from.Add(time.Second))
			return store.SourceBackfill, from, err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testsvc.Postgres(t)
			s, clock, iv := startEveryMinute(ctx, t, db, "manual")
			// 10:00:08.5, a tick at a time: the reads with no doubt come at
			// the first tick, 10:00:01.5, and then at 10:00:16.5.
			for clock.Now().Before(time.Date(2026, 11, 30, 10, 0, 8, 0, time.UTC)) {
				waitSettled(ctx, t, clock, s)
				clock.Advance(time.Second)
			}
			waitSettled(ctx, t, clock, s)

			lock := db.Begin()
			require.NoError(t, lock.Error)
			require.NoError(t, lock.Exec("LOCK TABLE xtimer_executions IN EXCLUSIVE MODE").Error)
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			at := clock.Now()
			source, runTime, err := call(short, s, at)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NoError(t, lock.Rollback().Error)
			lost := store.Execution{App: s.opts.App, TaskCode: "manual", RunTime: runTime.UnixMilli(), Status: store.StatusScheduled,
				Source: source, MaxAttempts: 1, Replica: s.opts.InstanceID}
			require.NoError(t, db.Create(&lost).Error)

			// Armed at the first tick that finds it planned ownedGrace
			// ago, 10:00:09.5 for the backfill, 10:00:13.5 for the manual
			// run, and not at the next read with no doubt.
			for {
				waitSettled(ctx, t, clock, s)
				var r store.Execution
				require.NoError(t, db.First(&r, lost.ID).Error)
				if r.Status == store.StatusSucceeded {
					break
				}
				require.True(t, clock.Now().Before(at.Add(ownedGrace+2*time.Second)), "the fire not run by %s", clock.Now())
				clock.Advance(time.Second)
			}
			iv.mu.Lock()
			defer iv.mu.Unlock()
			require.Len(t, iv.calls, 1)
		})
	}
}

// A read made every interval is due at its instant and after, and again
// at once when the clock went back past the last one, not an interval
// and the step back later.
func TestReadDue(t *testing.T) {
	t.Parallel()
	last := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	next := last.Add(ownedEvery)
	for _, c := range []struct {
		now  time.Time
		want bool
	}{
		{last, false},
		{next.Add(-time.Millisecond), false},
		{next, true},
		{next.Add(time.Hour), true},
		{last.Add(-time.Millisecond), true}, // the clock went back
		{last.Add(-time.Hour), true},
	} {
		require.Equal(t, c.want, readDue(c.now, next, ownedEvery), "at %s, next read %s", c.now, next)
	}
	require.True(t, readDue(last, time.Time{}, ownedEvery), "the first read")
}
