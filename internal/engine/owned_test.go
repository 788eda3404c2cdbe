package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The promise: a fire whose row this replica owns runs, even if the
// replica never armed it. The row here is what an InsertFires leaves when
// its commit reached the database but its answer did not (a connection
// cut by a failover): the planner records the minute again, finds the row
// there already, and does not arm it; since its owner lives, no other
// replica claims it. Before rearmOwned it stayed scheduled until the
// replica stopped (the chaos runs' stuck fires with replica ”).
func TestFireOwnedHereButNeverArmedRuns(t *testing.T) {
	t.Parallel()
	onPostgresAndSQLite(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s, clock, iv := startEveryMinute(ctx, t, db, "lost", "armed")
		app := s.opts.App

		runTime := time.Date(2026, 11, 30, 10, 1, 0, 0, time.UTC)
		lost := store.Execution{App: app, TaskCode: "lost", RunTime: runTime.UnixMilli(), Status: store.StatusScheduled,
			Source: store.SourceSchedule, MaxAttempts: 1, Replica: s.opts.InstanceID}
		require.NoError(t, db.Create(&lost).Error)

		rows := func(t assert.TestingT) map[string]store.Execution { return rowsByTask(t, db, app) }
		clock.Advance(55 * time.Second) // 10:00:55.5: the 10:01 fires are recorded, recordAhead before them
		require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, rows(c), 2) }, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, lost.ID, rows(t)["lost"].ID, "the planner found the row there already")

		// On to 10:01:07.5, a tick at a time: "armed" runs at once, "lost"
		// within ownedGrace and a tick of its run time.
		for range 12 {
			waitSettled(ctx, t, clock, s)
			clock.Advance(time.Second)
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			r := rows(c)
			assert.Equal(c, store.StatusSucceeded, r["armed"].Status)
			assert.Equal(c, store.StatusSucceeded, r["lost"].Status)
		}, 10*time.Second, 10*time.Millisecond)
		r := rows(t)
		require.Equal(t, s.opts.InstanceID, r["lost"].Replica)
		require.Greater(t, r["lost"].StartedMs, runTime.UnixMilli(), "the lost fire started late, once armed again")
		require.LessOrEqual(t, r["lost"].LatenessMs, (ownedGrace + 2*time.Second).Milliseconds())

		// Each ran once, though the ticks after go on reading the replica's
		// unstarted fires.
		for range 3 {
			waitIdle(ctx, t, clock, s)
			clock.Advance(time.Second)
		}
		waitIdle(ctx, t, clock, s)
		iv.mu.Lock()
		defer iv.mu.Unlock()
		require.Len(t, iv.calls, 2)
		for id, starts := range iv.calls {
			require.Len(t, starts, 1, "attempt %s", id)
		}
	})
}
