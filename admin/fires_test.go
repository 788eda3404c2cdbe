package admin

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// shardedFires are the rows of shardedFixture, in the order it inserts
// them, one insert each, so that their ids follow it: the shards of a
// fire are interleaved with other rows of its run time, and a page
// boundary can fall anywhere among them.
//
//	08:00 etl.sharded, 6 shards: 3 succeeded, 1 running, 1 failed, 1 scheduled
//	08:00 report.plain
//	07:59 etl.sharded, 3 shards, all succeeded
//	07:59 cache.flush, broadcast to 2 replicas: 1 succeeded, 1 skipped (replica lost)
//	07:59 report.plain
//	07:58 etl.sharded, 2 shards: 1 succeeded, 1 failed
type shardedFixture struct {
	App string
	// Rows are the rows inserted; Fire6 the 6-shard fire's, by shard.
	Rows  []store.Execution
	Fire6 []store.Execution
}

var shardedAt = utc(2026, 11, 30, 8, 0)

// shardedLines are the lines the executions list shows for the fixture:
// "task run-time-minute fire-outcome progress", or "task minute status"
// for an unsharded row.
var shardedLines = []string{
	"etl.sharded 08:00 running 1/6 running, 1 scheduled, 3 succeeded, 1 failed",
	"report.plain 08:00 succeeded",
	"etl.sharded 07:59 succeeded 3/3 succeeded",
	"cache.flush 07:59 succeeded 1/2 succeeded, 1 skipped",
	"report.plain 07:59 succeeded",
	"etl.sharded 07:58 failed 1/2 succeeded, 1 failed",
}

// insertShardedFires writes the fixture's rows in an app of their own,
// which the fixture's scheduler leaves alone (a scheduled or running row
// of its own app it might claim or settle), with a task row for the
// sharded task's page.
func insertShardedFires(t *testing.T, f *fixture) shardedFixture {
	t.Helper()
	fx := shardedFixture{App: "shards-" + f.S.App()}
	ms := func(min int) int64 { return shardedAt.Add(time.Duration(min) * time.Minute).UnixMilli() }
	shard := func(code string, min, i, n int, status string) store.Execution {
		e := store.Execution{App: fx.App, TaskCode: code, RunTime: ms(min), Shard: i, Shards: n, Status: status,
			Source: store.SourceSchedule, Replica: fmt.Sprintf("replica-%d", i), MaxAttempts: 1, ScheduledMs: ms(min) - 60_000}
		if status != store.StatusScheduled {
			e.Attempt, e.StartedMs = 1, ms(min)+int64(10*(i+1))
		}
		if status != store.StatusScheduled && status != store.StatusRunning {
			e.FinishedMs, e.DurationMs = ms(min)+1000+int64(i), 1000+int64(i)-int64(10*(i+1))
		}
		if status == store.StatusFailed {
			e.Error = "shard failed"
		}
		return e
	}
	plain := func(min int) store.Execution {
		e := shard("report.plain", min, 0, 0, store.StatusSucceeded)
		e.Replica = "replica-a"
		return e
	}
	flush := func(i int, status string) store.Execution {
		e := shard("cache.flush", -1, i, 2, status)
		e.Broadcast = true
		if status == store.StatusSkipped {
			e.Reason, e.Attempt, e.StartedMs, e.DurationMs = store.ReasonReplicaLost, 0, 0, 0
		}
		return e
	}
	six := []string{store.StatusSucceeded, store.StatusSucceeded, store.StatusSucceeded, store.StatusRunning, store.StatusFailed, store.StatusScheduled}
	order := []store.Execution{
		shard("etl.sharded", 0, 0, 6, six[0]), shard("etl.sharded", 0, 1, 6, six[1]), plain(0),
		shard("etl.sharded", 0, 2, 6, six[2]), shard("etl.sharded", 0, 3, 6, six[3]),
		shard("etl.sharded", 0, 4, 6, six[4]), shard("etl.sharded", 0, 5, 6, six[5]),
		shard("etl.sharded", -1, 0, 3, store.StatusSucceeded), flush(0, store.StatusSucceeded), plain(-1),
		shard("etl.sharded", -1, 1, 3, store.StatusSucceeded), flush(1, store.StatusSkipped),
		shard("etl.sharded", -1, 2, 3, store.StatusSucceeded),
		shard("etl.sharded", -2, 0, 2, store.StatusSucceeded), shard("etl.sharded", -2, 1, 2, store.StatusFailed),
	}
	for _, e := range order {
		fx.Rows = append(fx.Rows, insertExecutions(t, f, e)[0])
	}
	for _, r := range fx.Rows {
		if r.TaskCode == "etl.sharded" && r.RunTime == ms(0) {
			fx.Fire6 = append(fx.Fire6, r)
		}
	}
	_, err := f.Store.UpsertTask(context.Background(), &store.Task{App: fx.App, Code: "etl.sharded", Name: "Sharded ETL", Spec: "* * * * *", Shards: 6})
	require.NoError(t, err)
	return fx
}

