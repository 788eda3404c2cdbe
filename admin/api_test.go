package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// apiResult is one answer of the API, decoded strictly: the envelope
// {"data", "next"} or {"error"}, and nothing else.
type apiResult struct {
	Status int             `json:"-"`
	Header http.Header     `json:"-"`
	Data   json.RawMessage `json:"data"`
	Next   string          `json:"next"`
	Error  *apiError       `json:"error"`
}

// apiStatusOf is the one HTTP status of each error code.
var apiStatusOf = map[string]int{
	codeInvalid: 400, codeUnknownField: 400, codeBadJSON: 400, codeUnauthenticated: 401,
	codeForbidden: 403, codeReadOnly: 403, codeCrossOrigin: 403, codeNotFound: 404, codeMethod: 405,
	codeConflict: 409, codeTooLarge: 413, codeMediaType: 415, codeInternal: 500, codeUnavailable: 503,
}

// apiReq builds a request; a body is sent as JSON unless headers (name,
// value pairs) say otherwise, and an empty value removes a header.
func apiReq(t *testing.T, method, target, body string, headers ...string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, target, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	return req
}

// apiDo sends req to the test server.
func apiDo(t *testing.T, req *http.Request) apiResult {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return apiDecode(t, resp.StatusCode, resp.Header, raw)
}

// apiServe calls h directly, for requests a test server cannot fake
// (another client address).
func apiServe(t *testing.T, h http.Handler, req *http.Request) apiResult {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return apiDecode(t, rec.Code, rec.Header(), rec.Body.Bytes())
}

func apiDecode(t *testing.T, status int, h http.Header, raw []byte) apiResult {
	t.Helper()
	require.Equal(t, "application/json; charset=utf-8", h.Get("Content-Type"), "%s", raw)
	r := apiResult{Status: status, Header: h}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), "%s", raw)
	if status < 400 {
		require.Nil(t, r.Error, "%s", raw)
		require.NotEmpty(t, r.Data, "%s", raw)
	} else {
		require.NotNil(t, r.Error, "%s", raw)
		require.Empty(t, r.Data, "%s", raw)
		require.Equal(t, apiStatusOf[r.Error.Code], status, "%s", raw)
		require.NotEmpty(t, r.Error.Message, "%s", raw)
	}
	return r
}

func apiGet(t *testing.T, f *fixture, path string, headers ...string) apiResult {
	t.Helper()
	return apiDo(t, apiReq(t, http.MethodGet, f.URL+path, "", headers...))
}

func apiSend(t *testing.T, f *fixture, method, path, body string, headers ...string) apiResult {
	t.Helper()
	return apiDo(t, apiReq(t, method, f.URL+path, body, headers...))
}

// apiData decodes the data of a successful answer, refusing fields the
// view does not have.
func apiData[T any](t *testing.T, r apiResult) T {
	t.Helper()
	require.Less(t, r.Status, 300, "error %+v", r.Error)
	var v T
	dec := json.NewDecoder(bytes.NewReader(r.Data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "%s", r.Data)
	return v
}

// requireAPIError checks an error answer: its status, code and field.
func requireAPIError(t *testing.T, r apiResult, status int, code, field string) *apiError {
	t.Helper()
	require.Equal(t, status, r.Status, "%+v", r.Error)
	require.NotNil(t, r.Error)
	require.Equal(t, code, r.Error.Code, "%+v", r.Error)
	require.Equal(t, field, r.Error.Field, "%+v", r.Error)
	return r.Error
}

// apiSettled waits until execution id has status, then reads it whole
// through the API.
func apiSettled(t *testing.T, f *fixture, id int64, status string) ExecutionView {
	t.Helper()
	waitSettled(t, f, id, status)
	return apiData[ExecutionView](t, apiGet(t, f, fmt.Sprintf("api/executions/%d", id)))
}

// apiTrigger runs a task now through the API and waits for status.
func apiTrigger(t *testing.T, f *fixture, code, status string) ExecutionView {
	t.Helper()
	r := apiSend(t, f, http.MethodPost, "api/tasks/"+code+"/trigger", "{}")
	require.Equal(t, http.StatusCreated, r.Status)
	e := apiData[ExecutionView](t, r)
	require.Equal(t, code, e.Task)
	return apiSettled(t, f, e.ID, status)
}

func taskCodes(ts []TaskView) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Code
	}
	return out
}

func executionIDs(es []ExecutionView) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func utc(y int, m time.Month, d, h, min int) time.Time {
	return time.Date(y, m, d, h, min, 0, 0, time.UTC)
}

// otherApp adds tasks of another app sharing the database: one func, one
// HTTP task.
func otherApp(t *testing.T, f *fixture) {
	t.Helper()
	target := `{"url":"https://example.com/hook"}`
	for _, task := range []*store.Task{
		{App: "other-app", Code: "other.func", Name: "Other func", Spec: "0 * * * *"},
		{App: "other-app", Code: "other.http", Name: "Other hook", Spec: "0 * * * *", Kind: store.KindHTTP, HTTPTarget: &target},
	} {
		_, err := f.Store.UpsertTask(context.Background(), task)
		require.NoError(t, err)
	}
}

func TestAPIApps(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{app: "zz-own"})
	require.Equal(t, []string{"zz-own"}, apiData[[]string](t, apiGet(t, f, "api/apps")))
	otherApp(t, f)
	// The scheduler's own app first, then the others sorted.
	require.Equal(t, []string{"zz-own", "other-app"}, apiData[[]string](t, apiGet(t, f, "api/apps")))
	requireAPIError(t, apiGet(t, f, "api/apps?app=zz-own"), 400, codeInvalid, "app")
}

