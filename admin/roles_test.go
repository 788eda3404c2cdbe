package admin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// testPrincipals are the principals of the role tests, chosen by the
// X-Test-Principal header: each role with the fixture's app in scope
// ("-in") and with another app only ("-out").
func testPrincipals(app string) map[string]Principal {
	out := map[string]Principal{}
	for _, r := range roles {
		out[string(r)+"-in"] = Principal{Name: string(r) + "-in", Role: r, Apps: []string{app, "elsewhere"}}
		out[string(r)+"-out"] = Principal{Name: string(r) + "-out", Role: r, Apps: []string{"elsewhere"}}
	}
	return out
}

// principalsAuthorizer authorizes the principal the X-Test-Principal
// header names.
func principalsAuthorizer(ps map[string]Principal) Authorizer {
	return func(r *http.Request) (Principal, error) {
		p, ok := ps[r.Header.Get("X-Test-Principal")]
		if !ok {
			return Principal{}, fmt.Errorf("%w: no X-Test-Principal", ErrUnauthenticated)
		}
		return p, nil
	}
}

// roleRequest is one request of the role table: built fresh for each
// principal, as some change what they act on (a deleted task, a retried
// execution).
type roleRequest struct {
	// route is the mounted route it exercises: "METHOD pattern", the
	// pattern without the console's prefix.
	route string
	// need is the least role that may send it.
	need Role
	// ok is the answer when allowed; out the answer to a principal who
	// may not see the fixture's app, whatever its role.
	ok, out int
	build   func(t *testing.T, i int) (path, body string)
}

// roleFixture is what the role table acts on.
type roleFixture struct {
	*fixture
	failed int64 // a failed execution of always.fails
	fires  int   // failed executions written
}

func (f *roleFixture) httpTask(t *testing.T, code string) {
	t.Helper()
	require.NoError(t, f.S.CreateHTTPTask(context.Background(), xtimer.HTTPTask{Code: code, Spec: "0 0 1 1 *", Paused: true,
		Target: xtimer.HTTPTarget{Method: "POST", URL: "http://127.0.0.1:9/hook", Body: `{"a":1}`}}))
}

// failedExecution writes a failed execution of always.fails, as a
// fire an hour before the fake clock's start leaves it.
func (f *roleFixture) failedExecution(t *testing.T) int64 {
	t.Helper()
	f.fires++
	at := fakeStart.Add(-time.Hour).Add(time.Duration(f.fires) * time.Minute)
	return insertExecutions(t, f.fixture, store.Execution{TaskCode: "always.fails", RunTime: at.UnixMilli(), Status: store.StatusFailed,
		Source: store.SourceSchedule, Attempt: 1, MaxAttempts: 1, StartedMs: at.UnixMilli(), FinishedMs: at.UnixMilli() + 10, Error: "boom"})[0].ID
}

