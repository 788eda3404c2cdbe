package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// insertShards records a fire of code at runTime as n shards, dealt to
// replicas r0, r1, ... in turn, and returns its rows in shard order.
func insertShards(t *testing.T, b *bundle, code string, runTime int64, n int) []store.Execution {
	t.Helper()
	fires := make([]store.Execution, n)
	for i := range fires {
		fires[i] = store.Execution{App: b.app, TaskCode: code, RunTime: runTime, Shard: i, Shards: n,
			Replica: "r" + string(rune('0'+i%10)), MaxAttempts: 1}
	}
	rows, err := b.store.InsertFires(b.ctx, fires)
	require.NoError(t, err)
	require.Len(t, rows, n)
	return rows
}

// setStatus writes a row's status and times straight into the table, as
// its replica would have.
func setStatus(t *testing.T, b *bundle, id int64, status string, startedMs, finishedMs int64) {
	t.Helper()
	require.NoError(t, b.db.Model(&store.Execution{}).Where("id = ?", id).
		Updates(map[string]any{"status": status, "started_ms": startedMs, "finished_ms": finishedMs}).Error)
}

func TestFireSummariesCountEveryShardByStatus(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := insertShards(t, b, "etl.sharded", t0, 6)
		setStatus(t, b, rows[0].ID, store.StatusSucceeded, t0+100, t0+900)
		setStatus(t, b, rows[1].ID, store.StatusSucceeded, t0+50, t0+400)
		setStatus(t, b, rows[2].ID, store.StatusRunning, t0+70, 0)
		setStatus(t, b, rows[3].ID, store.StatusFailed, t0+80, t0+2000)
		plain, err := b.store.InsertFires(b.ctx, []store.Execution{{App: b.app, TaskCode: "report.plain", RunTime: t0}})
		require.NoError(t, err)
		missing := store.FireKey{App: b.app, TaskCode: "etl.sharded", RunTime: t0 - 60_000}

		got, err := b.store.FireSummaries(b.ctx, []store.FireKey{rows[0].Fire(), plain[0].Fire(), missing})
		require.NoError(t, err)
		require.Len(t, got, 2, "a fire without rows has no summary")
		require.Equal(t, store.FireSummary{FireKey: rows[0].Fire(), Rows: 6, Shards: 6,
			Counts:    map[string]int{store.StatusSucceeded: 2, store.StatusRunning: 1, store.StatusFailed: 1, store.StatusScheduled: 2},
			StartedMs: t0 + 50, FinishedMs: t0 + 2000}, got[rows[0].Fire()])
		require.Equal(t, store.FireSummary{FireKey: plain[0].Fire(), Rows: 1,
			Counts: map[string]int{store.StatusScheduled: 1}}, got[plain[0].Fire()])
	})
}

func TestFireSummariesSeeBroadcastShards(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows, err := b.store.InsertFires(b.ctx, []store.Execution{
			{App: b.app, TaskCode: "cache.flush", RunTime: t0, Shard: 0, Shards: 2, Broadcast: true, Replica: "r0"},
			{App: b.app, TaskCode: "cache.flush", RunTime: t0, Shard: 1, Shards: 2, Broadcast: true, Replica: "r1"},
		})
		require.NoError(t, err)
		got, err := b.store.FireSummaries(b.ctx, []store.FireKey{rows[0].Fire()})
		require.NoError(t, err)
		require.True(t, got[rows[0].Fire()].Broadcast)
		require.Equal(t, 2, got[rows[0].Fire()].Rows)
	})
}

func TestFireShardsReadsEveryShardInOrder(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := insertShards(t, b, "etl.sharded", t0, 4)
		insertShards(t, b, "etl.sharded", t0+60_000, 4)
		got, err := b.store.FireShards(b.ctx, rows[2].Fire())
		require.NoError(t, err)
		require.Len(t, got, 4)
		for i, r := range got {
			require.Equal(t, i, r.Shard)
			require.Equal(t, rows[i].ID, r.ID)
			require.Equal(t, rows[i].Replica, r.Replica)
		}
	})
}

// Two fires at one run time, their shards interleaved by id: a page
// boundary inside them leaves rows of both on either side, and the page
// after it must know both were listed already; a fire whose rows the
// filter leaves out before the cursor was not.
func TestFiresListedBeforeNamesTheFiresACursorSplits(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		// One row an insert, so that ids follow this order.
		var fires []store.Execution
		for i := range 3 {
			for _, code := range []string{"a.sharded", "b.sharded"} {
				fires = append(fires, store.Execution{App: b.app, TaskCode: code, RunTime: t0, Shard: i, Shards: 3, Replica: "r1"})
			}
		}
		fires = append(fires, store.Execution{App: b.app, TaskCode: "c.plain", RunTime: t0, Replica: "r1"})
		for _, fire := range fires {
			// Not InsertFires: it records a fire's shards together, by
			// the call that inserts its shard 0.
			fire.Status = store.StatusScheduled
			require.NoError(t, b.db.Create(&fire).Error)
		}

		f := store.ExecutionFilter{App: b.app}
		page, next, err := b.store.ListExecutions(b.ctx, f, store.Cursor{}, 3)
		require.NoError(t, err)
		require.Equal(t, []string{"c.plain", "b.sharded", "a.sharded"}, codesOf(page))
		got, err := b.store.FiresListedBefore(b.ctx, f, next, []string{"a.sharded", "b.sharded"})
		require.NoError(t, err)
		require.Equal(t, map[string]bool{"a.sharded": true, "b.sharded": true}, got)

		// Only a's shard 2 was running: with status=scheduled, the first
		// page lists c, b2, b1, and a is still to come.
		require.NoError(t, b.db.Model(&store.Execution{}).Where("app = ? AND task_code = ? AND shard = 2", b.app, "a.sharded").
			Update("status", store.StatusRunning).Error)
		f.Status = store.StatusScheduled
		page, next, err = b.store.ListExecutions(b.ctx, f, store.Cursor{}, 3)
		require.NoError(t, err)
		require.Equal(t, []string{"c.plain", "b.sharded", "b.sharded"}, codesOf(page))
		got, err = b.store.FiresListedBefore(b.ctx, f, next, []string{"a.sharded", "b.sharded"})
		require.NoError(t, err)
		require.Equal(t, map[string]bool{"b.sharded": true}, got)

		// Within a task the cursor is (run_time, shard).
		f = store.ExecutionFilter{App: b.app, TaskCode: "b.sharded"}
		page, next, err = b.store.ListExecutions(b.ctx, f, store.Cursor{}, 1)
		require.NoError(t, err)
		require.Equal(t, 2, page[0].Shard)
		got, err = b.store.FiresListedBefore(b.ctx, f, next, []string{"b.sharded"})
		require.NoError(t, err)
		require.Equal(t, map[string]bool{"b.sharded": true}, got)

		got, err = b.store.FiresListedBefore(b.ctx, f, store.Cursor{}, []string{"b.sharded"})
		require.NoError(t, err)
		require.Empty(t, got, "nothing is before the start")
	})
}

func codesOf(rows []store.Execution) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.TaskCode
	}
	return out
}