// The task list's filters, app, status, kind and q, and its paging, on
// every database.
func TestAPITaskListFiltersAndPaging(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{}, func(t *testing.T, f *fixture) {
		otherApp(t, f)
		list := func(query string) []string {
			t.Helper()
			r := apiGet(t, f, "api/tasks"+query)
			require.Empty(t, r.Next)
			return taskCodes(apiData[[]TaskView](t, r))
		}
		require.Equal(t, defaultCodes, list(""))
		all := apiData[[]TaskView](t, apiGet(t, f, "api/tasks"))
		billing := all[1]
		require.Equal(t, f.S.App(), billing.App)
		require.Equal(t, "Reconcile payments", billing.Name)
		require.Equal(t, store.KindFunc, billing.Kind)
		require.Equal(t, store.TaskActive, billing.Status)
		require.Equal(t, StateScheduled, billing.State)
		require.Equal(t, 1, billing.Replicas)
		require.Equal(t, utc(2026, 12, 1, 8, 0), *billing.NextRun)
		require.Nil(t, billing.Last)

		// app
		require.Equal(t, []string{"other.func", "other.http"}, list("?app=other-app"))
		require.Equal(t, []string{}, list("?app=no-such-app"))
		others := apiData[[]TaskView](t, apiGet(t, f, "api/tasks?app=other-app"))
		require.Equal(t, "other-app", others[0].App)
		require.Equal(t, StateNoReplica, others[0].State, "no replica of other-app is alive")

		// kind
		require.Equal(t, defaultCodes, list("?kind=func"))
		require.Equal(t, []string{}, list("?kind=http"))
		require.Equal(t, []string{"other.http"}, list("?app=other-app&kind=http"))
		require.Equal(t, []string{"other.func"}, list("?app=other-app&kind=func"))

		// status
		require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, "api/tasks/billing.reconcile/pause", "{}").Status)
		require.Equal(t, []string{"billing.reconcile"}, list("?status=paused"))
		require.Equal(t, []string{"always.fails", "report.minutely", "xss.task"}, list("?status=active"))
		require.Equal(t, []string{}, list("?status=paused&kind=http"))

		// q: code or name, ignoring case
		require.Equal(t, []string{"billing.reconcile"}, list("?q=reconcile"))
		require.Equal(t, []string{"billing.reconcile"}, list("?q=PAYMENTS"))
		require.Equal(t, []string{"report.minutely"}, list("?q=Minutely"))
		require.Equal(t, []string{"billing.reconcile", "report.minutely"}, list("?q=RE"))
		require.Equal(t, []string{"report.minutely"}, list("?q=re&status=active&kind=func&after=always.fails"))
		require.Equal(t, []string{}, list("?q=nothing-like-this"))

		// paging: every task once, in code order, whatever the page size
		for _, limit := range []int{1, 2, 3, 4, 5} {
			var got []string
			after, pages := "", 0
			for {
				r := apiGet(t, f, fmt.Sprintf("api/tasks?limit=%d&after=%s", limit, url.QueryEscape(after)))
				page := taskCodes(apiData[[]TaskView](t, r))
				require.LessOrEqual(t, len(page), limit)
				got = append(got, page...)
				pages++
				if r.Next == "" {
					break
				}
				require.Equal(t, page[len(page)-1], r.Next)
				after = r.Next
			}
			require.Equal(t, defaultCodes, got, "limit %d", limit)
			require.Equal(t, (len(defaultCodes)+limit-1)/limit, pages, "limit %d", limit)
		}
		r := apiGet(t, f, "api/tasks?status=active&limit=2")
		require.Equal(t, []string{"always.fails", "report.minutely"}, taskCodes(apiData[[]TaskView](t, r)))
		require.Equal(t, "report.minutely", r.Next)
		r = apiGet(t, f, "api/tasks?status=active&limit=2&after="+r.Next)
		require.Equal(t, []string{"xss.task"}, taskCodes(apiData[[]TaskView](t, r)))
		require.Empty(t, r.Next)

		// bad filters name the parameter
		for _, c := range []struct{ query, field string }{
			{"?status=running", "status"},
			{"?kind=grpc", "kind"},
			{"?limit=0", "limit"},
			{"?limit=1001", "limit"},
			{"?limit=ten", "limit"},
			{"?q=" + strings.Repeat("x", 129), "q"},
			{"?after=" + strings.Repeat("x", 129), "after"},
			{"?app=" + strings.Repeat("x", 65), "app"},
			{"?stauts=paused", "stauts"},
		} {
			e := requireAPIError(t, apiGet(t, f, "api/tasks"+c.query), 400, codeInvalid, c.field)
			require.Contains(t, e.Message, c.field, c.query)
		}
	})
}

// The task page: configuration, the next 10 fires from the fake clock,
// the last execution, the last 24 hours by status and the actions.
func TestAPITaskDetail(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	now := fakeStart
	old := insertExecutions(t, f,
		store.Execution{TaskCode: "billing.reconcile", RunTime: now.Add(-2 * time.Hour).UnixMilli(), Status: store.StatusFailed, Source: store.SourceSchedule, Attempt: 3, MaxAttempts: 3, Replica: "replica-a", Error: "bank closed"},
		store.Execution{TaskCode: "billing.reconcile", RunTime: now.Add(-23*time.Hour - 59*time.Minute).UnixMilli(), Status: store.StatusTimedOut, Source: store.SourceSchedule, Attempt: 1, MaxAttempts: 3, Replica: "replica-a"},
		store.Execution{TaskCode: "billing.reconcile", RunTime: now.Add(-25 * time.Hour).UnixMilli(), Status: store.StatusSucceeded, Source: store.SourceSchedule, Attempt: 1, MaxAttempts: 3, Replica: "replica-a"},
		store.Execution{TaskCode: "report.minutely", RunTime: now.Add(-time.Hour).UnixMilli(), Status: store.StatusFailed, Source: store.SourceSchedule, Attempt: 1, MaxAttempts: 1},
	)
	ran := apiTrigger(t, f, "billing.reconcile", store.StatusSucceeded)
	require.Equal(t, "billing.reconcile", <-f.Ran)
	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, "api/tasks/billing.reconcile/pause", "{}").Status)
	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, "api/tasks/billing.reconcile/resume", "{}").Status)

	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/billing.reconcile"))
	v := d.Task
	require.Equal(t, f.S.App(), v.App)
	require.Equal(t, "billing.reconcile", v.Code)
	require.Equal(t, "Reconcile payments", v.Name)
	require.Equal(t, store.KindFunc, v.Kind)
	require.Equal(t, store.TaskActive, v.Status)
	require.Equal(t, StateScheduled, v.State)
	require.Equal(t, "0 9 * * 1-5", v.Schedule.Spec)
	require.Equal(t, "cron", v.Schedule.Dialect)
	require.Equal(t, "Europe/Paris", v.Schedule.Zone)
	require.Equal(t, "at 09:00 on Monday through Friday, Europe/Paris", v.Schedule.Description)
	require.Equal(t, v.Schedule, v.CodeSchedule)
	require.False(t, v.Overridden)
	require.Empty(t, v.ScheduleError)
	require.Equal(t, int64(60000), v.TimeoutMs)
	require.Equal(t, 3, v.MaxAttempts)
	require.Equal(t, 1, v.Replicas)
	require.Equal(t, fakeStart, v.CreatedAt)
	require.Equal(t, utc(2026, 12, 1, 8, 0), *v.NextRun)

	// 09:00 in Paris is 08:00 UTC in winter; weekends are skipped.
	require.Equal(t, []time.Time{
		utc(2026, 12, 1, 8, 0), utc(2026, 12, 2, 8, 0), utc(2026, 12, 3, 8, 0), utc(2026, 12, 4, 8, 0),
		utc(2026, 12, 7, 8, 0), utc(2026, 12, 8, 8, 0), utc(2026, 12, 9, 8, 0), utc(2026, 12, 10, 8, 0),
		utc(2026, 12, 11, 8, 0), utc(2026, 12, 14, 8, 0),
	}, d.NextRuns)

	require.NotNil(t, v.Last)
	require.Equal(t, ran.ID, v.Last.ID)
	require.Equal(t, store.StatusSucceeded, v.Last.Status)
	require.Equal(t, store.SourceManual, v.Last.Source)
	require.Equal(t, fakeStart, v.Last.RunTime)
	require.Equal(t, "Europe/Paris", v.Last.Zone)

	// The row 25 hours back is outside the window; the other task's rows
	// are not counted.
	require.Equal(t, map[string]int64{store.StatusSucceeded: 1, store.StatusFailed: 1, store.StatusTimedOut: 1}, d.Counts)
	require.Equal(t, []int64{ran.ID, old[0].ID, old[1].ID, old[2].ID}, executionIDs(d.Recent))
	require.Equal(t, "bank closed", d.Recent[1].ErrorHead)
	require.Nil(t, d.Recent[1].Error, "lists carry the first line of the error only")

	require.Len(t, d.Actions, 3)
	for i, want := range []string{"resume", "pause", "trigger"} {
		require.Equal(t, want, d.Actions[i].Action)
		require.Equal(t, "local", d.Actions[i].Principal)
		require.Equal(t, fakeStart, d.Actions[i].At)
	}
	require.Equal(t, fmt.Sprintf("execution %d", ran.ID), d.Actions[2].Detail)

	// A task with no history has empty lists, not nulls.
	d = apiData[TaskDetail](t, apiGet(t, f, "api/tasks/xss.task"))
	require.Equal(t, `<script>alert(1)</script>`, d.Task.Name)
	require.Equal(t, `<img src=x onerror=alert(2)>`, d.Task.Description)
	require.Equal(t, []ExecutionView{}, d.Recent)
	require.Equal(t, []ActionView{}, d.Actions)
	require.Equal(t, map[string]int64{}, d.Counts)
	require.Len(t, d.NextRuns, 10)
	require.Equal(t, utc(2026, 12, 1, 0, 0), d.NextRuns[0])

	// Another app's task is readable with ?app=.
	otherApp(t, f)
	d = apiData[TaskDetail](t, apiGet(t, f, "api/tasks/other.http?app=other-app"))
	require.Equal(t, "other-app", d.Task.App)
	require.Equal(t, store.KindHTTP, d.Task.Kind)

	requireAPIError(t, apiGet(t, f, "api/tasks/no.such.task"), 404, codeNotFound, "")
	requireAPIError(t, apiGet(t, f, "api/tasks/other.http"), 404, codeNotFound, "")
	requireAPIError(t, apiGet(t, f, "api/tasks/billing.reconcile?limit=1"), 400, codeInvalid, "limit")
}

