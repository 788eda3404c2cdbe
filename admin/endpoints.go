package admin

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// The JSON API, under Prefix+"api/". docs/console.md documents it with curl.
//
//	GET    api/apps
//	GET    api/tasks?app=&status=&kind=&q=&after=&limit=
//	POST   api/tasks                  TaskEdit: creates an HTTP callback task (201)
//	GET    api/tasks/{code}?app=      with "http", the target, for an HTTP task
//	PUT    api/tasks/{code}           TaskEdit: changes an HTTP callback task
//	DELETE api/tasks/{code}           {}: deletes an HTTP callback task
//	POST   api/tasks/{code}/pause     {}
//	POST   api/tasks/{code}/resume    {}
//	POST   api/tasks/{code}/trigger   {} or {"params": ..., "note": "..."} (trigger.go)
//	PUT    api/tasks/{code}/schedule  {"spec": "...", "dialect": "cron|quartz", "zone": "Europe/Paris"}
//	DELETE api/tasks/{code}/schedule  {}
//	PUT    api/tasks/{code}/options   OptionsEdit: overrides a Go task's options (options.go)
//	DELETE api/tasks/{code}/options   {}: the code's options again
//	GET    api/tasks/{code}/backfill?from=&to=   {"fires": n, "new": m} (backfill.go)
//	POST   api/tasks/{code}/backfill  {"from": "2026-11-30T00:00:00Z", "to": "..."}: {"recorded": n}
//	GET    api/executions?app=&task=&status=&source=&replica=&from=&to=&after=&limit=
//	                                  a sharded fire as one item, with "fire" (fires.go)
//	GET    api/executions/{id}        a shard's with "fire" and "fire_shards"
//	GET    api/executions/{id}/attempts  every attempt, oldest first (attempts.go)
//	POST   api/executions/{id}/retry     {}: one more attempt of a failed or timed_out execution (attempts.go)
//	GET    api/replicas?app=
//	GET    api/preview?spec=&dialect=&tz=&n=
//	GET    api/health                 Scheduler.Health: 200 when OK, 503 (same body) when not
//	GET    api/calendars?app=         the app's exclusion calendars (calendars.go)
//	GET    api/calendars/{name}?app=  {"name": "holidays", "days": ["2026-12-25", ...]}
//	PUT    api/calendars/{name}       {"days": [...]}: replaces the days (Scheduler.SetCalendar)
//
// TaskEdit, the body of POST api/tasks and PUT api/tasks/{code}
// (durations in milliseconds; secrets write-only: "" or "••••••" on PUT
// keeps the stored one):
//
//	{"code": "billing.reconcile", "name": "…", "description": "…", "owner": "…",
//	 "spec": "0 9 * * *", "dialect": "cron", "zone": "Europe/Paris",
//	 "target": {"method": "POST", "url": "https://billing.internal/reconcile",
//	            "headers": [{"name": "Authorization", "value": "Bearer x", "secret": true}],
//	            "body": "{}", "success_codes": [200, 202], "secret": "hmac-key"},
//	 "timeout_ms": 30000, "max_attempts": 3, "backoff_base_ms": 1000, "backoff_max_ms": 60000,
//	 "max_concurrent": 16, "overlap": "buffer_one", "jitter_ms": 0, "pause_on_failure": 0,
//	 "misfire": "run_once", "misfire_window_ms": 3600000, "end_at": null, "max_runs": 0,
//	 "exclude": ["2026-12-25"], "calendar": "holidays", "paused": false}
//
// A wrong field answers 400 naming it as the body does ("target.url",
// "target.headers[2].name", "timeout_ms"); a code taken, or a Go task
// (defined in code, not in the console), 409.
//
// Reads may name any app sharing the database (app defaults to the
// scheduler's); actions act on the scheduler's own app, whose replicas hold
// the handlers.
func (c *console) routeAPI(mux *http.ServeMux) {
	api := c.prefix + "api/"
	c.route(mux, api+"apps", map[string]endpoint{"GET": read(c.apiApps)})
	c.route(mux, api+"tasks", map[string]endpoint{"GET": read(c.apiTasks), "POST": administer(c.apiCreateTask)})
	c.route(mux, api+"tasks/{code}", map[string]endpoint{"GET": read(c.apiTask), "PUT": administer(c.apiUpdateTask), "DELETE": administer(c.apiDeleteTask)})
	c.route(mux, api+"tasks/{code}/pause", map[string]endpoint{"POST": operate(c.apiPause)})
	c.route(mux, api+"tasks/{code}/resume", map[string]endpoint{"POST": operate(c.apiResume)})
	// Running an HTTP task with parameters of its own needs admin: apiTrigger checks.
	c.route(mux, api+"tasks/{code}/trigger", map[string]endpoint{"POST": operate(c.apiTrigger)})
	c.route(mux, api+"tasks/{code}/schedule", map[string]endpoint{"PUT": administer(c.apiSetSchedule), "DELETE": administer(c.apiResetSchedule)})
	c.route(mux, api+"tasks/{code}/options", map[string]endpoint{"PUT": administer(c.apiSetOptions), "DELETE": administer(c.apiResetOptions)})
	// The preview reads the scheduler's app, which the backfill acts on.
	c.route(mux, api+"tasks/{code}/backfill", map[string]endpoint{"GET": {routeRule{Role: RoleViewer, OwnApp: true}, c.apiBackfillPreview}, "POST": operate(c.apiBackfill)})
	c.route(mux, api+"executions", map[string]endpoint{"GET": read(c.apiExecutions)})
	c.route(mux, api+"executions/{id}", map[string]endpoint{"GET": read(c.apiExecution)})
	c.routeAttempts(mux)
	c.route(mux, api+"replicas", map[string]endpoint{"GET": read(c.apiReplicas)})
	c.route(mux, api+"preview", map[string]endpoint{"GET": read(c.apiPreview)})
	c.route(mux, api+"health", map[string]endpoint{"GET": {routeRule{Role: RoleViewer, OwnApp: true}, c.apiHealth}})
	mux.HandleFunc(api, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, apiErrorf(http.StatusNotFound, codeNotFound, "no API endpoint %s %s", r.Method, r.URL.Path))
	})
}

