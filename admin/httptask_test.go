package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// HTTP callback tasks through the console: the create, change and delete
// endpoints, the target on the task's detail, and the pages, with the
// promise that a secret never comes back out.

// The secrets of hookEdit: no answer, page or log line may hold them.
const (
	hookToken  = "Bearer s3cr3t-token-7f1c"
	hookSigKey = "hmac-key-9d2e"
)

// hookEdit is a good body for POST api/tasks.
func hookEdit(code string) TaskEdit {
	return TaskEdit{
		Code: code, Name: "Reconcile payments", Description: "Nightly reconciliation", Owner: "billing",
		Spec: "0 9 * * *", Dialect: "cron", Zone: "Europe/Paris",
		Target: xtimer.HTTPTarget{
			Method: "POST", URL: "http://127.0.0.1:9/reconcile",
			Headers: []xtimer.HTTPHeader{
				{Name: "Authorization", Value: hookToken, Secret: true},
				{Name: "Content-Type", Value: "application/json"},
			},
			Body: `{"full":true}`, SuccessCodes: []int{200, 202}, Secret: hookSigKey,
		},
		TimeoutMs: 30000, MaxAttempts: 3, BackoffBaseMs: 1000, BackoffMaxMs: 60000, MaxConcurrent: 4,
		Overlap: "buffer_all", JitterMs: 30000,
		Misfire: "run_all", MisfireWindowMs: 600_000, MaxRuns: 10, EndAt: ptr(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
}

// createHook creates hookEdit(code) through the API.
func createHook(t *testing.T, f *fixture, code string) {
	t.Helper()
	r := apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, hookEdit(code)))
	require.Equal(t, http.StatusCreated, r.Status, "%+v", r.Error)
}

func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// requireNoSecret fails when s holds one of hookEdit's secrets.
func requireNoSecret(t *testing.T, s, where string) {
	t.Helper()
	for _, secret := range []string{hookToken, "s3cr3t", hookSigKey} {
		require.NotContains(t, s, secret, "%s shows a secret", where)
	}
}