// Every action through the API on every database: pause, resume,
// trigger (which runs), set and reset the schedule; each is in the task's
// history with its principal.
func TestAPIActionsOnEveryBackend(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		path := "api/tasks/report.minutely/"

		r := apiSend(t, f, http.MethodPost, path+"pause", "{}")
		require.Equal(t, http.StatusOK, r.Status)
		d := apiData[TaskDetail](t, r)
		require.Equal(t, store.TaskPaused, d.Task.Status)
		require.Equal(t, StatePaused, d.Task.State)
		row, err := f.Store.Task(ctx, f.S.App(), "report.minutely")
		require.NoError(t, err)
		require.Equal(t, store.TaskPaused, row.Status)

		r = apiSend(t, f, http.MethodPost, path+"resume", "{}")
		require.Equal(t, http.StatusOK, r.Status)
		d = apiData[TaskDetail](t, r)
		require.Equal(t, store.TaskActive, d.Task.Status)
		require.Equal(t, StateScheduled, d.Task.State)

		r = apiSend(t, f, http.MethodPost, path+"trigger", "{}")
		require.Equal(t, http.StatusCreated, r.Status)
		e := apiData[ExecutionView](t, r)
		require.Positive(t, e.ID)
		require.Equal(t, f.S.App(), e.App)
		require.Equal(t, "report.minutely", e.Task)
		require.Equal(t, store.SourceManual, e.Source)
		require.Contains(t, []string{store.StatusScheduled, store.StatusRunning, store.StatusSucceeded}, e.Status, "it may have run already")
		require.Equal(t, fakeStart, e.RunTime)
		require.Equal(t, "replica-a", e.Replica, "this replica has the handler and owns the run")
		done := apiSettled(t, f, e.ID, store.StatusSucceeded)
		require.Equal(t, "report.minutely", <-f.Ran)
		require.Equal(t, "ran report.minutely\n", *done.Output)
		require.Equal(t, "", *done.Error)
		require.Equal(t, 1, done.Attempt)
		require.Equal(t, fakeStart, *done.StartedAt)
		require.Equal(t, fakeStart, *done.FinishedAt)

		r = apiSend(t, f, http.MethodPut, path+"schedule", `{"spec": "*/10 * * * *", "zone": "Europe/Paris"}`)
		require.Equal(t, http.StatusOK, r.Status)
		d = apiData[TaskDetail](t, r)
		require.True(t, d.Task.Overridden)
		require.Equal(t, ScheduleView{Spec: "*/10 * * * *", Dialect: "cron", Zone: "Europe/Paris", Description: d.Task.Schedule.Description}, d.Task.Schedule)
		require.Equal(t, "* * * * *", d.Task.CodeSchedule.Spec)
		require.Equal(t, "UTC", d.Task.CodeSchedule.Zone)
		require.Equal(t, utc(2026, 11, 30, 9, 0), d.NextRuns[0])
		require.Equal(t, utc(2026, 11, 30, 9, 10), d.NextRuns[1])

		r = apiSend(t, f, http.MethodDelete, path+"schedule", "{}")
		require.Equal(t, http.StatusOK, r.Status)
		d = apiData[TaskDetail](t, r)
		require.False(t, d.Task.Overridden)
		require.Equal(t, d.Task.CodeSchedule, d.Task.Schedule)
		require.Equal(t, "* * * * *", d.Task.Schedule.Spec)
		require.Equal(t, utc(2026, 11, 30, 9, 1), d.NextRuns[1])

		// Newest first; the fake clock stood still, so ties go by id.
		d = apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely"))
		action := func(name, detail string) ActionView {
			return ActionView{At: fakeStart, Principal: "local", Action: name, Detail: detail}
		}
		require.Equal(t, []ActionView{
			action("reset_schedule", `"*/10 * * * *" (cron, Europe/Paris) → "* * * * *" (cron, UTC)`),
			action("set_schedule", `"* * * * *" (cron, UTC) → "*/10 * * * *" (cron, Europe/Paris)`),
			action("trigger", fmt.Sprintf("execution %d", e.ID)),
			action("resume", ""),
			action("pause", ""),
		}, d.Actions)
		require.Equal(t, e.ID, d.Task.Last.ID)
	})
}

// A trigger runs at once here (the fire is due now on the fake clock);
// its row is read back whole through GET api/executions/{id}.
func TestAPITriggerFailingTaskKeepsOutputAndError(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	e := apiTrigger(t, f, "always.fails", store.StatusFailed)
	require.Equal(t, "always.fails", <-f.Ran)
	require.Equal(t, "about to fail\n", *e.Output)
	require.Contains(t, *e.Error, "boom: the ledger did not balance")
	require.Equal(t, store.SourceManual, e.Source)
	require.Equal(t, 1, e.Attempt)
	require.Equal(t, 1, e.MaxAttempts)
	require.Equal(t, "UTC", e.Zone)

	// The list shows the first line of the error, not the output.
	list := apiData[[]ExecutionView](t, apiGet(t, f, "api/executions?task=always.fails"))
	require.Len(t, list, 1)
	require.Nil(t, list[0].Output)
	require.Nil(t, list[0].Error)
	require.Contains(t, list[0].ErrorHead, "boom: the ledger did not balance")

	// A second trigger in the same millisecond takes the next one; it runs
	// once the fake clock reaches it.
	r := apiSend(t, f, http.MethodPost, "api/tasks/always.fails/trigger", "{}")
	require.Equal(t, http.StatusCreated, r.Status)
	second := apiData[ExecutionView](t, r)
	require.NotEqual(t, e.ID, second.ID)
	require.Equal(t, fakeStart.Add(time.Millisecond), second.RunTime)
	f.Clock.Advance(time.Millisecond)
	apiSettled(t, f, second.ID, store.StatusFailed)

	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/no.such.task/trigger", "{}"), 404, codeNotFound, "")
}

