package xtimer

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// never is a schedule that does not fire during a test (29 February).
const never = "0 0 29 2 *"

// walkExecutions reads every page of f, checking that each page but the
// last is full, and returns the executions in the order read.
func walkExecutions(t *testing.T, s *Scheduler, f ExecutionFilter) []Execution {
	t.Helper()
	var all []Execution
	for pages := 1; ; pages++ {
		page, err := s.Executions(context.Background(), f)
		require.NoError(t, err)
		if page.Next == "" {
			return append(all, page.Executions...)
		}
		require.Len(t, page.Executions, cmp.Or(f.Limit, DefaultPageLimit), "page %d is not the last, so it is full", pages)
		require.Less(t, pages, 1000, "the walk ends")
		all = append(all, page.Executions...)
		f.After = page.Next
	}
}

func executionIDs(es []Execution) []int64 {
	ids := make([]int64, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}

// A walk through the pages of Executions sees every execution of the
// filter exactly once, newest run time first (the same run time: the
// newest row first), each in its task's zone, and rows recorded during the
// walk do not reappear on its later pages.
func TestExecutionsPagesThroughTheHistoryNewestFirstOnceEach(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := newScheduler(t, setupOpts{db: db, app: testsvc.App(t)}, nil)
		paris := mustZone(t, "Europe/Paris")
		require.NoError(t, s.Register("pay.a", never, func(context.Context, *Run) error { return nil }, WithLocation(paris)))
		require.NoError(t, s.Start(ctx))
		stopOnCleanup(t, s)

		// 150 fires of pay.a a minute apart, and 75 of pay.b, a task no
		// longer registered, at the same instants as every other one of
		// pay.a: ties on the run time. All settled, so the engine leaves
		// them alone.
		t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
		var rows []store.Execution
		for i := range 150 {
			at := t0.Add(time.Duration(i) * time.Minute).UnixMilli()
			status, source := store.StatusSucceeded, store.SourceSchedule
			if i%3 == 0 {
				status = store.StatusFailed
			}
			if i%5 == 0 {
				source = store.SourceManual
			}
			rows = append(rows, store.Execution{App: s.App(), TaskCode: "pay.a", RunTime: at, Status: status, Source: source, Attempt: 1, MaxAttempts: 1})
			if i%2 == 0 {
				rows = append(rows, store.Execution{App: s.App(), TaskCode: "pay.b", RunTime: at, Status: store.StatusSkipped, Reason: store.ReasonMisfire, Source: store.SourceCatchup, MaxAttempts: 1})
			}
		}
		require.NoError(t, s.store.DB().Create(&rows).Error)
		newestFirst := slices.Clone(rows)
		slices.SortFunc(newestFirst, func(a, b store.Execution) int {
			return cmp.Or(cmp.Compare(b.RunTime, a.RunTime), cmp.Compare(b.ID, a.ID))
		})
		want := func(keep func(store.Execution) bool) []int64 {
			var ids []int64
			for _, r := range newestFirst {
				if keep(r) {
					ids = append(ids, r.ID)
				}
			}
			return ids
		}

		first, err := s.Executions(ctx, ExecutionFilter{})
		require.NoError(t, err)
		require.Len(t, first.Executions, DefaultPageLimit, "Limit 0 is DefaultPageLimit")
		require.NotEmpty(t, first.Next)

		all := walkExecutions(t, s, ExecutionFilter{Limit: 40})
		require.Equal(t, want(func(store.Execution) bool { return true }), executionIDs(all))
		for _, e := range all {
			zone := map[string]string{"pay.a": "Europe/Paris", "pay.b": "UTC"}[e.Code]
			require.Equal(t, zone, e.RunTime.Location().String(), "execution %d of %s", e.ID, e.Code)
		}
		require.Equal(t, Execution{
			ID: newestFirst[0].ID, App: s.App(), Code: "pay.a", RunTime: t0.Add(149 * time.Minute).In(paris),
			PlannedAt: t0.Add(149 * time.Minute).In(paris),
			Status:    StatusSucceeded, Source: SourceSchedule, Attempt: 1, MaxAttempts: 1, Shards: 1,
		}, all[0])

		// A fire recorded after the first page, newer than every row, is
		// not on the pages that follow.
		page, err := s.Executions(ctx, ExecutionFilter{Limit: 40})
		require.NoError(t, err)
		late := store.Execution{App: s.App(), TaskCode: "pay.b", RunTime: t0.Add(time.Hour * 24).UnixMilli(), Status: store.StatusSucceeded, Source: store.SourceManual}
		require.NoError(t, s.store.DB().Create(&late).Error)
		rest := walkExecutions(t, s, ExecutionFilter{Limit: 40, After: page.Next})
		require.Equal(t, want(func(store.Execution) bool { return true }), executionIDs(append(page.Executions, rest...)))

		from, to := t0.Add(30*time.Minute), t0.Add(90*time.Minute)
		for _, c := range []struct {
			name   string
			filter ExecutionFilter
			keep   func(store.Execution) bool
		}{
			{"code", ExecutionFilter{Code: "pay.a"}, func(r store.Execution) bool { return r.TaskCode == "pay.a" }},
			{"status", ExecutionFilter{Status: StatusFailed}, func(r store.Execution) bool { return r.Status == store.StatusFailed }},
			{"source", ExecutionFilter{Source: SourceManual}, func(r store.Execution) bool { return r.Source == store.SourceManual }},
			{"run-time range", ExecutionFilter{From: from, To: to}, func(r store.Execution) bool {
				return r.RunTime >= from.UnixMilli() && r.RunTime < to.UnixMilli()
			}},
			{"code, status and range", ExecutionFilter{Code: "pay.a", Status: StatusSucceeded, From: from, To: to}, func(r store.Execution) bool {
				return r.TaskCode == "pay.a" && r.Status == store.StatusSucceeded && r.RunTime >= from.UnixMilli() && r.RunTime < to.UnixMilli()
			}},
			{"a range bound between two milliseconds", ExecutionFilter{From: from.Add(-time.Microsecond), To: to.Add(time.Microsecond)}, func(r store.Execution) bool {
				return r.RunTime >= from.UnixMilli() && r.RunTime <= to.UnixMilli()
			}},
		} {
			f := c.filter
			f.To = cmp.Or(f.To, t0.Add(time.Hour*23)) // leaves out the late fire
			f.Limit = 7
			require.Equal(t, want(c.keep), executionIDs(walkExecutions(t, s, f)), c.name)
		}
	})
}