// lineText is a line as shardedLines writes it.
func lineText(v ExecutionView) string {
	s := fmt.Sprintf("%s %s", v.Task, v.RunTime.Format("15:04"))
	if v.Fire == nil {
		return s + " " + v.Status
	}
	return s + " " + v.Fire.Status + " " + v.Fire.Progress
}

// listAll reads the API's executions list page by page, limit at a time,
// and returns the lines of all the pages.
func listAll(t *testing.T, f *fixture, query url.Values, limit int) []string {
	t.Helper()
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100, "the pages end")
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		q.Set("limit", fmt.Sprint(limit))
		q.Set("after", after)
		r := apiGet(t, f, "api/executions?"+q.Encode())
		page := apiData[[]ExecutionView](t, r)
		require.LessOrEqual(t, len(page), limit)
		if r.Next != "" {
			require.NotEmpty(t, page, "a page of rows of fires already shown is read past")
		}
		for _, v := range page {
			got = append(got, lineText(v))
		}
		if r.Next == "" {
			return got
		}
		after = r.Next
	}
}

// A sharded fire is one line of the executions list, with its outcome
// and its shards' progress, whatever the page size: however the page
// boundaries cut its shards, no fire is lost or listed twice.
func TestAPIListsAShardedFireAsOneLineOnEveryPage(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{}, func(t *testing.T, f *fixture) {
		fx := insertShardedFires(t, f)
		app := url.Values{"app": {fx.App}}
		for limit := 1; limit <= len(fx.Rows)+1; limit++ {
			require.Equal(t, shardedLines, listAll(t, f, app, limit), "limit %d", limit)
		}

		// The line of the 6-shard fire: at its newest row, with the fire.
		page := apiData[[]ExecutionView](t, apiGet(t, f, "api/executions?"+app.Encode()))
		require.Len(t, page, len(shardedLines))
		line := page[0]
		require.Equal(t, fx.Fire6[5].ID, line.ID, "the line links the fire's row listed first")
		require.Equal(t, 5, line.Shard)
		require.Equal(t, 6, line.Shards)
		require.Equal(t, &FireView{Status: store.StatusRunning, Shards: 6,
			Counts:    map[string]int{store.StatusSucceeded: 3, store.StatusRunning: 1, store.StatusFailed: 1, store.StatusScheduled: 1},
			Progress:  "1/6 running, 1 scheduled, 3 succeeded, 1 failed",
			StartedAt: ptr(shardedAt.Add(10 * time.Millisecond))}, line.Fire)
		// Unsharded rows are as they were: shard 0 of 1, no fire.
		require.Nil(t, page[1].Fire)
		require.Equal(t, 0, page[1].Shard)
		require.Equal(t, 1, page[1].Shards)
		// The broadcast fire.
		require.True(t, page[3].Broadcast)
		require.True(t, page[3].Fire.Broadcast)
		// A final fire has its span: first start to last finish.
		require.Equal(t, ptr(shardedAt.Add(-2*time.Minute+1001*time.Millisecond)), page[5].Fire.FinishedAt)
		require.Equal(t, int64(991), page[5].Fire.DurationMs)
	})
}