// app reads the app parameter: when absent, the scheduler's app, or the
// principal's first if it may not see that one. An app the principal may
// not see sets q.err to a 404.
func (c *console) app(q *query) string {
	a := q.str("app", 64)
	if a == "" {
		return c.defaultApp(q.p)
	}
	if !q.p.SeesApp(a) && q.err == nil {
		q.err = errOutOfScope(fmt.Sprintf("app %q", a))
	}
	return a
}

func (c *console) apiApps(w http.ResponseWriter, r *http.Request) {
	if q := newQuery(r); q.err != nil {
		writeError(w, r, q.err)
		return
	}
	apps, err := c.apps(r.Context())
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, visibleApps(principalOf(r.Context()), apps), "")
}

// apps lists the apps in the database, the scheduler's own always first.
func (c *console) apps(ctx context.Context) ([]string, error) {
	all, err := c.st.Apps(ctx)
	if err != nil {
		return nil, err
	}
	out := []string{c.sopts.App}
	for _, a := range all {
		if a != c.sopts.App {
			out = append(out, a)
		}
	}
	return out, nil
}

// The list filters' choices, in the order a person reads them: the API
// accepts these and the pages offer them.
var (
	taskStatuses      = []string{store.TaskActive, store.TaskPaused}
	taskKinds         = []string{store.KindFunc, store.KindHTTP}
	executionStatuses = []string{store.StatusScheduled, store.StatusRunning, store.StatusRetrying,
		store.StatusSucceeded, store.StatusFailed, store.StatusTimedOut, store.StatusSkipped}
	executionSources = []string{store.SourceSchedule, store.SourceManual, store.SourceRetry, store.SourceCatchup, store.SourceBackfill}
)

// taskQuery reads the task list's filters.
func (c *console) taskQuery(r *http.Request) (store.TaskFilter, string, int, error) {
	q := newQuery(r, "app", "status", "kind", "q", "after", "limit")
	f := store.TaskFilter{
		App:    c.app(q),
		Status: q.oneOf("status", taskStatuses...),
		Kind:   q.oneOf("kind", taskKinds...),
		Text:   q.str("q", 128),
	}
	after := q.str("after", 128)
	limit := q.intIn("limit", store.DefaultListLimit, 1, store.MaxListLimit)
	return f, after, limit, q.err
}

