package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The fire path's writes do not wait on rows they do not change. Another
// transaction holds a row uncommitted among the rows a take-over and the
// lost-start check look at (a fire of the dead replica's slot already
// started, a live replica's fire claimed a moment ago): neither waits for
// it. At MySQL's default isolation, REPEATABLE READ, both UPDATEs locked
// every row they scanned and waited here for the other transaction (in
// the failover benchmark: deadlocks with the starts of the fires beside
// them, and a take-over seconds late). SQLite has one writer: not run.
func TestFirePathWritesDoNotWaitOnRowsTheyDoNotChange(t *testing.T) {
	t.Parallel()
	for _, backend := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"mysql", testsvc.MySQL}, {"postgres", testsvc.Postgres}} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			b := open(t, backend.open(t))
			require.NoError(t, b.store.Migrate(b.ctx))
			minute := t0 - t0%60_000
			var fires []store.Execution
			for i := range 3 {
				fires = append(fires, store.Execution{App: b.app, TaskCode: "dead", RunTime: minute + int64(i+1)*10_000, Replica: "gone"})
			}
			_, err := b.store.InsertFires(b.ctx, fires)
			require.NoError(t, err)

			// The other transaction: a fire of the slot that its owner started
			// (not to be taken over), and a live replica's claimed fire.
			other := b.db.Begin()
			require.NoError(t, other.Error)
			t.Cleanup(func() { other.Rollback() })
			held := []store.Execution{
				{App: b.app, TaskCode: "dead", RunTime: minute + 5_000, Replica: "gone", StartedMs: minute + 5_000, Attempt: 0, Status: store.StatusScheduled},
				{App: b.app, TaskCode: "live", RunTime: t0 - 1_000, Replica: "r2", StartedMs: t0 - 1_000, Status: store.StatusScheduled},
			}
			require.NoError(t, other.Create(&held).Error)

			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
			defer cancel()
			began := time.Now()
			rows, owners, err := b.store.TakeOverFires(ctx, b.app, []string{"dead"}, minute, minute+60_000, "r1")
			require.NoError(t, err, "the take-over waited %s on a row it does not take", time.Since(began))
			require.Len(t, rows, 3)
			require.Equal(t, []string{"gone"}, owners)
			for _, r := range rows {
				require.Equal(t, "r1", r.Replica)
			}

			lost, err := b.store.PromoteLostStarts(ctx, b.app, []string{"r1", "r2"}, t0-60_000)
			require.NoError(t, err, "the lost-start check waited %s on a live replica's claim", time.Since(began))
			require.Empty(t, lost)
			t.Logf("take-over and lost-start check beside an open transaction: %s", time.Since(began))
		})
	}
}