func TestAPIExecutionDetail(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	rows := insertExecutions(t, f, store.Execution{
		TaskCode: "billing.reconcile", RunTime: utc(2026, 11, 27, 8, 0).UnixMilli(), Status: store.StatusFailed, Reason: "",
		Source: store.SourceSchedule, Attempt: 2, MaxAttempts: 3, Replica: "replica-b",
		ScheduledMs: utc(2026, 11, 27, 7, 59).UnixMilli(), StartedMs: utc(2026, 11, 27, 8, 0).UnixMilli() + 250,
		FinishedMs: utc(2026, 11, 27, 8, 0).UnixMilli() + 1250, LatenessMs: 250, DurationMs: 1000,
		Output: "line 1\nline 2\n", Error: "first line\nsecond line",
	})
	id := rows[0].ID
	v := apiData[ExecutionView](t, apiGet(t, f, fmt.Sprintf("api/executions/%d", id)))
	require.Equal(t, ExecutionView{
		ID: id, App: f.S.App(), Task: "billing.reconcile", RunTime: utc(2026, 11, 27, 8, 0), PlannedAt: utc(2026, 11, 27, 8, 0),
		Status: store.StatusFailed, Source: store.SourceSchedule, Attempt: 2, MaxAttempts: 3, Replica: "replica-b",
		RecordedAt: ptr(utc(2026, 11, 27, 7, 59)), StartedAt: ptr(utc(2026, 11, 27, 8, 0).Add(250 * time.Millisecond)),
		FinishedAt: ptr(utc(2026, 11, 27, 8, 0).Add(1250 * time.Millisecond)), LatenessMs: 250, DurationMs: 1000,
		Output: ptr("line 1\nline 2\n"), Error: ptr("first line\nsecond line"), ErrorHead: "first line…", Zone: "Europe/Paris",
		Shards: 1, // an unsharded fire is its one shard, as xtimer.Execution says
	}, v)

	requireAPIError(t, apiGet(t, f, fmt.Sprintf("api/executions/%d", id+1000)), 404, codeNotFound, "")
	for _, bad := range []string{"abc", "0", "-1", "1.5", "99999999999999999999"} {
		e := requireAPIError(t, apiGet(t, f, "api/executions/"+bad), 400, codeInvalid, "id")
		require.Equal(t, bad, e.Value)
	}
	requireAPIError(t, apiGet(t, f, fmt.Sprintf("api/executions/%d?full=1", id)), 400, codeInvalid, "full")
}

func ptr[T any](v T) *T { return &v }

// The executions list's filters and keyset paging, on every database.
func TestAPIExecutionListFiltersAndPaging(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{}, func(t *testing.T, f *fixture) {
		ms := func(tm time.Time) int64 { return tm.UnixMilli() }
		rows := insertExecutions(t, f,
			store.Execution{TaskCode: "report.minutely", RunTime: ms(utc(2026, 11, 28, 10, 0)), Status: store.StatusSucceeded, Source: store.SourceSchedule, Replica: "replica-a", Output: "ok\n"},
			store.Execution{TaskCode: "always.fails", RunTime: ms(utc(2026, 11, 28, 10, 0)), Status: store.StatusFailed, Source: store.SourceSchedule, Replica: "replica-b", Error: "boom"},
			store.Execution{TaskCode: "report.minutely", RunTime: ms(utc(2026, 11, 29, 10, 0)), Status: store.StatusTimedOut, Source: store.SourceCatchup, Replica: "replica-b"},
			store.Execution{TaskCode: "always.fails", RunTime: ms(utc(2026, 11, 29, 12, 0)), Status: store.StatusSkipped, Reason: store.ReasonPaused, Source: store.SourceRetry},
			store.Execution{TaskCode: "report.minutely", RunTime: ms(utc(2026, 11, 30, 8, 0)), Status: store.StatusSucceeded, Source: store.SourceManual, Replica: "replica-a"},
			store.Execution{App: "other-app", TaskCode: "report.minutely", RunTime: ms(utc(2026, 11, 30, 8, 0)), Status: store.StatusSucceeded, Source: store.SourceSchedule, Replica: "replica-a"},
		)
		id := func(i ...int) []int64 {
			out := []int64{}
			for _, j := range i {
				out = append(out, rows[j].ID)
			}
			return out
		}
		list := func(query string) []int64 {
			t.Helper()
			r := apiGet(t, f, "api/executions"+query)
			require.Empty(t, r.Next, query)
			return executionIDs(apiData[[]ExecutionView](t, r))
		}
		nov29 := utc(2026, 11, 29, 0, 0)
		for _, c := range []struct {
			query string
			want  []int64
		}{
			{"", id(4, 3, 2, 1, 0)}, // newest first, ties by id
			{"?app=other-app", id(5)},
			{"?app=no-such-app", id()},
			{"?task=report.minutely", id(4, 2, 0)},
			{"?task=xss.task", id()},
			{"?status=failed", id(1)},
			{"?status=succeeded", id(4, 0)},
			{"?status=running", id()},
			{"?source=catchup", id(2)},
			{"?source=manual", id(4)},
			{"?source=retry", id(3)},
			{"?replica=replica-b", id(2, 1)},
			{"?replica=replica-z", id()},
			{"?from=2026-11-29", id(4, 3, 2)},                               // a date
			{"?from=2026-11-29T00:00:00Z", id(4, 3, 2)},                     // RFC 3339
			{"?from=2026-11-29T11:00:00%2B01:00", id(4, 3, 2)},              // RFC 3339 with an offset: 10:00 UTC
			{"?from=" + fmt.Sprint(ms(nov29.Add(12*time.Hour))), id(4, 3)},  // Unix ms, inclusive
			{"?to=2026-11-29", id(1, 0)},                                    // exclusive
			{"?to=" + fmt.Sprint(ms(utc(2026, 11, 28, 10, 0))+1), id(1, 0)}, // ms
			{"?from=2026-11-29T10:00:00Z&to=2026-11-30", id(3, 2)},          // both
			{"?from=2026-11-28T10:00&to=2026-11-28T10:01", id(1, 0)},        // minutes, UTC
			{"?task=always.fails&status=failed&replica=replica-b", id(1)},   // combined
			{"?task=report.minutely&source=schedule&from=2026-11-29", id()}, // combined, none
			{"?status=succeeded&replica=replica-a&to=2026-11-30T08:00:01Z", id(4, 0)},
		} {
			require.Equal(t, c.want, list(c.query), c.query)
		}

		v := apiData[[]ExecutionView](t, apiGet(t, f, "api/executions?source=catchup"))[0]
		require.Equal(t, "report.minutely", v.Task)
		require.Equal(t, utc(2026, 11, 29, 10, 0), v.RunTime)
		require.Equal(t, store.StatusTimedOut, v.Status)
		require.Equal(t, "replica-b", v.Replica)
		require.Nil(t, v.Output, "lists leave the output out")

		// Keyset paging walks every row once, newest first, across the tie.
		for _, limit := range []int{1, 2, 3, 5} {
			var got []int64
			after := ""
			for {
				r := apiGet(t, f, fmt.Sprintf("api/executions?limit=%d&after=%s", limit, after))
				page := executionIDs(apiData[[]ExecutionView](t, r))
				require.LessOrEqual(t, len(page), limit)
				got = append(got, page...)
				if r.Next == "" {
					break
				}
				last := rows[0]
				for _, row := range rows {
					if row.ID == page[len(page)-1] {
						last = row
					}
				}
				require.Equal(t, fmt.Sprintf("%d.%d", last.RunTime, last.ID), r.Next)
				after = r.Next
			}
			require.Equal(t, id(4, 3, 2, 1, 0), got, "limit %d", limit)
		}
		r := apiGet(t, f, "api/executions?task=report.minutely&limit=2")
		require.Equal(t, id(4, 2), executionIDs(apiData[[]ExecutionView](t, r)))
		r = apiGet(t, f, "api/executions?task=report.minutely&limit=2&after="+r.Next)
		require.Equal(t, id(0), executionIDs(apiData[[]ExecutionView](t, r)))
		require.Empty(t, r.Next)

		for _, c := range []struct{ query, field string }{
			{"?status=done", "status"},
			{"?source=cron", "source"},
			{"?from=yesterday", "from"},
			{"?from=0", "from"},
			{"?to=30/11/2026", "to"},
			{"?from=2026-11-30&to=2026-11-29", "to"},
			{"?from=2026-11-30&to=2026-11-30", "to"},
			{"?after=abc", "after"},
			{"?after=1.0", "after"},
			{"?limit=0", "limit"},
			{"?limit=1001", "limit"},
			{"?task=" + strings.Repeat("t", 129), "task"},
			{"?replica=" + strings.Repeat("r", 129), "replica"},
			{"?code=report.minutely", "code"},
		} {
			requireAPIError(t, apiGet(t, f, "api/executions"+c.query), 400, codeInvalid, c.field)
		}
	})
}