// A filter Executions cannot serve is refused, naming the field and the
// value, before anything is read.
func TestExecutionsRefusesABadFilterNamingTheField(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t)}, nil)
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		filter ExecutionFilter
		want   string
	}{
		{ExecutionFilter{Limit: -1}, `xtimer: ExecutionFilter.Limit = -1: want 1-1000, or 0 for DefaultPageLimit (100)`},
		{ExecutionFilter{Limit: MaxPageLimit + 1}, `xtimer: ExecutionFilter.Limit = 1001: want 1-1000, or 0 for DefaultPageLimit (100)`},
		{ExecutionFilter{After: "next"}, `xtimer: ExecutionFilter.After = "next": want the Next of a previous page, or "" for the first page`},
		{ExecutionFilter{After: "1764496800000"}, `xtimer: ExecutionFilter.After = "1764496800000": want the Next of a previous page, or "" for the first page`},
		{ExecutionFilter{After: "1764496800000.0"}, `xtimer: ExecutionFilter.After = "1764496800000.0": want the Next of a previous page, or "" for the first page`},
		{ExecutionFilter{Status: "done"}, `xtimer: ExecutionFilter.Status = "done": want one of "scheduled", "running", "retrying", "succeeded", "failed", "timed_out", "skipped"`},
		{ExecutionFilter{Source: "retry"}, `xtimer: ExecutionFilter.Source = "retry": want one of "schedule", "manual", "catchup", "backfill"`},
		{ExecutionFilter{Code: "a\x00b"}, `xtimer: ExecutionFilter.Code = "a\x00b": contains a NUL byte`},
		{ExecutionFilter{From: t0.Add(time.Second), To: t0}, `xtimer: ExecutionFilter.From = 2026-11-30 10:00:01 +0000 UTC: want a time at or before To (2026-11-30 10:00:00 +0000 UTC)`},
		{ExecutionFilter{To: time.Unix(0, 0).UTC()}, `xtimer: ExecutionFilter.To = 1970-01-01 00:00:00 +0000 UTC: want a time after 1970-01-01 UTC, when run times start`},
	} {
		_, err := s.Executions(context.Background(), c.filter)
		require.EqualError(t, err, c.want)
	}
}