// readOnlyConsole mounts a second, read-only console on f's scheduler.
func readOnlyConsole(t *testing.T, f *fixture) *fixture {
	t.Helper()
	h, err := New(f.S, Options{ReadOnly: true, Logger: f.S.Options().Logger})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(DefaultPrefix, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ro := *f
	ro.Server, ro.URL = srv, srv.URL+DefaultPrefix
	return &ro
}

// rawGet GETs a console path and returns its body as text.
func rawGet(t *testing.T, f *fixture, rel string) string {
	t.Helper()
	p := pagesGet(t, f, rel)
	require.Less(t, p.Status, 500, "%s: %s", rel, p.Body)
	return p.Body
}

func TestAPICreatesUpdatesAndDeletesAnHTTPTask(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	f := setup(t, fixtureOpts{admin: Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}})
	ctx := context.Background()

	r := apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, hookEdit("billing.hook")))
	require.Equal(t, http.StatusCreated, r.Status, "%+v", r.Error)
	requireNoSecret(t, string(r.Data), "the create's answer")
	d := apiData[TaskDetail](t, r)
	require.Equal(t, "billing.hook", d.Task.Code)
	require.Equal(t, store.KindHTTP, d.Task.Kind)
	require.Equal(t, "Reconcile payments", d.Task.Name)
	require.Equal(t, store.TaskActive, d.Task.Status)
	require.Equal(t, StateScheduled, d.Task.State, "every replica runs HTTP tasks")
	require.Equal(t, ScheduleView{Spec: "0 9 * * *", Dialect: "cron", Zone: "Europe/Paris", Description: d.Task.Schedule.Description}, d.Task.Schedule)
	require.Equal(t, utc(2026, 12, 1, 8, 0), d.NextRuns[0], "09:00 in Paris; Monday's has passed at 08:59:30 UTC")
	require.Equal(t, int64(30000), d.Task.TimeoutMs)
	require.Equal(t, 3, d.Task.MaxAttempts)
	require.Equal(t, "buffer_all", d.Task.Overlap, "the overlap policy the edit set")
	require.Equal(t, &HTTPTargetView{
		Method: "POST", URL: "http://127.0.0.1:9/reconcile",
		Headers: []xtimer.HTTPHeader{
			{Name: "Authorization", Value: xtimer.Masked, Secret: true},
			{Name: "Content-Type", Value: "application/json"},
		},
		Body: `{"full":true}`, SuccessCodes: []int{200, 202}, SecretSet: true, TimeoutMs: 30000, MaxConcurrent: 4,
	}, d.HTTP)
	require.Equal(t, []ActionView{{At: fakeStart, Principal: "local", Action: "create",
		Detail: `POST http://127.0.0.1:9/reconcile, "0 9 * * *" (cron, Europe/Paris)`}}, d.Actions)

	// The secrets are stored, for the caller, and never read back.
	row, err := f.Store.Task(ctx, f.S.App(), "billing.hook")
	require.NoError(t, err)
	require.Contains(t, *row.HTTPTarget, hookToken)
	require.Contains(t, *row.HTTPTarget, hookSigKey)
	for _, rel := range []string{"api/tasks/billing.hook", "api/tasks", "api/tasks?kind=http", "", "tasks/billing.hook", "tasks/billing.hook/edit", "tasks/billing.hook/schedule"} {
		requireNoSecret(t, rawGet(t, f, rel), rel)
	}

	// A change: a new URL and spec, secrets left masked, which keeps them.
	edit := hookEdit("")
	edit.Target.URL = "http://127.0.0.1:9/reconcile/v2"
	edit.Spec = "30 9 * * *"
	edit.Target.Headers[0].Value = xtimer.Masked
	edit.Target.Secret = ""
	r = apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, edit))
	require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
	d = apiData[TaskDetail](t, r)
	require.Equal(t, "http://127.0.0.1:9/reconcile/v2", d.HTTP.URL)
	require.Equal(t, "30 9 * * *", d.Task.Schedule.Spec)
	require.True(t, d.HTTP.SecretSet)
	require.Equal(t, ActionView{At: fakeStart, Principal: "local", Action: "update",
		Detail: `changed spec "0 9 * * *" → "30 9 * * *"; target.url "http://127.0.0.1:9/reconcile" → "http://127.0.0.1:9/reconcile/v2"`}, d.Actions[0])
	row, err = f.Store.Task(ctx, f.S.App(), "billing.hook")
	require.NoError(t, err)
	require.Contains(t, *row.HTTPTarget, hookToken, "a masked header value keeps the stored one")
	require.Contains(t, *row.HTTPTarget, hookSigKey, "an empty secret keeps the stored one")

	// A new secret, and a pause, in one change; the code may be repeated.
	edit.Code = "billing.hook"
	edit.Target.Secret = "rotated-key-1"
	paused := true
	edit.Paused = &paused
	r = apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, edit))
	require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
	require.NotContains(t, string(r.Data), "rotated-key-1")
	d = apiData[TaskDetail](t, r)
	require.Equal(t, store.TaskPaused, d.Task.Status)
	require.Equal(t, "changed target.secret •••••• → •••••• (new value); status active → paused", d.Actions[0].Detail)

	// Delete: gone from the API and the pages; its history stays.
	r = apiSend(t, f, http.MethodDelete, "api/tasks/billing.hook", "{}")
	require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
	require.JSONEq(t, `{"deleted":"billing.hook"}`, string(r.Data))
	requireAPIError(t, apiGet(t, f, "api/tasks/billing.hook"), 404, codeNotFound, "")
	require.Equal(t, http.StatusNotFound, pagesGet(t, f, "tasks/billing.hook").Status)
	requireAPIError(t, apiSend(t, f, http.MethodDelete, "api/tasks/billing.hook", "{}"), 404, codeNotFound, "")
	actions, err := f.Store.Actions(ctx, f.S.App(), "billing.hook", 10)
	require.NoError(t, err)
	require.Equal(t, "delete", actions[0].Action)
	require.Equal(t, `POST http://127.0.0.1:9/reconcile/v2, "30 9 * * *" (cron, Europe/Paris)`, actions[0].Detail)

	// One info line per action, none with a secret.
	var got []string
	for _, line := range logs.lines(t) {
		require.Equal(t, "billing.hook", line["task"])
		got = append(got, line["action"].(string))
	}
	require.Equal(t, []string{"create", "update", "update", "delete"}, got)
	raw := logs.String()
	requireNoSecret(t, raw, "the log")
	require.NotContains(t, raw, "rotated-key-1")
}