// Filter values from the URL are bound parameters: SQL in them matches
// nothing and harms nothing, and LIKE's % and _ match themselves.
func TestAPIHostileValuesAreBoundParameters(t *testing.T) {
	t.Parallel()
	withDiskUsage := func(s *xtimer.Scheduler, ran chan string) {
		registerDefaults(s, ran)
		must(s.Register("disk_usage", "0 * * * *", func(context.Context, *xtimer.Run) error { return nil },
			xtimer.WithName("Disk 100% full")))
	}
	onEveryBackend(t, fixtureOpts{register: withDiskUsage}, func(t *testing.T, f *fixture) {
		insertExecutions(t, f, store.Execution{TaskCode: "report.minutely", RunTime: utc(2026, 11, 29, 10, 0).UnixMilli(),
			Status: store.StatusSucceeded, Source: store.SourceSchedule, Replica: "replica-a"})
		tasks := func(query string) []string {
			t.Helper()
			return taskCodes(apiData[[]TaskView](t, apiGet(t, f, "api/tasks?"+query)))
		}
		executions := func(query string) []int64 {
			t.Helper()
			return executionIDs(apiData[[]ExecutionView](t, apiGet(t, f, "api/executions?"+query)))
		}
		q := url.QueryEscape
		none := []string{}
		require.Equal(t, none, tasks("q="+q(`'; DROP TABLE xtimer_tasks; --`)))
		require.Equal(t, none, tasks("q="+q(`' OR '1'='1`)))
		require.Equal(t, none, tasks("q="+q(`\`)))
		require.Equal(t, none, tasks("app="+q(`' OR 1=1 --`)))
		require.Equal(t, none, tasks("after="+q(`zzz' OR '1'='1`)))
		require.Equal(t, []int64{}, executions("task="+q(`' OR '1'='1`)))
		require.Equal(t, []int64{}, executions("replica="+q(`replica-a' OR "x"="x" %`)))
		require.Equal(t, []int64{}, executions("replica="+q(`%`)))
		require.Equal(t, []int64{}, executions("replica="+q(`replica_a`)))
		require.Equal(t, []int64{}, executions("app="+q(`'; DELETE FROM xtimer_executions; --`)))
		requireAPIError(t, apiGet(t, f, "api/tasks/"+url.PathEscape(`' OR '1'='1`)), 404, codeNotFound, "")
		requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/"+url.PathEscape(`x'; DROP TABLE xtimer_tasks; --`)+"/pause", "{}"), 404, codeNotFound, "")

		// % and _ are literal, not wildcards. MySQL and MariaDB find the
		// text at the start of a word only (docs/console.md): there "%",
		// after the 0 of "100%", and "_", inside "disk_usage", start none.
		if f.DB.Dialector.Name() == "mysql" {
			require.Equal(t, none, tasks("q="+q("%")))
			require.Equal(t, none, tasks("q="+q("k_u")))
			require.Equal(t, []string{"disk_usage"}, tasks("q="+q("disk_u")))
		} else {
			require.Equal(t, []string{"disk_usage"}, tasks("q="+q("%")))
			require.Equal(t, []string{"disk_usage"}, tasks("q="+q("_")))
			require.Equal(t, []string{"disk_usage"}, tasks("q="+q("k_u")))
		}
		require.Equal(t, []string{"disk_usage"}, tasks("q="+q("100% F")))
		require.Equal(t, none, tasks("q="+q("r_port")), "_ would match the e of report")
		require.Equal(t, none, tasks("q="+q("mi%ly")), "% would match the nute of minutely")

		// Text no database can compare is refused as bad input.
		requireAPIError(t, apiGet(t, f, "api/tasks?q=%00"), 400, codeInvalid, "q")
		requireAPIError(t, apiGet(t, f, "api/tasks?q=%FF"), 400, codeInvalid, "q")
		requireAPIError(t, apiGet(t, f, "api/executions?task=%FF"), 400, codeInvalid, "task")
		requireAPIError(t, apiGet(t, f, "api/executions?replica=a%00b"), 400, codeInvalid, "replica")
		requireAPIError(t, apiGet(t, f, "api/tasks/a%FFb"), 400, codeInvalid, "code")

		// The tables and their rows are intact.
		require.Equal(t, append([]string{"always.fails", "billing.reconcile", "disk_usage"}, defaultCodes[2:]...), tasks(""))
		require.Len(t, executions(""), 1)
		for _, table := range []string{"xtimer_tasks", "xtimer_executions", "xtimer_actions"} {
			require.True(t, f.DB.Migrator().HasTable(table), table)
		}
	})
}

// PUT and DELETE schedule: the override is visible, reset restores the
// code's schedule, and bad input names the field.
func TestAPIScheduleOverrideAndReset(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	path := "api/tasks/billing.reconcile/schedule"
	r := apiSend(t, f, http.MethodPut, path, `{"spec": "30 7 * * *", "zone": "America/New_York"}`)
	require.Equal(t, http.StatusOK, r.Status)
	d := apiData[TaskDetail](t, r)
	require.True(t, d.Task.Overridden)
	require.Equal(t, "30 7 * * *", d.Task.Schedule.Spec)
	require.Equal(t, "cron", d.Task.Schedule.Dialect)
	require.Equal(t, "America/New_York", d.Task.Schedule.Zone)
	require.Equal(t, "at 07:30, America/New_York", d.Task.Schedule.Description)
	require.Equal(t, ScheduleView{Spec: "0 9 * * 1-5", Dialect: "cron", Zone: "Europe/Paris", Description: "at 09:00 on Monday through Friday, Europe/Paris"}, d.Task.CodeSchedule)
	// 07:30 in New York is 12:30 UTC in November.
	require.Equal(t, utc(2026, 11, 30, 12, 30), *d.Task.NextRun)
	require.Equal(t, []time.Time{utc(2026, 11, 30, 12, 30), utc(2026, 12, 1, 12, 30)}, d.NextRuns[:2])

	// The override is stored, and a GET sees it.
	row, err := f.Store.Task(context.Background(), f.S.App(), "billing.reconcile")
	require.NoError(t, err)
	require.Equal(t, "30 7 * * *", *row.SpecOverride)
	require.Equal(t, "0 9 * * 1-5", row.Spec)
	require.True(t, apiData[TaskDetail](t, apiGet(t, f, "api/tasks/billing.reconcile")).Task.Overridden)

	// Quartz, with an explicit dialect.
	d = apiData[TaskDetail](t, apiSend(t, f, http.MethodPut, path, `{"spec": "0 15 10 ? * MON-FRI", "dialect": "quartz"}`))
	require.Equal(t, ScheduleView{Spec: "0 15 10 ? * MON-FRI", Dialect: "quartz", Zone: "UTC", Description: d.Task.Schedule.Description}, d.Task.Schedule)
	require.Equal(t, utc(2026, 11, 30, 10, 15), d.NextRuns[0])

	// Bad input changes nothing and names the field. longSpec parses but
	// does not fit the column.
	longSpec := strings.Repeat("0,", 130) + "0 9 * * *"
	for _, c := range []struct {
		body, field, value, specField string
	}{
		{`{"spec": "60 9 * * *"}`, "spec", "60 9 * * *", "minute"},
		{`{"spec": "` + longSpec + `"}`, "spec", longSpec, ""},
		{`{"spec": "0 24 * * *"}`, "spec", "0 24 * * *", "hour"},
		{`{"spec": "0 9 * * 8"}`, "spec", "0 9 * * 8", "day-of-week"},
		{`{"spec": "0 9 * *"}`, "spec", "0 9 * *", ""},
		{`{"spec": "0 9 * * *", "zone": "Mars/Olympus_Mons"}`, "zone", "Mars/Olympus_Mons", ""},
		{`{"spec": "0 9 * * *", "zone": "Local"}`, "zone", "Local", ""},
		{`{"spec": "0 9 * * *", "dialect": "vixie"}`, "dialect", "vixie", ""},
		{`{"spec": ""}`, "spec", "", ""},
		{`{"spec": "   "}`, "spec", "   ", ""},
		{`{}`, "spec", "", ""},
		{`{"spec": 5}`, "spec", "", ""},
	} {
		e := requireAPIError(t, apiSend(t, f, http.MethodPut, path, c.body), 400, codeInvalid, c.field)
		require.Equal(t, c.value, e.Value, c.body)
		require.Equal(t, c.specField, e.SpecField, c.body)
		require.Contains(t, e.Message, c.field, c.body)
	}
	d = apiData[TaskDetail](t, apiGet(t, f, "api/tasks/billing.reconcile"))
	require.Equal(t, "0 15 10 ? * MON-FRI", d.Task.Schedule.Spec, "refused edits stored nothing")

	requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/no.such.task/schedule", `{"spec": "* * * * *"}`), 404, codeNotFound, "")
	requireAPIError(t, apiSend(t, f, http.MethodPut, path, `{"spec": "* * * * *", "tz": "UTC"}`), 400, codeUnknownField, "tz")

	r = apiSend(t, f, http.MethodDelete, path, "{}")
	require.Equal(t, http.StatusOK, r.Status)
	d = apiData[TaskDetail](t, r)
	require.False(t, d.Task.Overridden)
	require.Equal(t, d.Task.CodeSchedule, d.Task.Schedule)
	require.Equal(t, "0 9 * * 1-5", d.Task.Schedule.Spec)
	require.Equal(t, utc(2026, 12, 1, 8, 0), d.NextRuns[0])
	row, err = f.Store.Task(context.Background(), f.S.App(), "billing.reconcile")
	require.NoError(t, err)
	require.Nil(t, row.SpecOverride)
	// Resetting what is not overridden is harmless.
	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodDelete, path, "{}").Status)
	requireAPIError(t, apiSend(t, f, http.MethodDelete, "api/tasks/no.such.task/schedule", "{}"), 404, codeNotFound, "")
}

func TestAPIReplicas(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	rs := apiData[[]ReplicaView](t, apiGet(t, f, "api/replicas"))
	require.Len(t, rs, 1)
	self := rs[0]
	require.Equal(t, "replica-a", self.ID)
	require.Equal(t, "v1.2.3", self.Version)
	require.True(t, self.Live)
	require.True(t, self.Self)
	require.Equal(t, defaultCodes, self.Handlers)
	require.Equal(t, fakeStart, self.HeartbeatAt)
	require.NotEmpty(t, self.Host)
	require.Positive(t, self.PID)
	require.NotNil(t, self.Slots)

	// A replica silent for an hour shows, not live; one that beat just now
	// is live but not this one.
	ctx := context.Background()
	require.NoError(t, f.Store.Heartbeat(ctx, store.Replica{App: f.S.App(), ID: "replica-0-stale", Host: "old-host", PID: 7,
		Version: "v1.0.0", HeartbeatMs: fakeStart.Add(-time.Hour).UnixMilli(), Handlers: []string{"report.minutely"}}))
	require.NoError(t, f.Store.Heartbeat(ctx, store.Replica{App: f.S.App(), ID: "replica-b", Host: "b-host",
		HeartbeatMs: fakeStart.Add(-10 * time.Second).UnixMilli()}))
	rs = apiData[[]ReplicaView](t, apiGet(t, f, "api/replicas"))
	require.Len(t, rs, 3)
	require.Equal(t, "replica-a", rs[0].ID)
	require.Equal(t, "replica-b", rs[1].ID)
	require.True(t, rs[1].Live)
	require.False(t, rs[1].Self)
	require.Equal(t, []string{}, rs[1].Handlers)
	stale := rs[2]
	require.Equal(t, ReplicaView{ID: "replica-0-stale", Host: "old-host", PID: 7, Version: "v1.0.0",
		StartedAt: fakeStart.Add(-time.Hour), HeartbeatAt: fakeStart.Add(-time.Hour), Live: false, Self: false,
		Handlers: []string{"report.minutely"}, Slots: []string{}}, stale)

	require.Equal(t, []ReplicaView{}, apiData[[]ReplicaView](t, apiGet(t, f, "api/replicas?app=other-app")))
	requireAPIError(t, apiGet(t, f, "api/replicas?live=1"), 400, codeInvalid, "live")
}

func TestAPIPreview(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	q := url.QueryEscape
	v := apiData[PreviewView](t, apiGet(t, f, "api/preview?spec="+q("0 9 * * 1-5")+"&tz="+q("Europe/Paris")+"&n=5"))
	require.Equal(t, PreviewView{ScheduleView: ScheduleView{Spec: "0 9 * * 1-5", Dialect: "cron", Zone: "Europe/Paris",
		Description: "at 09:00 on Monday through Friday, Europe/Paris"},
		Next: []time.Time{utc(2026, 12, 1, 8, 0), utc(2026, 12, 2, 8, 0), utc(2026, 12, 3, 8, 0), utc(2026, 12, 4, 8, 0), utc(2026, 12, 7, 8, 0)}}, v)

	// Defaults: cron, UTC, three fires; counted from the fake clock.
	v = apiData[PreviewView](t, apiGet(t, f, "api/preview?spec="+q("* * * * *")))
	require.Equal(t, "cron", v.Dialect)
	require.Equal(t, "UTC", v.Zone)
	require.Equal(t, []time.Time{utc(2026, 11, 30, 9, 0), utc(2026, 11, 30, 9, 1), utc(2026, 11, 30, 9, 2)}, v.Next)
	f.Clock.Advance(time.Minute)
	v = apiData[PreviewView](t, apiGet(t, f, "api/preview?spec="+q("* * * * *")+"&n=1"))
	require.Equal(t, []time.Time{utc(2026, 11, 30, 9, 1)}, v.Next)

	v = apiData[PreviewView](t, apiGet(t, f, "api/preview?spec="+q("0 0 9 ? * MON-FRI")+"&dialect=quartz&n=100"))
	require.Equal(t, "quartz", v.Dialect)
	require.Len(t, v.Next, 100)
	require.Equal(t, utc(2026, 12, 1, 9, 0), v.Next[0])

	// A schedule that ends has fewer fires than asked.
	v = apiData[PreviewView](t, apiGet(t, f, "api/preview?spec="+q("0 0 9 1 1 ? 2027")+"&dialect=quartz&n=5"))
	require.Equal(t, []time.Time{utc(2027, 1, 1, 9, 0)}, v.Next)

	for _, c := range []struct {
		query, field, value, specField string
	}{
		{"spec=" + q("60 9 * * *"), "spec", "60 9 * * *", "minute"},
		{"spec=" + q("0 9 32 * *"), "spec", "0 9 32 * *", "day-of-month"},
		{"spec=" + q("0 9 * * 1-5 extra junk here"), "spec", "0 9 * * 1-5 extra junk here", ""},
		{"spec=", "spec", "", ""},
		{"", "spec", "", ""},
		{"spec=" + q("* * * * *") + "&tz=Nowhere%2FLand", "tz", "Nowhere/Land", ""},
		{"spec=" + q("* * * * *") + "&dialect=vixie", "dialect", "vixie", ""},
		{"spec=" + q("* * * * *") + "&n=0", "n", "0", ""},
		{"spec=" + q("* * * * *") + "&n=101", "n", "101", ""},
		{"spec=" + q("* * * * *") + "&n=three", "n", "three", ""},
		{"spec=" + q("* * * * *") + "&count=3", "count", "3", ""},
		{"spec=" + q(strings.Repeat("*", 256)), "spec", strings.Repeat("*", 256), ""},
	} {
		e := requireAPIError(t, apiGet(t, f, "api/preview?"+c.query), 400, codeInvalid, c.field)
		require.Equal(t, c.value, e.Value, c.query)
		require.Equal(t, c.specField, e.SpecField, c.query)
		if c.field == "tz" {
			require.Contains(t, e.Message, "time zone", c.query)
		} else {
			require.Contains(t, e.Message, c.field, c.query)
		}
	}
}

// One error shape and status codes that mean what they say.
func TestAPIErrorShapeAndStatusCodes(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{MaxBodyBytes: 1024}})
	pause := "api/tasks/report.minutely/pause"

	requireAPIError(t, apiGet(t, f, "api/nothing"), 404, codeNotFound, "")
	requireAPIError(t, apiGet(t, f, "api/tasks/report.minutely/nothing"), 404, codeNotFound, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/no.such.task/pause", "{}"), 404, codeNotFound, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/no.such.task/resume", "{}"), 404, codeNotFound, "")

	// 405 with Allow.
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodGet, pause, "POST"},
		{http.MethodPut, "api/tasks/report.minutely/trigger", "POST"},
		{http.MethodPatch, "api/tasks", "GET, HEAD, POST"},
		{http.MethodPatch, "api/tasks/report.minutely", "DELETE, GET, HEAD, PUT"},
		{http.MethodGet, "api/tasks/report.minutely/schedule", "DELETE, PUT"},
		{http.MethodPatch, "api/tasks/report.minutely/schedule", "DELETE, PUT"},
		{http.MethodPost, "api/executions/1", "GET, HEAD"},
		{http.MethodPut, "api/preview", "GET, HEAD"},
	} {
		body := ""
		if c.method != http.MethodGet {
			body = "{}"
		}
		r := apiSend(t, f, c.method, c.path, body)
		requireAPIError(t, r, 405, codeMethod, "")
		require.Equal(t, c.allow, r.Header.Get("Allow"), "%s %s", c.method, c.path)
	}

	// Bodies: JSON only, one object, known fields, within MaxBodyBytes.
	e := requireAPIError(t, apiSend(t, f, http.MethodPost, pause, "{}", "Content-Type", "text/plain"), 415, codeMediaType, "")
	require.Contains(t, e.Message, "application/json")
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause, "{}", "Content-Type", ""), 415, codeMediaType, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause, "", "Content-Type", ""), 415, codeMediaType, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause, "spec=x", "Content-Type", "application/x-www-form-urlencoded"), 415, codeMediaType, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause, "", "Content-Type", "application/json"), 400, codeBadJSON, "")
	e = requireAPIError(t, apiSend(t, f, http.MethodPost, pause, `{"force": true}`), 400, codeUnknownField, "force")
	require.Contains(t, e.Message, `"force"`)
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause, `{} {}`), 400, codeBadJSON, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause, `{}x`), 400, codeBadJSON, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause, `{`), 400, codeBadJSON, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause, `[]`), 400, codeBadJSON, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause, `"pause"`), 400, codeBadJSON, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, pause+"?force=1", "{}"), 400, codeInvalid, "force")
	e = requireAPIError(t, apiSend(t, f, http.MethodPost, pause, "{}"+strings.Repeat(" ", 1100)), 413, codeTooLarge, "")
	require.Contains(t, e.Message, "1024")
	requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/report.minutely/schedule", `{"spec": "`+strings.Repeat("1,", 600)+`1 * * * *"}`), 413, codeTooLarge, "")
	// None of the refused requests paused the task.
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely"))
	require.Equal(t, store.TaskActive, d.Task.Status)
	require.Equal(t, []ActionView{}, d.Actions)

	// Within the limit, with a charset, it passes.
	r := apiSend(t, f, http.MethodPost, pause, "{}"+strings.Repeat(" ", 900), "Content-Type", "application/json; charset=utf-8")
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, store.TaskPaused, apiData[TaskDetail](t, r).Task.Status)

	// Every answer carries the headers that keep it from being sniffed or cached.
	r = apiGet(t, f, "api/apps")
	require.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "DENY", r.Header.Get("X-Frame-Options"))
	require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	require.Empty(t, r.Next)
}