// Tasks lists the app's Go and HTTP tasks as stored, with the schedule
// that applies, and filters them by kind, status, owner and code prefix.
func TestTasksListsGoAndHTTPTasksWithTheirFields(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := newScheduler(t, setupOpts{db: db, app: testsvc.App(t)}, allowLoopback)
		paris := mustZone(t, "Europe/Paris")
		ok := func(context.Context, *Run) error { return nil }
		endAt := time.Date(2030, 1, 1, 0, 0, 0, 0, paris)
		require.NoError(t, s.Register("billing.reconcile", never, ok, WithLocation(paris), WithName("Reconcile payments"),
			WithDescription("matches the ledger"), WithOwner("payments"), WithTimeout(time.Minute), WithRetry(3),
			WithBackoff(2*time.Second, time.Minute), WithMisfire(MisfireSkip), WithMisfireWindow(10*time.Minute),
			WithOverlap(OverlapForbid), WithEndAt(endAt), WithMaxRuns(100)))
		require.NoError(t, s.Register("report.daily", never, ok, WithOwner("reports")))
		require.NoError(t, s.Start(ctx))
		stopOnCleanup(t, s)
		require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{
			Code: "billing.ping", Owner: "payments", Spec: "0 0 1 1 *", Zone: "Asia/Shanghai", Paused: true,
			Target: HTTPTarget{Method: "POST", URL: "http://127.0.0.1:9/ping"},
		}))
		require.NoError(t, s.SetSchedule(ctx, "report.daily", "0 30 6 * * *", DialectCron, "America/New_York"))

		tasks, err := s.Tasks(ctx, TaskFilter{})
		require.NoError(t, err)
		require.Len(t, tasks, 3)
		reconcile := tasks[1]
		require.True(t, reconcile.EndAt.Equal(endAt))
		require.Equal(t, "Europe/Paris", reconcile.EndAt.Location().String())
		reconcile.EndAt = time.Time{}
		require.Equal(t, []Task{
			{
				Code: "billing.ping", Name: "billing.ping", Owner: "payments", Kind: KindHTTP,
				Spec: "0 0 1 1 *", Dialect: DialectCron, Zone: "Asia/Shanghai",
				CodeSpec: "0 0 1 1 *", CodeDialect: DialectCron, CodeZone: "Asia/Shanghai",
				Paused: true, Timeout: DefaultHTTPTimeout, MaxAttempts: 1,
				BackoffBase: DefaultBackoffBase, BackoffMax: DefaultBackoffMax,
				Misfire: MisfireRunOnce, MisfireWindow: DefaultMisfireWindow, Overlap: OverlapAllow,
				Replicas: 1,
			},
			{
				Code: "billing.reconcile", Name: "Reconcile payments", Description: "matches the ledger", Owner: "payments", Kind: KindGo,
				Spec: never, Dialect: DialectCron, Zone: "Europe/Paris",
				CodeSpec: never, CodeDialect: DialectCron, CodeZone: "Europe/Paris",
				Timeout: time.Minute, MaxAttempts: 3, BackoffBase: 2 * time.Second, BackoffMax: time.Minute,
				Misfire: MisfireSkip, MisfireWindow: 10 * time.Minute, Overlap: OverlapForbid, MaxRuns: 100,
				Replicas: 1,
			},
			{
				Code: "report.daily", Name: "report.daily", Owner: "reports", Kind: KindGo,
				Spec: "0 30 6 * * *", Dialect: DialectCron, Zone: "America/New_York", Overridden: true,
				CodeSpec: never, CodeDialect: DialectCron, CodeZone: "UTC",
				Timeout: DefaultTimeout, MaxAttempts: 1, BackoffBase: DefaultBackoffBase, BackoffMax: DefaultBackoffMax,
				Misfire: MisfireRunOnce, MisfireWindow: DefaultMisfireWindow, Overlap: OverlapAllow,
				Replicas: 1,
			},
		}, append(tasks[:1:1], reconcile, tasks[2]))

		codes := func(f TaskFilter) []string {
			tasks, tasksErr := s.Tasks(ctx, f)
			require.NoError(t, tasksErr)
			var out []string
			for _, t := range tasks {
				out = append(out, t.Code)
			}
			return out
		}
		paused, active := true, false
		require.Equal(t, []string{"billing.ping"}, codes(TaskFilter{Kind: KindHTTP}))
		require.Equal(t, []string{"billing.reconcile", "report.daily"}, codes(TaskFilter{Kind: KindGo}))
		require.Equal(t, []string{"billing.ping"}, codes(TaskFilter{Paused: &paused}))
		require.Equal(t, []string{"billing.reconcile", "report.daily"}, codes(TaskFilter{Paused: &active}))
		require.Equal(t, []string{"billing.ping", "billing.reconcile"}, codes(TaskFilter{Owner: "payments"}))
		require.Equal(t, []string{"billing.reconcile"}, codes(TaskFilter{Owner: "payments", Kind: KindGo}))
		require.Equal(t, []string{"billing.ping", "billing.reconcile"}, codes(TaskFilter{CodePrefix: "billing."}))
		require.Equal(t, []string{"report.daily"}, codes(TaskFilter{CodePrefix: "report"}))
		require.Empty(t, codes(TaskFilter{CodePrefix: "eport"}), "a prefix, not a substring")
		require.Empty(t, codes(TaskFilter{CodePrefix: "Billing."}), "codes are compared as they are")

		_, err = s.Tasks(ctx, TaskFilter{Kind: "func"})
		require.EqualError(t, err, `xtimer: TaskFilter.Kind = "func": want "go" (KindGo) or "http" (KindHTTP)`)
	})
}