// Within a task the list pages by (run_time, shard), and a filter that
// selects some shards of a fire lists the fire once, with all its shards
// counted.
func TestAPIListsShardedFiresOfATaskAndByStatus(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{}, func(t *testing.T, f *fixture) {
		fx := insertShardedFires(t, f)
		byTask := url.Values{"app": {fx.App}, "task": {"etl.sharded"}}
		byStatus := url.Values{"app": {fx.App}, "status": {store.StatusSucceeded}}
		byReplica := url.Values{"app": {fx.App}, "replica": {"replica-1"}}
		for limit := 1; limit <= 12; limit++ {
			require.Equal(t, []string{shardedLines[0], shardedLines[2], shardedLines[5]}, listAll(t, f, byTask, limit), "task, limit %d", limit)
			// The broadcast fire's skipped shard, its newest row, is not
			// selected: the fire is listed at its succeeded one.
			require.Equal(t, []string{shardedLines[0], shardedLines[1], shardedLines[2], shardedLines[4], shardedLines[3], shardedLines[5]},
				listAll(t, f, byStatus, limit), "status, limit %d", limit)
			// replica-1's rows: the broadcast fire's is newer than the
			// 3-shard fire's.
			require.Equal(t, []string{shardedLines[0], shardedLines[3], shardedLines[2], shardedLines[5]},
				listAll(t, f, byReplica, limit), "replica, limit %d", limit)
		}
		failed := url.Values{"app": {fx.App}, "status": {store.StatusFailed}}
		require.Equal(t, []string{shardedLines[0], shardedLines[5]}, listAll(t, f, failed, 1))

		// The task's page shows its recent fires the same way.
		d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/etl.sharded?"+url.Values{"app": {fx.App}}.Encode()))
		var recent []string
		for _, v := range d.Recent {
			recent = append(recent, lineText(v))
		}
		require.Equal(t, []string{shardedLines[0], shardedLines[2], shardedLines[5]}, recent)
		// The task's last execution is its fire, running while a shard is.
		require.Equal(t, store.StatusRunning, d.Task.Last.Fire.Status)
		require.Equal(t, StateRunning, d.Task.State)
		tasks := apiData[[]TaskView](t, apiGet(t, f, "api/tasks?"+url.Values{"app": {fx.App}}.Encode()))
		require.Len(t, tasks, 1)
		require.Equal(t, "1/6 running, 1 scheduled, 3 succeeded, 1 failed", tasks[0].Last.Fire.Progress)
		require.Equal(t, StateRunning, tasks[0].State)
	})
}

// One shard's execution lists every shard of its fire, with its replica.
func TestAPIExecutionOfAShardListsItsFire(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{}, func(t *testing.T, f *fixture) {
		fx := insertShardedFires(t, f)
		v := apiData[ExecutionView](t, apiGet(t, f, fmt.Sprintf("api/executions/%d", fx.Fire6[3].ID)))
		require.Equal(t, 3, v.Shard)
		require.Equal(t, 6, v.Shards)
		require.False(t, v.Broadcast)
		require.Equal(t, store.StatusRunning, v.Status)
		require.Equal(t, store.StatusRunning, v.Fire.Status)
		require.Equal(t, "1/6 running, 1 scheduled, 3 succeeded, 1 failed", v.Fire.Progress)
		require.Len(t, v.FireShards, 6)
		for i, s := range v.FireShards {
			require.Equal(t, fx.Fire6[i].ID, s.ID)
			require.Equal(t, i, s.Shard)
			require.Equal(t, fmt.Sprintf("replica-%d", i), s.Replica)
			require.Equal(t, fx.Fire6[i].Status, s.Status)
			require.Nil(t, s.Output, "the list of shards leaves output out")
		}

		plain := apiData[ExecutionView](t, apiGet(t, f, fmt.Sprintf("api/executions/%d", fx.Rows[2].ID)))
		require.Nil(t, plain.Fire)
		require.Nil(t, plain.FireShards)
	})
}