// 409: the request does not fit the scheduler's state.
func TestAPITriggerConflictsWithAStoppedScheduler(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.S.Stop(ctx))
	e := requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/trigger", "{}"), 409, codeConflict, "")
	require.Contains(t, e.Message, "stopped")
	list := apiData[[]ExecutionView](t, apiGet(t, f, "api/executions"))
	require.Equal(t, []ExecutionView{}, list)
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely"))
	require.Equal(t, []ActionView{}, d.Actions, "a refused action is not in the history")

	// A scheduler not started yet conflicts too.
	s, err := xtimer.New(xtimer.Options{DB: testsvc.SQLite(t), Clock: fakeclock.New(fakeStart), ClockReference: xtimer.ClockReferenceOff,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	must(s.Register("report.minutely", "* * * * *", func(context.Context, *xtimer.Run) error { return nil }))
	h, err := New(s, Options{Logger: f.S.Options().Logger})
	require.NoError(t, err)
	req := apiReq(t, http.MethodPost, "http://localhost/xtimer/api/tasks/report.minutely/trigger", "{}")
	req.RemoteAddr = "127.0.0.1:40000"
	e = requireAPIError(t, apiServe(t, h, req), 409, codeConflict, "")
	require.Contains(t, e.Message, "not started")
}

// lockedBuffer is a log destination the server and the test share, read
// as JSON lines.
type lockedBuffer struct{ testsvc.LogBuffer }

func (b *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

// Each action is one info line with the principal, the task, the action
// and what changed; refused requests log nothing.
func TestAPIActionsAreLogged(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	f := setup(t, fixtureOpts{admin: Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}})
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/pause", `{"x": 1}`), 400, codeUnknownField, "x")
	requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/report.minutely/schedule", `{"spec": "61 * * * *"}`), 400, codeInvalid, "spec")
	require.Empty(t, logs.lines(t))

	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/pause", "{}").Status)
	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPut, "api/tasks/report.minutely/schedule", `{"spec": "*/5 * * * *", "dialect": "cron", "zone": "Asia/Tokyo"}`).Status)
	e := apiData[ExecutionView](t, apiSend(t, f, http.MethodPost, "api/tasks/always.fails/trigger", "{}"))
	lines := logs.lines(t)
	require.Len(t, lines, 3)
	want := []map[string]any{
		{"task": "report.minutely", "action": "pause", "detail": ""},
		{"task": "report.minutely", "action": "set_schedule", "detail": `"* * * * *" (cron, UTC) → "*/5 * * * *" (cron, Asia/Tokyo)`},
		{"task": "always.fails", "action": "trigger", "detail": fmt.Sprintf("execution %d", e.ID)},
	}
	for i, line := range lines {
		require.Equal(t, "INFO", line["level"])
		require.Equal(t, "console action", line["msg"])
		require.Equal(t, "local", line["principal"])
		require.Equal(t, f.S.App(), line["app"])
		for k, v := range want[i] {
			require.Equal(t, v, line[k], "line %d key %s", i, k)
		}
	}
	// The same actions are in the tasks' history.
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely"))
	require.Equal(t, []ActionView{
		{At: fakeStart, Principal: "local", Action: "set_schedule", Detail: `"* * * * *" (cron, UTC) → "*/5 * * * *" (cron, Asia/Tokyo)`},
		{At: fakeStart, Principal: "local", Action: "pause"},
	}, d.Actions)
	d = apiData[TaskDetail](t, apiGet(t, f, "api/tasks/always.fails"))
	require.Equal(t, []ActionView{{At: fakeStart, Principal: "local", Action: "trigger", Detail: fmt.Sprintf("execution %d", e.ID)}}, d.Actions)
}