func (c *console) apiTasks(w http.ResponseWriter, r *http.Request) {
	f, after, limit, err := c.taskQuery(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	tasks, next, err := c.taskViews(r.Context(), f, after, limit)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, tasks, next)
}

func (c *console) apiTask(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "app")
	app := c.app(q)
	if q.err != nil {
		writeError(w, r, q.err)
		return
	}
	code := r.PathValue("code")
	if err := checkText("code", code); err != nil {
		writeError(w, r, err)
		return
	}
	d, err := c.taskDetail(r.Context(), app, code)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, d, "")
}

// emptyBody is what trigger, reset and delete take: {}.
type emptyBody struct{}

// ScheduleEdit is the body of PUT api/tasks/{code}/schedule.
type ScheduleEdit struct {
	Spec    string `json:"spec"`
	Dialect string `json:"dialect"`
	Zone    string `json:"zone"`
}

func (c *console) apiPause(w http.ResponseWriter, r *http.Request) {
	var body PauseBody
	c.act(w, r, "pause", &body, func(ctx context.Context, code string) (outcome, error) {
		o, err := body.options()
		if err != nil {
			return outcome{}, err
		}
		return outcome{detail: o.Note}, c.s.PauseWith(ctx, code, o)
	})
}

func (c *console) apiResume(w http.ResponseWriter, r *http.Request) {
	var body PauseBody
	c.act(w, r, "resume", &body, func(ctx context.Context, code string) (outcome, error) {
		o, err := body.options()
		if err != nil {
			return outcome{}, err
		}
		return outcome{detail: o.Note}, c.s.ResumeWith(ctx, code, o)
	})
}

func (c *console) apiSetSchedule(w http.ResponseWriter, r *http.Request) {
	var edit ScheduleEdit
	c.act(w, r, "set_schedule", &edit, func(ctx context.Context, code string) (outcome, error) {
		if err := checkDialect(edit.Dialect); err != nil {
			return outcome{}, err
		}
		if strings.TrimSpace(edit.Spec) == "" {
			return outcome{}, fieldError("spec", edit.Spec, "empty: want a cron expression such as \"0 9 * * 1-5\"")
		}
		before := c.scheduleNow(ctx, code)
		if err := c.s.SetSchedule(ctx, code, edit.Spec, xtimer.Dialect(edit.Dialect), edit.Zone); err != nil {
			return outcome{}, err
		}
		return outcome{detail: before + " → " + c.scheduleNow(ctx, code)}, nil
	})
}

func (c *console) apiResetSchedule(w http.ResponseWriter, r *http.Request) {
	c.act(w, r, "reset_schedule", &emptyBody{}, func(ctx context.Context, code string) (outcome, error) {
		before := c.scheduleNow(ctx, code)
		if err := c.s.ResetSchedule(ctx, code); err != nil {
			return outcome{}, err
		}
		return outcome{detail: before + " → " + c.scheduleNow(ctx, code)}, nil
	})
}

// scheduleNow describes the schedule that applies to a task of the
// scheduler's app, for the history line of a schedule change.
func (c *console) scheduleNow(ctx context.Context, code string) string {
	t, err := c.st.Task(ctx, c.sopts.App, code)
	if err != nil {
		return "?"
	}
	spec, dialect, zone := t.Effective()
	v := describe(spec, dialect, zone)
	return fmt.Sprintf("%q (%s, %s)", v.Spec, v.Dialect, v.Zone)
}

// outcome is what an action did: what its history line says (never a
// secret), and its answer.
type outcome struct {
	detail string
	// status defaults to 200.
	status int
	// data defaults to the task's detail.
	data any
	// code is the task acted on when the path names none (create).
	code string
}