func TestFireOutcome(t *testing.T) {
	t.Parallel()
	const (
		sc, ru, re = store.StatusScheduled, store.StatusRunning, store.StatusRetrying
		ok, fa, to = store.StatusSucceeded, store.StatusFailed, store.StatusTimedOut
		sk         = store.StatusSkipped
	)
	for _, c := range []struct {
		shards    []string
		broadcast bool
		want      string
	}{
		{[]string{sc, sc, sc}, false, sc},
		{[]string{sc, ok, sc}, false, ru},
		{[]string{re, ok, ok}, false, ru},
		{[]string{ru, fa, ok}, false, ru},
		{[]string{ok, ok, ok}, false, ok},
		{[]string{ok, fa, to}, false, fa},
		{[]string{ok, to, ok}, false, to},
		{[]string{sk, sk}, false, sk},
		{[]string{ok, sk}, false, sk},
		{[]string{ok, sk}, true, ok},
		{[]string{sk, sk}, true, sk},
		{[]string{fa, sk}, true, fa},
	} {
		counts := map[string]int{}
		for _, s := range c.shards {
			counts[s]++
		}
		require.Equal(t, c.want, fireOutcome(counts, len(c.shards), c.broadcast), "%v broadcast %v", c.shards, c.broadcast)
	}
	require.Equal(t, "2/5 running, 1 retrying, 1 timed out, 1 skipped",
		fireProgress(map[string]int{ru: 2, re: 1, to: 1, sk: 1}, 5))
}

// A fire the engine records and runs as three shards, triggered through
// the scheduler, is one line once its shards have run.
func TestAPIListsATriggeredShardedFireOnce(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{register: func(s *xtimer.Scheduler, ran chan string) {
		registerDefaults(s, ran)
		must(s.Register("etl.split", "0 0 1 1 *", func(ctx context.Context, run *xtimer.Run) error {
			run.Printf("shard %d of %d\n", run.Shard, run.Shards)
			return nil
		}, xtimer.WithShards(3)))
	}}, func(t *testing.T, f *fixture) {
		e, err := f.S.Trigger(context.Background(), "etl.split")
		require.NoError(t, err)
		require.Equal(t, 0, e.Shard)
		require.Equal(t, 3, e.Shards)
		shards, err := f.Store.FireShards(context.Background(), store.FireKey{App: f.S.App(), TaskCode: "etl.split", RunTime: e.RunTime.UnixMilli()})
		require.NoError(t, err)
		require.Len(t, shards, 3)
		for _, s := range shards {
			waitSettled(t, f, s.ID, store.StatusSucceeded)
		}
		page := apiData[[]ExecutionView](t, apiGet(t, f, "api/executions?task=etl.split"))
		require.Len(t, page, 1)
		require.Equal(t, "succeeded", page[0].Fire.Status)
		require.Equal(t, "3/3 succeeded", page[0].Fire.Progress)
		require.Equal(t, map[string]int{store.StatusSucceeded: 3}, page[0].Fire.Counts)
		require.NotNil(t, page[0].Fire.FinishedAt)

		v := apiData[ExecutionView](t, apiGet(t, f, fmt.Sprintf("api/executions/%d", e.ID)))
		require.Len(t, v.FireShards, 3)
		for i, s := range v.FireShards {
			require.Equal(t, i, s.Shard)
			require.Equal(t, "replica-a", s.Replica, "the one replica runs every shard")
		}
	})
}