func TestDecodeBodyNamesTheUnknownFieldWithoutReadingTheDecodersText(t *testing.T) {
	t.Parallel()
	decode := func(body string) error {
		req := httptest.NewRequest(http.MethodPost, "/api/tasks", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		var edit TaskEdit
		return decodeBody(req, &edit)
	}
	for _, c := range []struct {
		body, code, field string
	}{
		{`{"code": "x", "retries": 3}`, codeUnknownField, "retries"},
		{`{"code": "x", "target": {"url": "http://127.0.0.1/", "verb": "GET"}}`, codeUnknownField, "verb"},
		{`{"target": {"headers": [{"name": "A", "value": "1"}, {"name": "B", "val": "2"}]}}`, codeUnknownField, "val"},
		{`{"first": 1, "second": 2}`, codeUnknownField, "first"},
		{`{"retries": 3, "max_attempts": "three"}`, codeUnknownField, "retries"},
		{`{"max_attempts": "three", "retries": 3}`, codeInvalid, "max_attempts"},
		{`{"CODE": "x", "Target": {"URL": "http://127.0.0.1/"}}`, "", ""},
		{`{"code": "x"`, codeBadJSON, ""},
		{`[{"code": "x"}]`, codeBadJSON, ""},
		{`{} {}`, codeBadJSON, ""},
		{``, codeBadJSON, ""},
	} {
		err := decode(c.body)
		if c.code == "" {
			require.NoError(t, err, c.body)
			continue
		}
		var e *apiError
		require.ErrorAs(t, err, &e, c.body)
		require.Equal(t, http.StatusBadRequest, e.Status, c.body)
		require.Equal(t, c.code, e.Code, c.body)
		require.Equal(t, c.field, e.Field, c.body)
		if c.code == codeUnknownField {
			require.Equal(t, fmt.Sprintf("unknown field %q in the JSON body", c.field), e.Message)
		}
	}
}

// unknownField finds the key encoding/json refuses: the same key its
// error names, for keys at each depth and in each order.
func TestUnknownFieldIsTheKeyTheDecoderRefuses(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"code": "x", "retries": 3}`,
		`{"target": {"verb": "GET"}, "retries": 3}`,
		`{"retries": 3, "target": {"verb": "GET"}}`,
		`{"target": {"headers": [{"name": "A"}, {"Name": "B", "secret": true, "extra": 1}]}}`,
		`{"Description": "d", "Zone": "UTC", "paused": true, "bogus": null}`,
	} {
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		err := dec.Decode(&TaskEdit{})
		require.Error(t, err, body)
		name := unknownField([]byte(body), reflect.TypeFor[*TaskEdit]())
		require.EqualError(t, err, fmt.Sprintf("json: unknown field %q", name), body)
	}
	require.Empty(t, unknownField([]byte(`{"code": "x", "TARGET": {"Method": "GET"}}`), reflect.TypeFor[TaskEdit]()))
	require.Empty(t, unknownField([]byte(`{}`), reflect.TypeFor[emptyBody]()))
	require.Equal(t, "force", unknownField([]byte(`{"force": true}`), reflect.TypeFor[emptyBody]()))
}