// Each wrong field comes back named as the body names it, with the
// value (a secret's masked), and nothing is stored.
func TestAPIHTTPTaskFieldErrorsNameTheField(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	for _, c := range []struct {
		field, value string
		edit         func(e *TaskEdit)
	}{
		{"code", "Bad Code!", func(e *TaskEdit) { e.Code = "Bad Code!" }},
		{"code", "new", func(e *TaskEdit) { e.Code = "new" }},
		{"spec", "61 * * * *", func(e *TaskEdit) { e.Spec = "61 * * * *" }},
		{"zone", "Mars/Olympus", func(e *TaskEdit) { e.Zone = "Mars/Olympus" }},
		{"dialect", "unix", func(e *TaskEdit) { e.Dialect = "unix" }},
		{"target.method", "FETCH", func(e *TaskEdit) { e.Target.Method = "FETCH" }},
		{"target.url", "", func(e *TaskEdit) { e.Target.URL = "" }},
		{"target.url", "ftp://127.0.0.1/x", func(e *TaskEdit) { e.Target.URL = "ftp://127.0.0.1/x" }},
		{"target.url", "http://169.254.169.254/latest/meta-data", func(e *TaskEdit) { e.Target.URL = "http://169.254.169.254/latest/meta-data" }},
		{"target.headers[1].name", "X-Xtimer-Task", func(e *TaskEdit) { e.Target.Headers[1].Name = "X-Xtimer-Task" }},
		{"target.headers[0].value", xtimer.Masked, func(e *TaskEdit) { e.Target.Headers[0].Value += "\r\nEvil: 1" }},
		{"target.body", "{not json", func(e *TaskEdit) { e.Target.Body = "{not json" }},
		{"target.success_codes[1]", "700", func(e *TaskEdit) { e.Target.SuccessCodes[1] = 700 }},
		{"timeout_ms", "7200000", func(e *TaskEdit) { e.TimeoutMs = 7_200_000 }},
		{"max_attempts", "1000", func(e *TaskEdit) { e.MaxAttempts = 1000 }},
		{"backoff_max_ms", "500", func(e *TaskEdit) { e.BackoffMaxMs = 500 }},
		{"max_concurrent", "5000", func(e *TaskEdit) { e.MaxConcurrent = 5000 }},
		{"overlap", "sometimes", func(e *TaskEdit) { e.Overlap = "sometimes" }},
		{"jitter_ms", "120000", func(e *TaskEdit) { e.JitterMs = 120_000 }},
		{"jitter_ms", "5000", func(e *TaskEdit) { e.Spec, e.JitterMs = "@every 5s", 5000 }},
		{"misfire", "later", func(e *TaskEdit) { e.Misfire = "later" }},
		{"misfire_window_ms", "10", func(e *TaskEdit) { e.MisfireWindowMs = 10 }},
		{"max_runs", "-1", func(e *TaskEdit) { e.MaxRuns = -1 }},
	} {
		e := hookEdit("billing.hook")
		c.edit(&e)
		r := apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, e))
		got := requireAPIError(t, r, 400, codeInvalid, c.field)
		require.Equal(t, c.value, got.Value, c.field)
		raw, err := json.Marshal(r.Error)
		require.NoError(t, err)
		requireNoSecret(t, string(raw), "the error for "+c.field)
	}
	// A spec's error names the part of it that is wrong, as the schedule
	// form's preview does.
	e := hookEdit("billing.hook")
	e.Spec = "61 * * * *"
	got := requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, e)), 400, codeInvalid, "spec")
	require.Equal(t, "minute", got.SpecField)
	require.Equal(t, `minute field "61": value 61 out of range 0-59`, specMessage(got))

	// The body itself: unknown fields and wrong types.
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks", `{"code": "x", "retries": 3}`), 400, codeUnknownField, "retries")
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks", `{"code": "x", "target": {"url": "http://127.0.0.1/", "verb": "GET"}}`), 400, codeUnknownField, "verb")
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks", `{"code": "x", "target": {"success_codes": ["2xx"]}}`), 400, codeInvalid, "target.success_codes")
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks", `{"code": "x", "timeout_ms": "30s"}`), 400, codeInvalid, "timeout_ms")
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks", `{}`), 400, codeInvalid, "code")

	list := apiData[[]TaskView](t, apiGet(t, f, "api/tasks?kind=http"))
	require.Empty(t, list, "nothing was stored")
}

