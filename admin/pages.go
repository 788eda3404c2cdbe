package admin

import (
	"cmp"
	"context"
	"net/http"
	"strconv"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// The web console: server-rendered pages under the prefix, readable
// without JavaScript; static/app.js adds the actions (pause, resume, run
// now, schedule edits, HTTP callback tasks), which call the JSON API like
// any other client.
// The pages render the views of model.go, so they never disagree with
// the API; render.go draws them.
//
//	GET {prefix}                          tasks, with filters
//	GET {prefix}tasks/{code}?app=         one task: config, next fires, chart, history
//	GET {prefix}tasks/{code}/schedule     the schedule form
//	GET {prefix}tasks/new                 the form of a new HTTP callback task (httptask.go)
//	GET {prefix}tasks/{code}/edit         the form of an HTTP callback task
//	GET {prefix}executions?app=&task=...  executions, with filters
//	GET {prefix}executions/{id}           one execution, output and error whole
//	GET {prefix}replicas?app=             the app's replicas
//	GET {prefix}calendars?app=            the app's calendars (calendars.go)
//	GET {prefix}calendars/{name}?app=     one calendar's days, editable
//	GET {prefix}zone?zone=&back=          sets the display zone (zone.go)
//	GET {prefix}static/{file}             app.css, app.js, favicon.svg

// routePages serves the pages, GET and HEAD only: they change nothing,
// so they need no CSRF token; the actions are the API's.
func (c *console) routePages(mux *http.ServeMux) {
	// The task forms show what the task page shows, and save only for an
	// admin (CanSave); they are the scheduler's app's.
	viewer, ownApp := routeRule{Role: RoleViewer}, routeRule{Role: RoleViewer, OwnApp: true}
	c.page(mux, "{$}", viewer, c.tasksPage)
	c.page(mux, "tasks/"+newTaskPath, ownApp, c.newTaskPage)
	c.page(mux, "tasks/{code}", viewer, c.taskPage)
	c.page(mux, "tasks/{code}/schedule", viewer, c.schedulePage)
	c.page(mux, "tasks/{code}/edit", ownApp, c.editTaskPage)
	c.page(mux, "executions", viewer, c.executionsPage)
	c.page(mux, "executions/{id}", viewer, c.executionPage)
	c.page(mux, "replicas", viewer, c.replicasPage)
	c.page(mux, "zone", viewer, c.setZone)
	c.page(mux, "static/{file}", viewer, c.static)
}

// appsWith lists the apps for a page's app selector, with the one the
// request names even when it has nothing in the database yet.
// Apps the principal may not see are left out, the one requested too.
func (c *console) appsWith(ctx context.Context, app string) ([]string, error) {
	apps, err := c.apps(ctx)
	if err != nil {
		return nil, err
	}
	return visibleApps(principalOf(ctx), withValue(apps, app)), nil
}

type tasksPage struct {
	layout
	Apps     []string
	Filter   store.TaskFilter
	Statuses []string
	Kinds    []string
	Limit    string
	Tasks    []TaskView
	NextURL  string
}

func (c *console) tasksPage(w http.ResponseWriter, r *http.Request) {
	p := &tasksPage{layout: c.layoutFor(r, "tasks", "Tasks"), Statuses: taskStatuses, Kinds: taskKinds}
	f, after, limit, qerr := c.taskQuery(r)
	p.Filter = f
	// The filter form keeps a page size the URL set, if it is a good one.
	if r.URL.Query().Get("limit") != "" && (qerr == nil || asAPIError(qerr).Field != "limit") {
		p.Limit = strconv.Itoa(limit)
	}
	var err error
	if p.Apps, err = c.appsWith(r.Context(), f.App); err != nil {
		c.fail(w, r, err)
		return
	}
	if qerr != nil {
		p.Err = asAPIError(qerr)
		c.render(w, "tasks", p)
		return
	}
	tasks, next, err := c.taskViews(r.Context(), f, after, limit)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	p.Tasks = tasks
	if next != "" {
		v := r.URL.Query()
		v.Set("after", next)
		p.NextURL = c.prefix + "?" + v.Encode()
	}
	c.render(w, "tasks", p)
}

type taskPage struct {
	layout
	D      TaskDetail
	Chart  chartView
	Daily  dailyView
	Counts []statusCount
}

type statusCount struct {
	Status string
	N      int64
}

func (c *console) taskPage(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "app")
	app := c.app(q)
	if q.err != nil {
		c.fail(w, r, q.err)
		return
	}
	d, err := c.taskDetail(r.Context(), app, r.PathValue("code"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	p := &taskPage{layout: c.layoutFor(r, "tasks", d.Task.Code), D: d}
	p.Chart = newChart(d.Recent, p.Zone.Loc)
	p.Daily = newDaily(d.Days)
	for _, s := range executionStatuses {
		if n := d.Counts[s]; n > 0 {
			p.Counts = append(p.Counts, statusCount{s, n})
		}
	}
	c.render(w, "task", p)
}

// preset is one of the schedule form's ready-made expressions, in both
// dialects.
type preset struct {
	Label, Cron, Quartz string
}

var presets = []preset{
	{"Every minute", "* * * * *", "0 * * * * ?"},
	{"Every 5 minutes", "*/5 * * * *", "0 */5 * * * ?"},
	{"Every 15 minutes", "*/15 * * * *", "0 */15 * * * ?"},
	{"Hourly", "0 * * * *", "0 0 * * * ?"},
	{"Daily at 09:00", "0 9 * * *", "0 0 9 * * ?"},
	{"Weekdays at 09:00", "0 9 * * 1-5", "0 0 9 ? * MON-FRI"},
	{"Mondays at 09:00", "0 9 * * 1", "0 0 9 ? * MON"},
	{"First day of the month", "0 0 1 * *", "0 0 0 1 * ?"},
	{"Last day of the month", "0 0 L * *", "0 0 0 L * ?"},
}

// scheduleForm is what the schedule form holds: the task's schedule, or
// what a submission without JavaScript asked to preview.
type scheduleForm struct {
	Spec, Dialect, Zone string
}

// cronHelper is the schedule part of a form: presets, the expression,
// its dialect and zone, and the preview of its next fires. The schedule
// form and the task form share it, as the "cron-helper" template and
// app.js's cronHelper.
type cronHelper struct {
	L          *layout
	Form       scheduleForm
	FormZones  []string
	Presets    []preset
	Preview    *PreviewView
	PreviewErr *apiError
}

// newCronHelper previews form as the page loads, so that the form reads
// without JavaScript; empty dialect and zone are cron and UTC.
func newCronHelper(l *layout, form scheduleForm) cronHelper {
	form.Dialect = cmp.Or(form.Dialect, string(xtimer.DialectCron))
	form.Zone = cmp.Or(form.Zone, "UTC")
	h := cronHelper{L: l, Form: form, FormZones: zonesWith(form.Zone), Presets: presets}
	if pv, err := preview(form.Spec, form.Dialect, form.Zone, 3, l.Now); err != nil {
		h.PreviewErr = asAPIError(err)
	} else {
		h.Preview = &pv
	}
	return h
}

type schedulePage struct {
	layout
	Task    TaskView
	Cron    cronHelper
	CanSave bool
}

func (c *console) schedulePage(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "app", "spec", "dialect", "zone")
	app := c.app(q)
	form := scheduleForm{Spec: q.str("spec", 255), Dialect: q.oneOf("dialect", "cron", "quartz"), Zone: q.str("zone", maxZoneName)}
	t, err := c.st.Task(r.Context(), app, r.PathValue("code"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	now := c.now()
	// Without live replicas: this page shows the schedule, not the state.
	v := c.taskView(t, nil, nil, now, nil)
	p := &schedulePage{layout: c.layoutFor(r, "tasks", "Schedule of "+v.Code), Task: v,
		CanSave: v.App == c.sopts.App && principalOf(r.Context()).Role.Allows(RoleAdmin)}
	if q.err != nil {
		p.Err = asAPIError(q.err)
		form = scheduleForm{}
	}
	p.Cron = newCronHelper(&p.layout, scheduleForm{
		Spec:    cmp.Or(form.Spec, v.Schedule.Spec),
		Dialect: cmp.Or(form.Dialect, v.Schedule.Dialect),
		Zone:    cmp.Or(form.Zone, v.Schedule.Zone),
	})
	c.render(w, "schedule", p)
}

type executionsPage struct {
	layout
	Apps              []string
	App, Task, Status string
	Source, Replica   string
	From, To          string
	// Example is the from and to inputs' placeholder.
	Example           string
	Statuses, Sources []string
	Rows              []ExecutionView
	NextURL           string
	UpToNow           bool
}

func (c *console) executionsPage(w http.ResponseWriter, r *http.Request) {
	l := c.layoutFor(r, "executions", "Executions")
	vals := r.URL.Query()
	p := &executionsPage{layout: l, Statuses: executionStatuses, Sources: executionSources, Example: exampleInput,
		Task: vals.Get("task"), Status: vals.Get("status"), Source: vals.Get("source"), Replica: vals.Get("replica")}
	// from and to are read in the display zone, which the form says.
	f, after, limit, qerr := c.executionQuery(r, l.Zone.Loc)
	p.App = f.App
	p.From, p.To = inputText(f.FromMs, vals.Get("from"), l.Zone.Loc), inputText(f.ToMs, vals.Get("to"), l.Zone.Loc)
	// The list is history: fires recorded ahead of their time (5 s)
	// are left to the task page's next runs, unless asked for.
	if f.ToMs == 0 && f.Status != store.StatusScheduled {
		f.ToMs = l.Now.UnixMilli() + 1
		p.UpToNow = true
	}
	var err error
	if p.Apps, err = c.appsWith(r.Context(), p.App); err != nil {
		c.fail(w, r, err)
		return
	}
	if qerr != nil {
		p.Err = asAPIError(qerr)
		c.render(w, "executions", p)
		return
	}
	rows, next, err := c.executionViews(r.Context(), f, after, limit)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.withTaskZones(r.Context(), rows)
	p.Rows = rows
	if next != (store.Cursor{}) {
		v := r.URL.Query()
		v.Set("after", next.String())
		p.NextURL = c.prefix + "executions?" + v.Encode()
	}
	c.render(w, "executions", p)
}

// withTaskZones fills each row's Zone, which lists leave out, so that its
// run time shows in the task's zone on hover. A task that is gone leaves
// it empty (UTC).
func (c *console) withTaskZones(ctx context.Context, rows []ExecutionView) {
	zones := map[[2]string]string{}
	for i := range rows {
		key := [2]string{rows[i].App, rows[i].Task}
		z, ok := zones[key]
		if !ok {
			if t, err := c.st.Task(ctx, key[0], key[1]); err == nil {
				_, _, z = t.Effective()
			}
			zones[key] = z
		}
		rows[i].Zone = z
	}
}

type executionPage struct {
	layout
	E ExecutionView
	// Attempts are the execution's attempts (attempts.go); CanRetry shows
	// the Retry button.
	Attempts []AttemptView
	CanRetry bool
}

func (c *console) executionPage(w http.ResponseWriter, r *http.Request) {
	if q := newQuery(r); q.err != nil {
		c.fail(w, r, q.err)
		return
	}
	id, err := executionID(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	e, err := c.executionDetail(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	_, attempts, err := c.attemptViews(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, "execution", &executionPage{layout: c.layoutFor(r, "executions", "Execution "+strconv.FormatInt(id, 10)), E: e,
		Attempts: attempts, CanRetry: c.canRetry(principalOf(r.Context()), e)})
}

type replicasPage struct {
	layout
	Apps     []string
	AppSel   string
	Replicas []ReplicaView
}

func (c *console) replicasPage(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "app")
	app := c.app(q)
	p := &replicasPage{layout: c.layoutFor(r, "replicas", "Replicas"), AppSel: app}
	var err error
	if p.Apps, err = c.appsWith(r.Context(), app); err != nil {
		c.fail(w, r, err)
		return
	}
	if q.err != nil {
		p.Err = asAPIError(q.err)
		c.render(w, "replicas", p)
		return
	}
	if p.Replicas, err = c.replicaViews(r.Context(), app); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, "replicas", p)
}
