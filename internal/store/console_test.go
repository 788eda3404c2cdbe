package store_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// hostile are filter values that must match literally and harm nothing.
var hostile = []string{`'; DROP TABLE xtimer_tasks; --`, `%`, `_`, `<script>alert(1)</script>`, `!`, `\`}

// history writes a fixture of 36 executions straight into the table: tasks
// a, b and one hostile code, run times t0 .. t0+11s, statuses, sources and
// replicas cycling at different periods so that every combination of
// filters selects a different, non-empty set.
func history(t *testing.T, b *bundle) []store.Execution {
	t.Helper()
	statuses := []string{store.StatusSucceeded, store.StatusFailed, store.StatusSucceeded, store.StatusTimedOut, store.StatusRunning}
	sources := []string{store.SourceSchedule, store.SourceSchedule, store.SourceManual}
	replicas := []string{"r1", "r2"}
	var rows []store.Execution
	for i := range 36 {
		rows = append(rows, store.Execution{
			App:      b.app,
			TaskCode: []string{"a", "b", hostile[0]}[i%3],
			// Pairs of rows share a run time, so ties go by id.
			RunTime: t0 + int64(i/2)*1000,
			Status:  statuses[i%len(statuses)],
			Source:  sources[i/3%len(sources)],
			Replica: replicas[i/2%len(replicas)],
			Output:  "", Error: "",
		})
	}
	require.NoError(t, b.db.Create(&rows).Error)
	other := store.Execution{App: b.app + "x", TaskCode: "a", RunTime: t0, Status: store.StatusFailed, Replica: "r1"}
	require.NoError(t, b.db.Create(&other).Error)
	return rows
}

// expect is ListExecutions done in Go on the fixture.
func expect(rows []store.Execution, f store.ExecutionFilter) []int64 {
	var ids []int64
	for _, e := range rows {
		if e.App == f.App && (f.TaskCode == "" || e.TaskCode == f.TaskCode) &&
			(f.Status == "" || e.Status == f.Status) && (f.Source == "" || e.Source == f.Source) &&
			(f.Replica == "" || e.Replica == f.Replica) &&
			(f.FromMs == 0 || e.RunTime >= f.FromMs) && (f.ToMs == 0 || e.RunTime < f.ToMs) {
			ids = append(ids, e.ID)
		}
	}
	byID := map[int64]store.Execution{}
	for _, e := range rows {
		byID[e.ID] = e
	}
	slices.SortFunc(ids, func(x, y int64) int {
		return cmp.Or(cmp.Compare(byID[y].RunTime, byID[x].RunTime), cmp.Compare(y, x))
	})
	return ids
}

// listAll pages through a listing and returns the ids in the order served,
// failing on a page that breaks the paging contract.
func listAll(t *testing.T, b *bundle, f store.ExecutionFilter, limit int) []int64 {
	t.Helper()
	var ids []int64
	var cursor store.Cursor
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100, "paging does not end")
		page, next, err := b.store.ListExecutions(b.ctx, f, cursor, limit)
		require.NoError(t, err)
		for _, e := range page {
			ids = append(ids, e.ID)
		}
		if next == (store.Cursor{}) {
			return ids
		}
		require.Len(t, page, limit, "a page with a next cursor is full")
		require.Equal(t, store.Cursor{RunTime: page[limit-1].RunTime, ID: page[limit-1].ID}, next)
		cursor = next
	}
}

func TestListExecutionsFiltersAloneAndCombinedPageThroughEveryRowOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := history(t, b)
		app := b.app
		cases := []struct {
			f    store.ExecutionFilter
			want int // rows, counted by hand from the fixture's cycles
		}{
			{store.ExecutionFilter{App: app}, 36},
			{store.ExecutionFilter{App: app, TaskCode: "a"}, 12},
			{store.ExecutionFilter{App: app, TaskCode: hostile[0]}, 12},
			{store.ExecutionFilter{App: app, Status: store.StatusFailed}, 7},
			{store.ExecutionFilter{App: app, Source: store.SourceManual}, 12},
			{store.ExecutionFilter{App: app, Replica: "r2"}, 18},
			{store.ExecutionFilter{App: app, FromMs: t0 + 3000, ToMs: t0 + 7000}, 8},
			{store.ExecutionFilter{App: app, TaskCode: "b", Status: store.StatusSucceeded}, 4},
			{store.ExecutionFilter{App: app, TaskCode: "a", Source: store.SourceSchedule, Replica: "r1"}, 4},
			{store.ExecutionFilter{App: app, Status: store.StatusFailed, Replica: "r1", FromMs: t0 + 2000}, 2},
			{store.ExecutionFilter{App: app, TaskCode: "b", Status: store.StatusRunning, Source: store.SourceManual, Replica: "r2", FromMs: t0, ToMs: t0 + 18000}, 1},
			{store.ExecutionFilter{App: app, Status: store.StatusRunning, Replica: "r1"}, 4},
			{store.ExecutionFilter{App: app, Source: store.SourceManual, Replica: "r2"}, 6},
			{store.ExecutionFilter{App: app, Source: store.SourceCatchup}, 0},
		}
		for _, c := range cases {
			want := expect(rows, c.f)
			require.Len(t, want, c.want, "fixture count for %+v", c.f)
			for _, limit := range []int{1, 5, 0} {
				require.Equal(t, want, listAll(t, b, c.f, limit), "%+v, limit %d", c.f, limit)
			}
		}

		// The first page of the newest rows, spelled out: ties go by id.
		page, _, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{App: app, Replica: "r2"}, store.Cursor{}, 3)
		require.NoError(t, err)
		require.Equal(t, []int64{rows[35].ID, rows[34].ID, rows[31].ID}, []int64{page[0].ID, page[1].ID, page[2].ID})
		require.Equal(t, t0+17000, page[0].RunTime)
		require.Equal(t, t0+15000, page[2].RunTime)
	})
}

func TestListExecutionsTakesHostileValuesLiterally(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := history(t, b)
		for _, v := range hostile[1:] {
			for _, f := range []store.ExecutionFilter{
				{App: b.app, TaskCode: v}, {App: b.app, Replica: v}, {App: v}, {App: b.app, TaskCode: "a", Replica: v},
			} {
				page, next, err := b.store.ListExecutions(b.ctx, f, store.Cursor{}, 0)
				require.NoError(t, err, "%+v", f)
				require.Empty(t, page, "%+v matches nothing: exact match, no wildcards", f)
				require.Zero(t, next)
			}
		}
		require.Equal(t, expect(rows, store.ExecutionFilter{App: b.app, TaskCode: hostile[0]}),
			listAll(t, b, store.ExecutionFilter{App: b.app, TaskCode: hostile[0]}, 4))
		require.True(t, b.db.Migrator().HasTable("xtimer_tasks"))
		require.Equal(t, expect(rows, store.ExecutionFilter{App: b.app}), listAll(t, b, store.ExecutionFilter{App: b.app}, 0))
	})
}

func TestListExecutionsRejectsBadFiltersNamingTheField(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		for _, c := range []struct {
			f    store.ExecutionFilter
			want string
		}{
			{store.ExecutionFilter{}, `store: list executions: app is required`},
			{store.ExecutionFilter{App: b.app, Status: "bogus"},
				`store: list executions: status "bogus": want one of scheduled, running, retrying, succeeded, failed, timed_out, skipped`},
			{store.ExecutionFilter{App: b.app, Status: "FAILED"},
				`store: list executions: status "FAILED": want one of scheduled, running, retrying, succeeded, failed, timed_out, skipped`},
			{store.ExecutionFilter{App: b.app, Source: "cron"},
				`store: list executions: source "cron": want one of schedule, manual, retry, catchup`},
			{store.ExecutionFilter{App: b.app, FromMs: t0 + 1, ToMs: t0},
				fmt.Sprintf(`store: list executions: from_ms %d is after to_ms %d`, t0+1, t0)},
			{store.ExecutionFilter{App: b.app, TaskCode: "a\x00b"},
				`store: list executions: task "a\x00b": want UTF-8 text without NUL bytes`},
			{store.ExecutionFilter{App: b.app, Replica: "r\xff"},
				`store: list executions: replica "r\xff": want UTF-8 text without NUL bytes`},
		} {
			_, _, err := b.store.ListExecutions(b.ctx, c.f, store.Cursor{}, 0)
			require.EqualError(t, err, c.want)
		}
		// Only one bound, or equal bounds, are fine.
		for _, f := range []store.ExecutionFilter{{App: b.app, FromMs: t0}, {App: b.app, ToMs: t0}, {App: b.app, FromMs: t0, ToMs: t0}} {
			_, _, err := b.store.ListExecutions(b.ctx, f, store.Cursor{}, 0)
			require.NoError(t, err)
		}
	})
}

// consoleTasks upserts a fixture of tasks and pauses some; hostile strings
// are names, codes stay plain so that every backend orders them alike.
func consoleTasks(t *testing.T, b *bundle) {
	t.Helper()
	http := `{"url":"https://example.com/hook"}`
	tasks := []*store.Task{
		{Code: "alpha", Name: "Alpha job"},
		{Code: "beta", Name: "50%_off sale", Kind: store.KindHTTP, HTTPTarget: &http},
		{Code: "billing-50", Name: "50 percent off"},
		{Code: "delta", Name: "50xxoff"},
		{Code: "echo", Name: hostile[0], Kind: store.KindHTTP, HTTPTarget: &http},
		{Code: "foxtrot", Name: "<script>alert(1)</script>"},
		{Code: "golf", Name: "under_score"},
		{Code: "hotel", Name: "BIG Name", Kind: store.KindHTTP, HTTPTarget: &http},
		{Code: "india", Name: `wow! back\slash`},
		{Code: "juliet", Name: "plain"},
	}
	for _, tk := range tasks {
		tk.App, tk.Spec = b.app, "@every 1m"
	}
	_, err := b.store.UpsertTasks(b.ctx, tasks)
	require.NoError(t, err)
	for _, code := range []string{"beta", "echo", "golf"} {
		require.NoError(t, b.store.SetTaskStatus(b.ctx, b.app, code, store.TaskPaused))
	}
	_, err = b.store.UpsertTask(b.ctx, &store.Task{App: b.app + "x", Code: "alpha", Name: "other app", Spec: "@every 1m"})
	require.NoError(t, err)
}

// listTasks pages through ListTasks and returns the codes in the order served.
func listTasks(t *testing.T, b *bundle, f store.TaskFilter, limit int) []string {
	t.Helper()
	var codes []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100, "paging does not end")
		page, next, err := b.store.ListTasks(b.ctx, f, after, limit)
		require.NoError(t, err)
		for _, tk := range page {
			require.Equal(t, f.App, tk.App)
			codes = append(codes, tk.Code)
		}
		if next == "" {
			return codes
		}
		require.Len(t, page, limit)
		require.Equal(t, page[limit-1].Code, next)
		after = next
	}
}

func TestListTasksFiltersAndPagesByCode(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		consoleTasks(t, b)
		app := b.app
		all := []string{"alpha", "beta", "billing-50", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
		for _, c := range []struct {
			f    store.TaskFilter
			want []string
		}{
			{store.TaskFilter{App: app}, all},
			{store.TaskFilter{App: app, Status: store.TaskPaused}, []string{"beta", "echo", "golf"}},
			{store.TaskFilter{App: app, Status: store.TaskActive}, []string{"alpha", "billing-50", "delta", "foxtrot", "hotel", "india", "juliet"}},
			{store.TaskFilter{App: app, Kind: store.KindHTTP}, []string{"beta", "echo", "hotel"}},
			{store.TaskFilter{App: app, Kind: store.KindFunc, Status: store.TaskPaused}, []string{"golf"}},
			{store.TaskFilter{App: app + "x"}, []string{"alpha"}},
		} {
			for _, limit := range []int{1, 3, 0} {
				require.Equal(t, c.want, listTasks(t, b, c.f, limit), "%+v, limit %d", c.f, limit)
			}
		}
		tasks, err := b.store.Tasks(b.ctx, app)
		require.NoError(t, err)
		require.Len(t, tasks, len(all), "the hostile texts harmed nothing")

		// Text, in code or name, any case: a substring on PostgreSQL and
		// SQLite, the start of a word on MySQL and MariaDB (search.go).
		wordStart := b.db.Dialector.Name() == "mysql"
		for _, c := range []struct {
			text      string
			status    string
			kind      string
			substring []string
			word      []string
		}{
			{text: "ALPHA", substring: []string{"alpha"}, word: []string{"alpha"}},
			{text: "bil", substring: []string{"billing-50"}, word: []string{"billing-50"}},     // a code prefix
			{text: "illing", substring: []string{"billing-50"}},                                // inside a code
			{text: "percent", substring: []string{"billing-50"}, word: []string{"billing-50"}}, // a name word
			{text: "perc", substring: []string{"billing-50"}, word: []string{"billing-50"}},    // its prefix
			{text: "ercent", substring: []string{"billing-50"}},                                // inside it
			{text: "job", substring: []string{"alpha"}, word: []string{"alpha"}},               // the last word
			{text: "big name", substring: []string{"hotel"}, word: []string{"hotel"}},          // two words
			{text: "50", substring: []string{"beta", "billing-50", "delta"}, word: []string{"beta", "billing-50", "delta"}},
			{text: "score", substring: []string{"golf"}}, // _ joins words
			{text: "C", substring: []string{"billing-50", "echo", "foxtrot", "golf", "india"}},
			{text: "C", status: store.TaskActive, kind: store.KindFunc, substring: []string{"billing-50", "foxtrot", "india"}},
			{text: "x", kind: store.KindHTTP, substring: []string{"echo"}, word: []string{"echo"}},
			// Wildcards and the escape character match themselves.
			{text: "50%_off", substring: []string{"beta"}, word: []string{"beta"}},
			{text: "%", substring: []string{"beta"}},
			{text: "_", substring: []string{"beta", "echo", "golf"}, word: []string{"beta"}}, // echo: xtimer_tasks
			{text: "!", substring: []string{"india"}},
			{text: `\`, substring: []string{"india"}},
			{text: `k\s`, substring: []string{"india"}},
			{text: "<script>", substring: []string{"foxtrot"}, word: []string{"foxtrot"}},
			{text: hostile[0], substring: []string{"echo"}, word: []string{"echo"}},
			{text: "'", substring: []string{"echo"}, word: []string{"echo"}},
			{text: "%%"}, {text: "!%"}, {text: "(*"}, {text: "+job -alpha"},
			{text: "no such task"}, {text: "zzz"},
		} {
			want := c.substring
			if wordStart {
				want = c.word
			}
			f := store.TaskFilter{App: app, Text: c.text, Status: c.status, Kind: c.kind}
			for _, limit := range []int{1, 3, 0} {
				require.Equal(t, want, listTasks(t, b, f, limit), "%+v, limit %d", f, limit)
			}
			for _, tk := range tasks {
				if (c.status == "" || tk.Status == c.status) && (c.kind == "" || tk.Kind == c.kind) {
					require.Equal(t, slices.Contains(want, tk.Code), b.store.MatchesText(tk, c.text),
						"MatchesText(%s %q, %q) says what ListTasks does", tk.Code, tk.Name, c.text)
				}
			}
		}

		page, next, err := b.store.ListTasks(b.ctx, store.TaskFilter{App: app}, "foxtrot", 2)
		require.NoError(t, err)
		require.Equal(t, "golf", page[0].Code)
		require.Equal(t, "hotel", next)
		require.Equal(t, store.TaskPaused, page[0].Status)
		require.Equal(t, "under_score", page[0].Name)
	})
}

func TestListTasksRejectsBadFiltersNamingTheField(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		for _, c := range []struct {
			f    store.TaskFilter
			want string
		}{
			{store.TaskFilter{}, `store: list tasks: app is required`},
			{store.TaskFilter{App: b.app, Status: "bogus"}, `store: list tasks: status "bogus": want active or paused`},
			{store.TaskFilter{App: b.app, Kind: "grpc"}, `store: list tasks: kind "grpc": want func or http`},
			{store.TaskFilter{App: b.app, Text: "a\x00"}, `store: list tasks: text "a\x00": want UTF-8 text without NUL bytes`},
			{store.TaskFilter{App: b.app, Text: strings.Repeat("x", 256)},
				fmt.Sprintf(`store: list tasks: text %q: want at most 255 bytes`, strings.Repeat("x", 256))},
		} {
			_, _, err := b.store.ListTasks(b.ctx, c.f, "", 0)
			require.EqualError(t, err, c.want)
		}
	})
}

func TestAppsListsEveryAppWithTasksSorted(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		apps, err := b.store.Apps(b.ctx)
		require.NoError(t, err)
		require.Empty(t, apps)
		for _, app := range []string{"zeta", "alpha", "mid"} {
			for _, code := range []string{"one", "two"} {
				_, upsertErr := b.store.UpsertTask(b.ctx, &store.Task{App: app, Code: code, Spec: "@every 1m"})
				require.NoError(t, upsertErr)
			}
		}
		apps, err = b.store.Apps(b.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"alpha", "mid", "zeta"}, apps)
	})
}

func TestStatusCountsCountsOneTaskInRange(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		history(t, b)
		got, err := b.store.StatusCounts(b.ctx, b.app, "a", 0, 0)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{
			store.StatusSucceeded: 5, store.StatusFailed: 2, store.StatusTimedOut: 3, store.StatusRunning: 2,
		}, got)

		// Rows 0, 3, 6, 9 of a run at t0, t0+1s, t0+3s, t0+4s: succeeded,
		// timed_out, failed, running.
		got, err = b.store.StatusCounts(b.ctx, b.app, "a", t0+1000, t0+4000)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{store.StatusTimedOut: 1, store.StatusFailed: 1}, got)

		got, err = b.store.StatusCounts(b.ctx, b.app, "nobody", 0, 0)
		require.NoError(t, err)
		require.Empty(t, got)

		_, err = b.store.StatusCounts(b.ctx, b.app, "a", t0+1, t0)
		require.EqualError(t, err, fmt.Sprintf(`store: count executions of task "a": from_ms %d is after to_ms %d`, t0+1, t0))
		_, err = b.store.StatusCounts(b.ctx, b.app, "", 0, 0)
		require.EqualError(t, err, fmt.Sprintf(`store: count executions: app %q and task "" are required`, b.app))
	})
}

func TestLastExecutionsFindsTheLatestRunAtOrBeforeForEachCode(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := history(t, b)
		// Rows 0, 3, 6 (task a) run at t0, t0+1s, t0+3s; rows 1, 4 (b) at
		// t0, t0+2s; rows 2, 5 (hostile) at t0+1s, t0+2s.
		got, err := b.store.LastExecutions(b.ctx, b.app, []string{"a", "b", "b", "nobody", hostile[0]}, t0+2000)
		require.NoError(t, err)
		require.Len(t, got, 3)
		require.Equal(t, rows[3], got["a"])
		require.Equal(t, rows[4], got["b"])
		require.Equal(t, rows[5], got[hostile[0]])
		require.Equal(t, store.StatusTimedOut, got["a"].Status, "any status counts")

		got, err = b.store.LastExecutions(b.ctx, b.app, []string{"a"}, t0-1)
		require.NoError(t, err)
		require.Empty(t, got)
		got, err = b.store.LastExecutions(b.ctx, b.app, nil, t0)
		require.NoError(t, err)
		require.Empty(t, got)

		// More codes than one statement carries.
		var many []store.Execution
		codes := make([]string, 250)
		for i := range codes {
			codes[i] = fmt.Sprintf("task-%03d", i)
			for k := range 3 {
				many = append(many, store.Execution{App: b.app, TaskCode: codes[i], RunTime: t0 + int64(k*1000+i), Status: store.StatusSucceeded})
			}
		}
		require.NoError(t, b.db.CreateInBatches(&many, 100).Error)
		got, err = b.store.LastExecutions(b.ctx, b.app, append(codes, "a"), t0+1124)
		require.NoError(t, err)
		require.Len(t, got, 251)
		for i, code := range codes {
			want := t0 + 1000 + int64(i) // the second run, at or before t0+1124 for i <= 124
			if i > 124 {
				want = t0 + int64(i) // the first run
			}
			require.Equal(t, want, got[code].RunTime, code)
			require.Equal(t, code, got[code].TaskCode)
		}
		require.Equal(t, rows[3].ID, got["a"].ID)

		_, err = b.store.LastExecutions(b.ctx, b.app, make([]string, 1001), t0)
		require.EqualError(t, err, "store: last executions: 1001 codes: want at most 1000")
	})
}

func TestRecordActionStampsCleansAndActionsListsNewestFirst(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		first, err := b.store.RecordAction(b.ctx, store.Action{
			App: b.app, TaskCode: "a", Principal: "alice", Action: store.ActionPause, Detail: `{"reason":"incident 42"}`,
		})
		require.NoError(t, err)
		require.NotZero(t, first.ID)
		require.Equal(t, t0, first.AtMs)

		b.set(t0 + 1000)
		second, err := b.store.RecordAction(b.ctx, store.Action{
			App: b.app, TaskCode: "a", Principal: "bob\x00\xff", Action: store.ActionSetSchedule,
			Detail: "from \"@every 1m\"\x00 to \xfe\"@every 5m\"",
		})
		require.NoError(t, err)
		require.Equal(t, "bob\uFFFD", second.Principal)
		require.Equal(t, "from \"@every 1m\" to \uFFFD\"@every 5m\"", second.Detail)

		old, err := b.store.RecordAction(b.ctx, store.Action{App: b.app, TaskCode: "b", AtMs: t0 - 5000, Principal: "carol", Action: store.ActionTrigger, Detail: hostile[0]})
		require.NoError(t, err)
		require.Equal(t, t0-5000, old.AtMs)
		long, err := b.store.RecordAction(b.ctx, store.Action{App: b.app, TaskCode: "b", Action: "note", Detail: strings.Repeat("é", store.MaxTextBytes)})
		require.NoError(t, err)
		require.Len(t, long.Detail, store.MaxTextBytes-1, "cut at a rune boundary")
		_, err = b.store.RecordAction(b.ctx, store.Action{App: b.app + "x", TaskCode: "a", Action: store.ActionResume})
		require.NoError(t, err)

		got, err := b.store.Actions(b.ctx, b.app, "a", 0)
		require.NoError(t, err)
		require.Equal(t, []store.Action{second, first}, got)

		got, err = b.store.Actions(b.ctx, b.app, "", 0)
		require.NoError(t, err)
		require.Equal(t, []int64{long.ID, second.ID, first.ID, old.ID}, actionIDs(got))
		require.Equal(t, hostile[0], got[3].Detail)

		got, err = b.store.Actions(b.ctx, b.app, "", 2)
		require.NoError(t, err)
		require.Equal(t, []int64{long.ID, second.ID}, actionIDs(got))

		got, err = b.store.Actions(b.ctx, b.app, hostile[0], 0)
		require.NoError(t, err)
		require.Empty(t, got)

		for _, c := range []struct {
			a    store.Action
			want string
		}{
			{store.Action{Action: "pause"}, `store: record action: app "": want 1 to 64 bytes`},
			{store.Action{App: b.app, TaskCode: "a"}, `store: record action: action "": want 1 to 32 bytes`},
			{store.Action{App: b.app, Action: strings.Repeat("p", 33)},
				fmt.Sprintf(`store: record action: action %q: want 1 to 32 bytes`, strings.Repeat("p", 33))},
			{store.Action{App: b.app, Action: "pause", Principal: strings.Repeat("p", 256)},
				fmt.Sprintf(`store: record action: principal %q: want at most 255 bytes`, strings.Repeat("p", 256))},
			{store.Action{App: b.app, Action: "pause", TaskCode: strings.Repeat("c", 129)},
				fmt.Sprintf(`store: record action: task %q: want at most 128 bytes`, strings.Repeat("c", 129))},
			{store.Action{App: b.app, Action: "pause", TaskCode: "a\x00"},
				`store: record action: task "a\x00": want UTF-8 text without NUL bytes`},
		} {
			_, recordErr := b.store.RecordAction(b.ctx, c.a)
			require.EqualError(t, recordErr, c.want)
		}
		_, err = b.store.Actions(b.ctx, "", "a", 0)
		require.EqualError(t, err, "store: list actions: app is required")
	})
}

func actionIDs(as []store.Action) []int64 {
	ids := make([]int64, len(as))
	for i, a := range as {
		ids[i] = a.ID
	}
	return ids
}

func TestHeartbeatRecordsTheSlotsAReplicaOwnsNow(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		m := store.MinuteOf(t0)
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r1", Slots: []string{fmt.Sprintf("%d:0", m), fmt.Sprintf("%d:3", m)}}))
		b.set(t0 + 1000)
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r1", Slots: []string{fmt.Sprintf("%d:3", m+1)}}))
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r2"}))

		live, err := b.store.LiveReplicas(b.ctx, b.app, 0)
		require.NoError(t, err)
		require.Len(t, live, 2)
		require.Equal(t, []string{fmt.Sprintf("%d:3", m+1)}, live[0].Slots)
		require.Equal(t, t0+1000, live[0].HeartbeatMs)
		require.Nil(t, live[1].Slots)
	})
}