// 409 for a code taken and for a Go task; 404 for an unknown one; 403
// when read-only.
func TestAPIHTTPTaskConflicts(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	body := jsonBody(t, hookEdit("billing.hook"))
	require.Equal(t, http.StatusCreated, apiSend(t, f, http.MethodPost, "api/tasks", body).Status)
	e := requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks", body), 409, codeConflict, "")
	require.Contains(t, e.Message, "billing.hook")
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, hookEdit("report.minutely"))), 409, codeConflict, "")

	// A Go task is defined in code: neither changed nor deleted here.
	e = requireAPIError(t, apiSend(t, f, http.MethodDelete, "api/tasks/report.minutely", "{}"), 409, codeConflict, "")
	require.Contains(t, e.Message, "a Go task is defined in code")
	requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/report.minutely", jsonBody(t, hookEdit(""))), 409, codeConflict, "")
	require.Equal(t, store.TaskActive, taskStatus(t, f, "report.minutely"))

	requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/no.such.task", jsonBody(t, hookEdit(""))), 404, codeNotFound, "")
	requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, hookEdit("other.code"))), 400, codeInvalid, "code")
	requireAPIError(t, apiSend(t, f, http.MethodDelete, "api/tasks/billing.hook", `{"force": true}`), 400, codeUnknownField, "force")

	// Only the action's history: the refused requests left none.
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/billing.hook"))
	require.Len(t, d.Actions, 1)
	require.Equal(t, "create", d.Actions[0].Action)

	ro := readOnlyConsole(t, f)
	requireAPIError(t, apiSend(t, ro, http.MethodPost, "api/tasks", jsonBody(t, hookEdit("ro.hook"))), 403, codeReadOnly, "")
	requireAPIError(t, apiSend(t, ro, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, hookEdit(""))), 403, codeReadOnly, "")
	requireAPIError(t, apiSend(t, ro, http.MethodDelete, "api/tasks/billing.hook", "{}"), 403, codeReadOnly, "")
}