// roleTable is every request the console serves, by route, with the role
// it needs and its answers.
func roleTable(t *testing.T, f *roleFixture) []roleRequest {
	fixed := func(path, body string) func(*testing.T, int) (string, string) {
		return func(*testing.T, int) (string, string) { return path, body }
	}
	exec := func(format string) func(*testing.T, int) (string, string) {
		return fixed(fmt.Sprintf(format, f.failed), "")
	}
	const viewer, operator, admin = RoleViewer, RoleOperator, RoleAdmin
	return []roleRequest{
		{"GET api/apps", viewer, 200, 200, fixed("api/apps", "")},
		{"GET api/tasks", viewer, 200, 200, fixed("api/tasks", "")},
		{"POST api/tasks", admin, 201, 404, func(_ *testing.T, i int) (string, string) {
			return "api/tasks", fmt.Sprintf(`{"code":"created.%d","spec":"0 0 1 1 *","paused":true,"target":{"method":"GET","url":"http://127.0.0.1:9/x"}}`, i)
		}},
		{"GET api/tasks/{code}", viewer, 200, 404, fixed("api/tasks/report.minutely", "")},
		{"PUT api/tasks/{code}", admin, 200, 404, fixed("api/tasks/hook", `{"spec":"0 0 2 1 *","target":{"method":"POST","url":"http://127.0.0.1:9/hook"}}`)},
		{"DELETE api/tasks/{code}", admin, 200, 404, func(t *testing.T, i int) (string, string) {
			code := fmt.Sprintf("doomed.%d", i)
			f.httpTask(t, code)
			return "api/tasks/" + code, "{}"
		}},
		{"POST api/tasks/{code}/pause", operator, 200, 404, fixed("api/tasks/xss.task/pause", "{}")},
		{"POST api/tasks/{code}/resume", operator, 200, 404, fixed("api/tasks/xss.task/resume", "{}")},
		{"POST api/tasks/{code}/trigger", operator, 201, 404, fixed("api/tasks/report.minutely/trigger", `{"params":{"region":"eu"},"note":"go task: operators may"}`)},
		// Another body for an HTTP task replaces the one it signs: admin only.
		{"POST api/tasks/{code}/trigger", admin, 201, 404, fixed("api/tasks/hook/trigger", `{"params":"{\"a\":2}"}`)},
		{"POST api/tasks/{code}/trigger", operator, 201, 404, fixed("api/tasks/hook/trigger", `{"note":"its own body"}`)},
		{"PUT api/tasks/{code}/schedule", admin, 200, 404, fixed("api/tasks/report.minutely/schedule", `{"spec":"*/2 * * * *"}`)},
		{"DELETE api/tasks/{code}/schedule", admin, 200, 404, fixed("api/tasks/report.minutely/schedule", "{}")},
		{"PUT api/tasks/{code}/options", admin, 200, 404, fixed("api/tasks/report.minutely/options", `{"max_attempts":2}`)},
		{"DELETE api/tasks/{code}/options", admin, 200, 404, fixed("api/tasks/report.minutely/options", "{}")},
		{"GET api/tasks/{code}/backfill", viewer, 200, 404, fixed("api/tasks/report.minutely/backfill?from=2026-11-30T08:00:00Z&to=2026-11-30T08:05:00Z", "")},
		{"POST api/tasks/{code}/backfill", operator, 200, 404, fixed("api/tasks/report.minutely/backfill", `{"from":"2026-11-30T08:00:00Z","to":"2026-11-30T08:02:00Z"}`)},
		{"GET api/executions", viewer, 200, 200, fixed("api/executions", "")},
		{"GET api/executions/{id}", viewer, 200, 404, exec("api/executions/%d")},
		{"GET api/executions/{id}/attempts", viewer, 200, 404, exec("api/executions/%d/attempts")},
		{"POST api/executions/{id}/retry", operator, 200, 404, func(t *testing.T, _ int) (string, string) {
			return fmt.Sprintf("api/executions/%d/retry", f.failedExecution(t)), "{}"
		}},
		{"GET api/replicas", viewer, 200, 200, fixed("api/replicas", "")},
		{"GET api/preview", viewer, 200, 200, fixed("api/preview?spec=0+9+*+*+*", "")},
		{"GET api/health", viewer, 200, 404, fixed("api/health", "")},
		{"GET api/calendars", viewer, 200, 200, fixed("api/calendars", "")},
		{"GET api/calendars/{name}", viewer, 200, 404, fixed("api/calendars/holidays", "")},
		{"PUT api/calendars/{name}", admin, 200, 404, fixed("api/calendars/holidays", `{"days":["2026-12-25","2027-01-01"]}`)},

		{"GET {$}", viewer, 200, 200, fixed("", "")},
		{"GET tasks/new", viewer, 200, 404, fixed("tasks/new", "")},
		{"GET tasks/{code}", viewer, 200, 404, fixed("tasks/report.minutely", "")},
		{"GET tasks/{code}/schedule", viewer, 200, 404, fixed("tasks/report.minutely/schedule", "")},
		{"GET tasks/{code}/edit", viewer, 200, 404, fixed("tasks/hook/edit", "")},
		{"GET executions", viewer, 200, 200, fixed("executions", "")},
		{"GET executions/{id}", viewer, 200, 404, exec("executions/%d")},
		{"GET replicas", viewer, 200, 200, fixed("replicas", "")},
		{"GET zone", viewer, 303, 303, fixed("zone?zone=UTC&back=/xtimer/", "")},
		{"GET static/{file}", viewer, 200, 200, fixed("static/app.css", "")},
		{"GET calendars", viewer, 200, 200, fixed("calendars", "")},
		{"GET calendars/{name}", viewer, 200, 404, fixed("calendars/holidays", "")},
	}
}