// act runs one operator action on a task of the scheduler's app: it reads
// the JSON body into body, calls do with the path's task code, records the
// action in the task's history and the log, and answers with do's outcome.
func (c *console) act(w http.ResponseWriter, r *http.Request, action string, body any, do func(context.Context, string) (outcome, error)) {
	ctx := r.Context()
	code := r.PathValue("code")
	if err := decodeBody(r, body); err != nil {
		writeError(w, r, err)
		return
	}
	if q := newQuery(r); q.err != nil {
		writeError(w, r, q.err)
		return
	}
	if err := checkText("code", code); err != nil {
		writeError(w, r, err)
		return
	}
	out, err := do(ctx, code)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if out.code != "" {
		code = out.code
	}
	who := principalOf(ctx).Name
	c.log.Info("console action", "principal", who, "task", code, "action", action, "detail", out.detail, "app", c.sopts.App)
	if _, err := c.st.RecordAction(ctx, store.Action{App: c.sopts.App, TaskCode: code, Principal: who, Action: action, Detail: out.detail}); err != nil {
		// The action took effect; the history line is what failed. Say so
		// rather than pretend the action failed.
		c.log.Error("console action not written to the task's history", "task", code, "action", action, "err", err)
	}
	if out.data == nil {
		d, err := c.taskDetail(ctx, c.sopts.App, code)
		if err != nil {
			writeError(w, r, err)
			return
		}
		out.data = d
	}
	writeJSON(w, cmp.Or(out.status, http.StatusOK), envelope{Data: out.data})
}

// executionQuery reads the executions list's filters; from and to
// without an offset are read in loc (UTC for the API, the display zone
// for the page).
func (c *console) executionQuery(r *http.Request, loc *time.Location) (store.ExecutionFilter, store.Cursor, int, error) {
	q := newQuery(r, "app", "task", "status", "source", "replica", "from", "to", "after", "limit")
	f := store.ExecutionFilter{
		App:      c.app(q),
		TaskCode: q.str("task", 128),
		Status:   q.oneOf("status", executionStatuses...),
		Source:   q.oneOf("source", executionSources...),
		Replica:  q.str("replica", 128),
		FromMs:   q.instant("from", loc),
		ToMs:     q.instant("to", loc),
	}
	if f.FromMs != 0 && f.ToMs != 0 && f.FromMs >= f.ToMs && q.err == nil {
		q.err = fieldError("to", q.get("to"), fmt.Sprintf("want a time after from (%s)", q.get("from")))
	}
	after := q.cursor("after")
	limit := q.intIn("limit", store.DefaultListLimit, 1, store.MaxListLimit)
	return f, after, limit, q.err
}

func (c *console) apiExecutions(w http.ResponseWriter, r *http.Request) {
	f, after, limit, err := c.executionQuery(r, time.UTC)
	if err != nil {
		writeError(w, r, err)
		return
	}
	rows, next, err := c.executionViews(r.Context(), f, after, limit)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, rows, next.String())
}

// executionID reads the {id} path value.
func executionID(r *http.Request) (int64, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fieldError("id", s, "want a positive whole number")
	}
	return id, nil
}

// apiExecutionID reads the execution ID of an API request on
// executions/{id} (a request with a query string is refused), or answers
// the error and reports false.
func apiExecutionID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	if q := newQuery(r); q.err != nil {
		writeError(w, r, q.err)
		return 0, false
	}
	id, err := executionID(r)
	if err != nil {
		writeError(w, r, err)
		return 0, false
	}
	return id, true
}

func (c *console) apiExecution(w http.ResponseWriter, r *http.Request) {
	id, ok := apiExecutionID(w, r)
	if !ok {
		return
	}
	v, err := c.executionDetail(r.Context(), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, v, "")
}

func (c *console) apiReplicas(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "app")
	app := c.app(q)
	if q.err != nil {
		writeError(w, r, q.err)
		return
	}
	rs, err := c.replicaViews(r.Context(), app)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, rs, "")
}

// maxPreview bounds the preview's n.
const maxPreview = 100

func (c *console) apiPreview(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "spec", "dialect", "tz", "n")
	spec := q.str("spec", 255)
	dialect := q.oneOf("dialect", string(xtimer.DialectCron), string(xtimer.DialectQuartz))
	zone := q.str("tz", 64)
	n := q.intIn("n", 3, 1, maxPreview)
	if q.err == nil && strings.TrimSpace(spec) == "" {
		q.err = fieldError("spec", spec, `empty: want a cron expression such as "0 9 * * 1-5"`)
	}
	if q.err != nil {
		writeError(w, r, q.err)
		return
	}
	v, err := preview(spec, dialect, zone, n, c.now())
	if err != nil {
		// Name the parameter the client sent: tz, not the form's zone.
		if e := asAPIError(err); e.Field == "zone" {
			e.Field = "tz"
			err = e
		}
		writeError(w, r, err)
		return
	}
	writeData(w, v, "")
}