// Replicas lists the live replicas of the app, with what each stored of
// itself; a stopped replica leaves the list.
func TestReplicasListsTheStartedSchedulers(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		app, lock := testsvc.App(t), NewLocalLocker(SystemClock())
		start := func(id, code string) *Scheduler {
			s := newScheduler(t, setupOpts{db: db, app: app}, func(o *Options) {
				o.InstanceID, o.Version, o.Locker = id, "v1.2.3", lock
			})
			require.NoError(t, s.Register(code, never, func(context.Context, *Run) error { return nil }))
			require.NoError(t, s.Start(ctx))
			return s
		}
		before := time.Now().Add(-time.Millisecond)
		a := start("replica-a", "only.on.a")
		stopOnCleanup(t, a)
		b := start("replica-b", "only.on.b")

		got, err := a.Replicas(ctx)
		require.NoError(t, err)
		require.Len(t, got, 2)
		host, _ := os.Hostname()
		for i, r := range got {
			id := []string{"replica-a", "replica-b"}[i]
			require.Equal(t, id, r.ID)
			require.Equal(t, host, r.Host)
			require.Equal(t, os.Getpid(), r.PID)
			require.Equal(t, "v1.2.3", r.Version)
			require.Equal(t, []string{fmt.Sprintf("only.on.%c", id[len(id)-1])}, r.Handlers)
			require.False(t, r.StartedAt.Before(before.Truncate(time.Millisecond)), "started %s", r.StartedAt)
			require.False(t, r.HeartbeatAt.Before(r.StartedAt))
		}

		require.NoError(t, b.Stop(ctx))
		got, err = a.Replicas(ctx)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, "replica-a", got[0].ID)
	})
}