// Every route the console mounts, found from its mux, answers each role
// with or without the app in scope as the table says: a viewer reads, an
// operator also acts, an admin also edits; a principal who may not see
// the app gets 404 for its tasks and executions and filtered lists; a
// read-only console makes an admin a viewer. A route without a row in the
// table fails the test.
func TestEveryRouteChecksRoleAndApp(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	app := f.S.App()
	ps := testPrincipals(app)
	ps["admin-readonly"] = Principal{Name: "admin-readonly", Role: RoleAdmin}
	consoles := map[bool]http.Handler{}
	for _, readOnly := range []bool{false, true} {
		h, err := New(f.S, Options{Authorize: principalsAuthorizer(ps), ReadOnly: readOnly, Logger: f.S.Options().Logger})
		require.NoError(t, err)
		consoles[readOnly] = h
	}
	c, _, err := newConsole(f.S, Options{})
	require.NoError(t, err)
	rf := &roleFixture{fixture: f}
	rf.httpTask(t, "hook")
	require.NoError(t, f.S.SetCalendar(context.Background(), "holidays", []string{"2026-12-25"}))
	rf.failed = rf.failedExecution(t)
	table := roleTable(t, rf)

	// The table covers every route and method mounted, and names no other.
	covered := map[string]bool{}
	for _, rr := range table {
		covered[rr.route] = true
	}
	var mounted []string
	for _, r := range c.routes {
		for m, rule := range r.Rules {
			if m == http.MethodHead {
				require.Equal(t, r.Rules[http.MethodGet], rule, "HEAD %s", r.Pattern)
				continue
			}
			key := m + " " + r.Pattern
			mounted = append(mounted, key)
			require.True(t, covered[key], "route %s has no row in the role table", key)
		}
	}
	for key := range covered {
		require.Contains(t, mounted, key, "the role table names a route the console does not mount")
	}

	n := 0
	for _, rr := range table {
		for _, who := range []string{"viewer-in", "operator-in", "admin-in", "viewer-out", "operator-out", "admin-out", "admin-readonly"} {
			p := ps[who]
			want := rr.ok
			switch {
			case who == "admin-readonly" && rr.need != RoleViewer:
				want = http.StatusForbidden
			case !p.SeesApp(app):
				want = rr.out
			case !p.Role.Allows(rr.need):
				want = http.StatusForbidden
			}
			n++
			path, body := rr.build(t, n)
			method, _, _ := strings.Cut(rr.route, " ")
			var rd io.Reader
			if body != "" {
				rd = strings.NewReader(body)
			}
			req, err := http.NewRequest(method, f.Server.URL+"/xtimer/"+path, rd)
			require.NoError(t, err)
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			req.Header.Set("X-Test-Principal", who)
			rec := httptest.NewRecorder()
			consoles[who == "admin-readonly"].ServeHTTP(rec, req)
			require.Equal(t, want, rec.Code, "%s as %s (%s): %s", rr.route, who, path, rec.Body.String())
			if want == http.StatusForbidden {
				code := codeForbidden
				if who == "admin-readonly" && method != http.MethodGet {
					code = codeReadOnly
				}
				require.Contains(t, rec.Body.String(), `"code":"`+code+`"`, "%s as %s", rr.route, who)
			}
		}
	}
}

// The principal that may see only its apps lists only those, reads their
// tasks and executions, and gets 404 for the others' (the scheduler's own
// included), by code, by id or by ?app=.
func TestScopedPrincipalSeesOnlyItsApps(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{Authorize: func(*http.Request) (Principal, error) {
		return Principal{Name: "carol", Role: RoleOperator, Apps: []string{"other-app"}}, nil
	}}})
	otherApp(t, f)
	own := runNow(t, f, "report.minutely", store.StatusSucceeded)
	other := insertExecutions(t, f, store.Execution{App: "other-app", TaskCode: "other.func", RunTime: fakeStart.Add(-time.Hour).UnixMilli(),
		Status: store.StatusSucceeded, Source: store.SourceSchedule, MaxAttempts: 1, Attempt: 1})[0]

	require.Equal(t, []string{"other-app"}, apiData[[]string](t, apiGet(t, f, "api/apps")))
	require.Equal(t, []string{"other.func", "other.http"}, taskCodes(apiData[[]TaskView](t, apiGet(t, f, "api/tasks"))))
	require.Equal(t, []int64{other.ID}, executionIDs(apiData[[]ExecutionView](t, apiGet(t, f, "api/executions"))))
	require.Equal(t, "other.func", apiData[TaskDetail](t, apiGet(t, f, "api/tasks/other.func?app=other-app")).Task.Code)
	require.Equal(t, other.ID, apiData[ExecutionView](t, apiGet(t, f, fmt.Sprintf("api/executions/%d", other.ID))).ID)

	for _, path := range []string{
		"api/tasks?app=" + f.S.App(), "api/executions?app=" + f.S.App(), "api/replicas?app=" + f.S.App(),
		"api/calendars?app=" + f.S.App(), "api/tasks/report.minutely", "api/tasks/report.minutely?app=" + f.S.App(),
		fmt.Sprintf("api/executions/%d", own), fmt.Sprintf("api/executions/%d/attempts", own),
	} {
		requireAPIError(t, apiGet(t, f, path), http.StatusNotFound, codeNotFound, "")
	}
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/pause", "{}"), http.StatusNotFound, codeNotFound, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, fmt.Sprintf("api/executions/%d/retry", own), "{}"), http.StatusNotFound, codeNotFound, "")

	// The pages' app selector offers only the principal's app.
	page := pagesGet(t, f, "")
	require.Equal(t, http.StatusOK, page.Status)
	require.Equal(t, []string{"other-app"}, pagesAttrs(pagesBetween(t, page.Body, `<select name="app">`, `</select>`), `option`, "value"))
	require.NotContains(t, page.Body, "report.minutely")
	require.Equal(t, http.StatusNotFound, pagesGet(t, f, "tasks/report.minutely").Status)
}