// The form's pages: the new task's and an HTTP task's, with the cron
// helper the schedule form has; the target on the task page, escaped.
func TestTaskFormPages(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	tasks := pagesGet(t, f, "")
	require.Contains(t, tasks.Body, `<a id="new-task" class="button primary" href="/xtimer/tasks/new">New callback task</a>`)

	p := pagesGet(t, f, "tasks/new")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	form := pagesSection(t, p.Body, "task-form", "</form>")
	for _, name := range []string{"code", "name", "description", "owner", "method", "url", "header_name", "header_value", "header_secret", "body", "success_codes", "secret", "timeout_ms", "max_attempts", "backoff_base_ms", "backoff_max_ms", "max_concurrent", "overlap", "misfire", "misfire_window_ms", "end_at", "max_runs", "jitter_ms", "paused", "spec", "dialect", "zone"} {
		require.Contains(t, form, `name="`+name+`"`, name)
	}
	require.Equal(t, minHeaderRows, strings.Count(form, `name="header_name"`), "rows to fill without JavaScript")
	require.Contains(t, form, `data-field="target.headers[2].value"`)
	require.Contains(t, form, `<option value="POST" selected>POST</option>`)
	require.Contains(t, form, `<input name="secret" data-field="target.secret" type="password" autocomplete="new-password" placeholder="none: the scheduler's default, if any">`)
	// The schedule form's cron helper, previewing the default spec.
	require.Contains(t, form, `<input id="spec" name="spec" value="0 9 * * *"`)
	require.Equal(t, 9, strings.Count(form, `class="preset small"`))
	require.Contains(t, form, `<div id="spec-error" class="field-error" role="alert"></div>`)
	require.Len(t, pagesAttrs(pagesSection(t, form, "preview-next", "</ol>"), `time`, "datetime"), 3)
	require.Contains(t, form, `<button id="save" type="submit" class="primary" disabled>Create</button>`)
	require.NotContains(t, form, `action=`, "without JavaScript the form goes nowhere")

	// An HTTP task with hostile values: they read as text everywhere.
	e := hookEdit("hostile.hook")
	e.Name = `<script>alert(1)</script>`
	e.Target.URL = `http://127.0.0.1:9/x?q="><script>alert(2)</script>`
	e.Target.Headers = append(e.Target.Headers, xtimer.HTTPHeader{Name: "X-Note", Value: `"><img src=x onerror=alert(3)>`})
	e.Target.Body = `{"html":"</pre><script>alert(4)</script>"}`
	r := apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, e))
	require.Equal(t, http.StatusCreated, r.Status, "%+v", r.Error)
	for _, rel := range []string{"tasks/hostile.hook", "tasks/hostile.hook/edit", ""} {
		body := rawGet(t, f, rel)
		require.NotContains(t, body, "<script>alert", rel)
		require.NotContains(t, body, "<img src=x", rel)
		requireNoSecret(t, body, rel)
	}
	task := pagesGet(t, f, "tasks/hostile.hook")
	require.Contains(t, task.Body, `<code id="target-url">http://127.0.0.1:9/x?q=&#34;&gt;&lt;script&gt;alert(2)&lt;/script&gt;</code>`)
	require.Contains(t, task.Body, `<li><code>Authorization: `+xtimer.Masked+`</code> <span class="badge">secret</span></li>`)
	require.Contains(t, task.Body, `<li><code>X-Note: &#34;&gt;&lt;img src=x onerror=alert(3)&gt;</code></li>`)
	require.Contains(t, task.Body, `<dd id="target-secret">set</dd>`)
	require.Contains(t, task.Body, `<a id="edit-task" class="button small" href="/xtimer/tasks/hostile.hook/edit">Edit task</a>`)
	require.Contains(t, task.Body, `<button type="button" class="small danger" data-action="delete" data-task="hostile.hook">Delete</button>`)

	edit := pagesGet(t, f, "tasks/hostile.hook/edit")
	require.Equal(t, http.StatusOK, edit.Status)
	form = pagesSection(t, edit.Body, "task-form", "</form>")
	require.Contains(t, form, `data-edit="true" data-task="hostile.hook"`)
	require.Contains(t, form, `value="hostile.hook" maxlength="128"`)
	require.Contains(t, form, ` readonly>`, "the code never changes")
	require.Contains(t, form, `value="`+xtimer.Masked+`" aria-label="Header value" placeholder="Value" autocomplete="off" spellcheck="false" type="password">`)
	require.Contains(t, form, `<input type="checkbox" name="header_secret" checked>`)
	require.Contains(t, form, `placeholder="set — leave empty to keep"`)
	require.Contains(t, form, `value="200, 202"`)
	require.Contains(t, form, `<input id="spec" name="spec" value="0 9 * * *"`)
	require.Contains(t, form, `<option value="Europe/Paris" selected>Europe/Paris</option>`)
	require.NotContains(t, form, `name="paused"`, "status is pause and resume's")

	// A Go task has neither the form nor the buttons.
	require.Equal(t, http.StatusConflict, pagesGet(t, f, "tasks/report.minutely/edit").Status)
	goTask := pagesGet(t, f, "tasks/report.minutely")
	require.NotContains(t, goTask.Body, `data-action="delete"`)
	require.NotContains(t, goTask.Body, `id="target"`)

	// Read-only: no button to a form that could not save.
	ro := readOnlyConsole(t, f)
	require.NotContains(t, pagesGet(t, ro, "").Body, `id="new-task"`)
	roTask := pagesGet(t, ro, "tasks/hostile.hook")
	require.NotContains(t, roTask.Body, `data-action="delete"`)
	require.NotContains(t, roTask.Body, `id="edit-task"`)
	require.NotContains(t, pagesGet(t, ro, "tasks/new").Body, `id="save"`)
}

