package xtimer

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// Register refuses a shard count out of range, and a task both sharded
// and broadcast, naming the option and the value; an HTTP task the same,
// naming the field.
func TestShardOptionsRefuseBadInput(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, allowLoopback)
	nop := func(context.Context, *Run) error { return nil }
	for _, tc := range []struct {
		opts []TaskOption
		want string
	}{
		{[]TaskOption{WithShards(0)}, `xtimer: task "t": WithShards(0): shards must be 1-1024`},
		{[]TaskOption{WithShards(-3)}, `xtimer: task "t": WithShards(-3): shards must be 1-1024`},
		{[]TaskOption{WithShards(1025)}, `xtimer: task "t": WithShards(1025): shards must be 1-1024`},
		{[]TaskOption{WithShards(4), WithBroadcast()}, `xtimer: task "t": WithBroadcast(): the task has 4 shards already (WithShards): a fire is either sharded or broadcast`},
		{[]TaskOption{WithBroadcast(), WithShards(4)}, `xtimer: task "t": WithShards(4): the task is broadcast already (WithBroadcast): a fire is either sharded or broadcast`},
	} {
		err := s.Register("t", "* * * * *", nop, tc.opts...)
		require.EqualError(t, err, tc.want)
	}
	require.NoError(t, s.Register("one", "* * * * *", nop, WithShards(1)), "one shard is no sharding")
	require.NoError(t, s.Register("max", "* * * * *", nop, WithShards(MaxShards)))

	require.NoError(t, s.Start(context.Background()))
	stopOnCleanup(t, s)
	for _, tc := range []struct {
		task HTTPTask
		want string
	}{
		{HTTPTask{Shards: -1}, `shards "-1": want 2-1024 shards, or 0 for none`},
		{HTTPTask{Shards: 1025}, `shards "1025": want 2-1024 shards, or 0 for none`},
		{HTTPTask{Shards: 3, Broadcast: true}, `shards "3": a broadcast task has one shard per replica: set shards or broadcast, not both`},
	} {
		tc.task.Code, tc.task.Spec, tc.task.Target = "cb", hourly, HTTPTarget{Method: "GET", URL: "http://127.0.0.1:9/x"}
		err := s.CreateHTTPTask(context.Background(), tc.task)
		require.ErrorContains(t, err, tc.want)
	}
}

// A manual run of a task of 5 shards records its 5 shards and returns
// shard 0; each shard runs once with its own Run.ID, Shard and Shards,
// and is an execution of its own. Backfill counts fires, not shards.
func TestTriggerOfAShardedTaskRunsEveryShardOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := newScheduler(t, setupOpts{db: db, app: testsvc.App(t)}, nil)
		var mu sync.Mutex
		runs := map[string]*Run{}
		done := make(chan struct{}, 100)
		require.NoError(t, s.Register("split", hourly, func(_ context.Context, run *Run) error {
			mu.Lock()
			runs[run.ID] = run
			mu.Unlock()
			done <- struct{}{}
			return nil
		}, WithShards(5)))
		require.NoError(t, s.Start(ctx))
		stopOnCleanup(t, s)

		ex, err := s.Trigger(ctx, "split")
		require.NoError(t, err)
		require.Equal(t, 0, ex.Shard)
		require.Equal(t, 5, ex.Shards)
		for range 5 {
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("a shard did not run")
			}
		}
		mu.Lock()
		require.Len(t, runs, 5)
		for i := range 5 {
			id := fmt.Sprintf("%s/split/%d/%d", s.App(), ex.RunTime.UnixMilli(), i)
			run := runs[id]
			require.NotNil(t, run, "shard %d runs as %s", i, id)
			require.Equal(t, i, run.Shard)
			require.Equal(t, 5, run.Shards)
			require.Equal(t, SourceManual, run.Source)
		}
		mu.Unlock()

		page, err := s.Executions(ctx, ExecutionFilter{Code: "split"})
		require.NoError(t, err)
		require.Len(t, page.Executions, 5)
		ids := map[int64]bool{}
		for i, e := range page.Executions {
			require.Equal(t, 4-i, e.Shard, "newest first, the fire's shards last to first")
			require.Equal(t, 5, e.Shards)
			ids[e.ID] = true
		}
		require.Len(t, ids, 5, "every shard is an execution of its own")

		n, err := s.Backfill(ctx, "split", ex.RunTime.Add(-72*time.Hour), ex.RunTime)
		require.NoError(t, err)
		require.Equal(t, 3, n, "three daily fires, of five shards each")
		var rows int64
		require.NoError(t, db.Model(&store.Execution{}).Where("app = ? AND source = ?", s.App(), store.SourceBackfill).Count(&rows).Error)
		require.EqualValues(t, 15, rows)
	})
}

// A sharded HTTP task calls its endpoint once per shard, each call
// carrying its shard and the fire's count; an unsharded one sends
// neither header.
func TestShardedHTTPTaskSendsTheShardHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startHTTP(t, nil)
	rc := newReceiver(t, nil)
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "cb.split", Spec: hourly, Shards: 3,
		Target: HTTPTarget{Method: "POST", URL: rc.URL + "/split"}}))
	got, err := s.HTTPTask(ctx, "cb.split")
	require.NoError(t, err)
	require.Equal(t, 3, got.Shards)
	ex, err := s.Trigger(ctx, "cb.split")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(rc.requests()) == 3 }, 15*time.Second, 10*time.Millisecond)
	var shards []string
	for _, req := range rc.requests() {
		require.Equal(t, "3", req.Header.Get(HeaderShards))
		shards = append(shards, req.Header.Get(HeaderShard))
	}
	slices.Sort(shards)
	require.Equal(t, []string{"0", "1", "2"}, shards)
	waitRow(t, s, ex.ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })

	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "cb.plain", Spec: hourly, Target: HTTPTarget{Method: "POST", URL: rc.URL + "/plain"}}))
	row := runOnce(t, s, "cb.plain")
	require.Equal(t, store.StatusSucceeded, row.Status, row.Error)
	last := rc.requests()[len(rc.requests())-1]
	require.Empty(t, last.Header.Values(HeaderShard))
	require.Empty(t, last.Header.Values(HeaderShards))
	require.Equal(t, strconv.FormatInt(row.ID, 10), last.Header.Get(HeaderExecution))
}