// The pages offer each role the buttons and forms it may use, and no
// other: a viewer none, an operator pause, resume, run now, backfill and
// retry, an admin also the edits, the new task and the options.
func TestPagesOfferWhatTheRoleMayDo(t *testing.T) {
	t.Parallel()
	var role atomic.Value
	f := setup(t, fixtureOpts{admin: Options{Authorize: func(*http.Request) (Principal, error) {
		return Principal{Name: "p", Role: role.Load().(Role)}, nil
	}}})
	rf := &roleFixture{fixture: f}
	rf.httpTask(t, "hook")
	failed := rf.failedExecution(t)
	has := func(body, needle string) bool { return strings.Contains(body, needle) }
	for _, c := range []struct {
		role                 Role
		operate, admin, body bool
	}{
		{RoleViewer, false, false, false},
		{RoleOperator, true, false, false},
		{RoleAdmin, true, true, true},
	} {
		role.Store(c.role)
		tasks := pagesGet(t, f, "").Body
		require.Equal(t, c.admin, has(tasks, `id="new-task"`), "%s: new task", c.role)
		require.Equal(t, c.operate, has(tasks, `data-action="pause"`), "%s: pause", c.role)
		require.Equal(t, c.admin, has(tasks, `data-action="edit"`), "%s: edit schedule", c.role)
		task := pagesGet(t, f, "tasks/report.minutely").Body
		require.Equal(t, c.operate, has(task, `id="trigger-form"`), "%s: run now", c.role)
		require.Equal(t, c.operate, has(task, `id="backfill-form"`), "%s: backfill", c.role)
		require.Equal(t, c.operate, has(task, `id="trigger-params"`), "%s: a Go task's parameters", c.role)
		require.Equal(t, c.admin, has(task, `id="options-form"`), "%s: options", c.role)
		hook := pagesGet(t, f, "tasks/hook").Body
		require.Equal(t, c.admin, has(hook, `id="edit-task"`), "%s: edit task", c.role)
		require.Equal(t, c.admin, has(hook, `data-action="delete"`), "%s: delete", c.role)
		require.Equal(t, c.body, has(hook, `id="trigger-params"`), "%s: an HTTP task's body", c.role)
		require.Equal(t, c.operate, has(pagesGet(t, f, fmt.Sprintf("executions/%d", failed)).Body, `id="retry"`), "%s: retry", c.role)
		require.Equal(t, c.admin, has(pagesGet(t, f, "tasks/report.minutely/schedule").Body, `id="save"`), "%s: save schedule", c.role)
		require.Equal(t, c.admin, has(pagesGet(t, f, "calendars").Body, `id="calendar-form"`), "%s: new calendar", c.role)
	}
}

// An authorizer written before roles (no Role) makes admins, and the
// console says so once in its log; a role that is none of the constants
// is refused.
func TestPrincipalWithoutRoleIsAdminLoggedOnce(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	var role atomic.Value
	role.Store(Role(""))
	f := setup(t, fixtureOpts{admin: Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Authorize: func(*http.Request) (Principal, error) {
		return Principal{Name: "legacy", Role: role.Load().(Role)}, nil
	}}})
	for range 3 {
		require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/pause", "{}").Status)
	}
	warned := 0
	for _, l := range logs.lines(t) {
		if strings.Contains(fmt.Sprint(l["msg"]), "without a role") {
			warned++
			require.Equal(t, "legacy", l["principal"])
		}
	}
	require.Equal(t, 1, warned)
	role.Store(Role("superuser"))
	e := requireAPIError(t, apiGet(t, f, "api/tasks"), http.StatusForbidden, codeForbidden, "")
	require.Contains(t, e.Message, `role "superuser"`)
}