// The executions list, a task's recent runs and an execution's page show
// the response status, red outside 2xx.
func TestPagesShowTheHTTPStatus(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	require.Equal(t, http.StatusCreated, apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, hookEdit("billing.hook"))).Status)
	rows := insertExecutions(t, f,
		store.Execution{TaskCode: "billing.hook", RunTime: fakeStart.Add(-2 * time.Minute).UnixMilli(), Status: store.StatusSucceeded, Source: store.SourceSchedule, Attempt: 1, MaxAttempts: 3, HTTPStatus: 202, Output: `{"reconciled":42}`},
		store.Execution{TaskCode: "billing.hook", RunTime: fakeStart.Add(-time.Minute).UnixMilli(), Status: store.StatusFailed, Source: store.SourceSchedule, Attempt: 3, MaxAttempts: 3, HTTPStatus: 503, Error: "503 Service Unavailable"},
	)
	ok, bad := strconv.FormatInt(rows[0].ID, 10), strconv.FormatInt(rows[1].ID, 10)

	for _, rel := range []string{"executions", "tasks/billing.hook"} {
		body := pagesGet(t, f, rel).Body
		require.Contains(t, body, `<th>HTTP</th>`, rel)
		require.Contains(t, pagesBetween(t, body, `<tr data-execution="`+ok+`"`, "</tr>"), `<td class="http-status num" data-label="HTTP">202</td>`, rel)
		require.Contains(t, pagesBetween(t, body, `<tr data-execution="`+bad+`"`, "</tr>"), `<td class="http-status num bad-text" data-label="HTTP">503</td>`, rel)
	}
	// A Go task's runs have no HTTP status: the cell is empty.
	id := runNow(t, f, "report.minutely", store.StatusSucceeded)
	require.Contains(t, pagesBetween(t, pagesGet(t, f, "executions").Body, fmt.Sprintf(`<tr data-execution="%d"`, id), "</tr>"), `<td class="http-status num" data-label="HTTP"></td>`)
	require.NotContains(t, pagesGet(t, f, fmt.Sprintf("executions/%d", id)).Body, `id="http-status"`)

	exec := pagesGet(t, f, "executions/"+ok).Body
	require.Contains(t, exec, `<span id="http-status">202</span> <span class="muted">Accepted</span>`)
	require.Contains(t, exec, `<pre id="output" class="out">{&#34;reconciled&#34;:42}</pre>`)
	require.Contains(t, pagesGet(t, f, "executions/"+bad).Body, `<span id="http-status" class="bad-text">503</span>`)

	v := apiData[ExecutionView](t, apiGet(t, f, "api/executions/"+bad))
	require.Equal(t, 503, v.HTTPStatus)
	list := apiData[[]ExecutionView](t, apiGet(t, f, "api/executions?task=billing.hook"))
	require.Equal(t, []int{503, 202}, []int{list[0].HTTPStatus, list[1].HTTPStatus})
}

// A jittered fire's page shows its planned start beside its run time,
// and the task's page its jitter; a fire without jitter shows neither.
func TestPagesShowTheJitter(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	require.Equal(t, http.StatusCreated, apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, hookEdit("billing.hook"))).Status)
	run := fakeStart.Add(-2 * time.Minute).UnixMilli()
	rows := insertExecutions(t, f,
		store.Execution{TaskCode: "billing.hook", RunTime: run, PlannedMs: run + 7250, Status: store.StatusSucceeded, Source: store.SourceSchedule, Attempt: 1, MaxAttempts: 3},
		store.Execution{TaskCode: "billing.hook", RunTime: run + 60_000, Status: store.StatusSucceeded, Source: store.SourceSchedule, Attempt: 1, MaxAttempts: 3},
	)
	jittered := pagesGet(t, f, fmt.Sprintf("executions/%d", rows[0].ID)).Body
	require.Contains(t, pagesBetween(t, jittered, `id="planned-at"`, "</dd>"), "jitter 7.2 s")
	require.NotContains(t, pagesGet(t, f, fmt.Sprintf("executions/%d", rows[1].ID)).Body, `id="planned-at"`)
	require.Contains(t, pagesBetween(t, pagesGet(t, f, "tasks/billing.hook").Body, `id="jitter"`, "</dd>"), "up to 30 s after each fire")
}

// A Go task removed from the code (no live replica registers it) is
// deleted through the API, and its page offers the button; one the
// scheduler registers answers 409.
func TestAPIDeletesAnOrphanedGoTask(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	_, err := f.Store.UpsertTask(context.Background(), &store.Task{App: f.S.App(), Code: "gone.job", Name: "Gone", Spec: "0 * * * *"})
	require.NoError(t, err)
	require.Contains(t, pagesGet(t, f, "tasks/gone.job").Body, `id="delete-orphan"`)
	require.NotContains(t, pagesGet(t, f, "tasks/report.minutely").Body, `id="delete-orphan"`)

	requireAPIError(t, apiSend(t, f, http.MethodDelete, "api/tasks/report.minutely", "{}"), 409, codeConflict, "")
	r := apiSend(t, f, http.MethodDelete, "api/tasks/gone.job", "{}")
	require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
	requireAPIError(t, apiSend(t, f, http.MethodDelete, "api/tasks/gone.job", "{}"), 404, codeNotFound, "")
}
