package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
)

// How the pages are drawn: the templates, the layout every page shares
// and what its templates call, errors shown as pages, and the static
// files. pages.go has the pages themselves. Every value goes through
// html/template's escaping: nothing from a task or a request is ever
// marked template.HTML.

//go:embed web
var webFS embed.FS

// pageTemplates are parsed once: they are part of the binary, so a parse
// error is a bug in this package, which every page test shows.
var pageTemplates = template.Must(template.New("pages").Funcs(template.FuncMap{
	"httpBad":     httpBad,
	"millis":      millis,
	"options":     options,
	"specMessage": specMessage,
	"stateHelp":   stateHelp,
	"statusText":  http.StatusText,
}).ParseFS(webFS, "web/templates/*.html"))

// pageData is what render draws: a page's data, which embeds layout, and
// its HTTP status.
type pageData interface{ status() int }

// render writes a page whole, or a 500 naming the template if it does not
// execute: never half a page.
func (c *console) render(w http.ResponseWriter, name string, p pageData) {
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, name, p); err != nil {
		c.log.Error("console page did not render", "page", name, "err", err)
		http.Error(w, "xtimer console: page "+name+" did not render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(p.status())
	_, _ = w.Write(buf.Bytes())
}

// consoleKey marks a request as a page of the console, for the error
// functions below, which the rest of the package calls without one.
type consoleKey struct{}

// asPage marks r as a request for one of the console's pages.
func (c *console) asPage(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), consoleKey{}, c))
}

func consoleOf(r *http.Request) *console {
	c, _ := r.Context().Value(consoleKey{}).(*console)
	return c
}

// notFound answers a path under the prefix that nothing serves.
func (c *console) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, c.asPage(r), apiErrorf(http.StatusNotFound, codeNotFound, "nothing at %s", r.URL.Path))
}

// wantsHTML reports whether the client is a browser asking for a page:
// Accept names text/html and the path is not the JSON API's. fetch() and
// curl do not send text/html, so they get the API's JSON errors.
func wantsHTML(r *http.Request) bool {
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		return false
	}
	if c := consoleOf(r); c != nil {
		return !strings.HasPrefix(r.URL.Path, c.prefix+"api/")
	}
	return !looksLikeAPI(r.URL.EscapedPath())
}

// looksLikeAPI tells an API path from a page's when the prefix is unknown
// (an error from guard, before routing): a segment "api" followed by one
// of the API's resources. Page paths escape a task code's slashes, so a
// code cannot fake one.
func looksLikeAPI(escapedPath string) bool {
	segs := strings.Split(escapedPath, "/")
	for i := 0; i+1 < len(segs); i++ {
		if segs[i] != "api" {
			continue
		}
		switch segs[i+1] {
		case "apps", "tasks", "executions", "replicas", "preview":
			return true
		case "":
			if i+2 == len(segs) {
				return true
			}
		}
	}
	return false
}

// errorPage shows an API error as a page.
type errorPage struct {
	layout
	E *apiError
}

func (p *errorPage) status() int { return p.E.Status }

// renderErrorPage shows an API error as a page: the console's layout when
// the request reached a page, a bare page otherwise (a 401 or 403 from
// guard, where the stylesheet would be refused too).
func renderErrorPage(w http.ResponseWriter, r *http.Request, e *apiError) {
	if c := consoleOf(r); c != nil {
		c.render(w, "error", &errorPage{layout: c.layoutFor(r, "", strconv.Itoa(e.Status)+" "+http.StatusText(e.Status)), E: e})
		return
	}
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, "bare-error", e); err != nil {
		http.Error(w, e.Message, e.Status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(e.Status)
	_, _ = w.Write(buf.Bytes())
}

// fail shows err as the page's answer.
func (c *console) fail(w http.ResponseWriter, r *http.Request, err error) {
	renderErrorPage(w, c.asPage(r), asAPIError(err))
}

// layout is what every page shows around its content; its methods are
// what the templates call to show times and build links.
type layout struct {
	Prefix   string
	App      string // the scheduler's own app: actions act on it
	Title    string
	Nav      string
	ReadOnly bool
	// Principal is who the page is drawn for: the buttons and forms
	// offered are those its role may use (CanOperate, CanAdmin).
	Principal Principal
	Zone      displayZone
	Zones     []string
	// Back is the page itself, where the zone form returns.
	Back string
	Now  time.Time
	// Err is a page-level error, such as a filter value that is wrong: the
	// page shows it above its form, with the error's status.
	Err *apiError
}

func (c *console) layoutFor(r *http.Request, nav, title string) layout {
	z := zoneOf(r)
	return layout{
		Prefix: c.prefix, App: c.sopts.App, Title: title, Nav: nav, ReadOnly: c.opts.ReadOnly, Principal: principalOf(r.Context()),
		Zone: z, Zones: zonesWith(z.Name), Back: r.URL.RequestURI(), Now: c.now(),
	}
}

func (l *layout) status() int {
	if l.Err != nil {
		return l.Err.Status
	}
	return http.StatusOK
}

// At shows t in the display zone, and on hover in the task's zone.
func (l *layout) At(t time.Time, taskZone string) timeView {
	return newTimeView(t, layoutAt, l.Zone.Loc, taskZone, l.Now)
}

// Day is At with the weekday, for a schedule's fires and the task list.
func (l *layout) Day(t time.Time, taskZone string) timeView {
	return newTimeView(t, layoutDay, l.Zone.Loc, taskZone, l.Now)
}

// Fire shows a fire of the schedule form's expression in the zone the
// expression is read in, and in the display zone beside it.
func (l *layout) Fire(t time.Time, zone string) fireView {
	return newFireView(t, zone, l.Zone)
}

// Static links a static file, versioned.
func (l *layout) Static(name string) string {
	return l.Prefix + "static/" + name + "?v=" + assetVersion
}

func (l *layout) appQuery(app string) string {
	if app == "" || app == l.App {
		return ""
	}
	return "?" + url.Values{"app": {app}}.Encode()
}

// TaskURL links a task's page; the app is named when it is not the
// scheduler's own.
func (l *layout) TaskURL(app, code string) string {
	return l.Prefix + "tasks/" + url.PathEscape(code) + l.appQuery(app)
}

// ScheduleURL links a task's schedule form.
func (l *layout) ScheduleURL(app, code string) string {
	return l.Prefix + "tasks/" + url.PathEscape(code) + "/schedule" + l.appQuery(app)
}

// ExecURL links an execution's page.
func (l *layout) ExecURL(id int64) string {
	return l.Prefix + "executions/" + strconv.FormatInt(id, 10)
}

// ExecutionsURL links the executions of one task.
func (l *layout) ExecutionsURL(app, code string) string {
	return l.Prefix + "executions?" + url.Values{"app": {app}, "task": {code}}.Encode()
}

// executionRow is one row of an executions table; L gives it the page's
// zone and links.
type executionRow struct {
	L        *layout
	E        ExecutionView
	Bad      bool // failed or timed out (the fire, on a fire's line): the row is marked red
	WithTask bool
}

// Row is an execution's row on its task's page.
func (l *layout) Row(e ExecutionView) executionRow {
	return executionRow{L: l, E: e, Bad: e.Outcome() == store.StatusFailed || e.Outcome() == store.StatusTimedOut}
}

// TaskRow is an execution's row in the executions list, which names the
// task.
func (l *layout) TaskRow(e ExecutionView) executionRow {
	row := l.Row(e)
	row.WithTask = true
	return row
}

// CanOperate reports whether the viewer may pause, resume, run now, retry
// and backfill the tasks of the scheduler's app (RoleOperator).
func (l *layout) CanOperate() bool {
	return l.Principal.Role.Allows(RoleOperator) && l.Principal.SeesApp(l.App)
}

// CanAdmin reports whether the viewer may create, edit and delete the
// tasks of the scheduler's app, their schedules and options, and its
// calendars (RoleAdmin).
func (l *layout) CanAdmin() bool {
	return l.Principal.Role.Allows(RoleAdmin) && l.Principal.SeesApp(l.App)
}

// Actions are the buttons a task offers, nil when the viewer may not act
// on it: a viewer (or a read-only console), or a task of another app (the
// API acts on the scheduler's own app, whose replicas hold the handlers).
// Admin marks the ones only an admin has.
func (l *layout) Actions(t TaskView) *taskActions {
	if !l.CanOperate() || t.App != l.App {
		return nil
	}
	a := &taskActions{Code: t.Code, Paused: t.Status == store.TaskPaused, EditURL: l.ScheduleURL(t.App, t.Code), HTTP: t.Kind == store.KindHTTP,
		Admin: l.CanAdmin()}
	if a.HTTP {
		a.EditTaskURL = l.Prefix + "tasks/" + url.PathEscape(t.Code) + "/edit"
	}
	return a
}

type taskActions struct {
	Code    string
	Paused  bool
	EditURL string
	// HTTP: an HTTP callback task, which the console edits and deletes
	// whole at EditTaskURL.
	HTTP        bool
	EditTaskURL string
	// Admin: the viewer may also edit the schedule, the options and the
	// task, delete it, and run an HTTP task with a body of its own.
	Admin bool
}

// NewTaskURL links the form of a new HTTP callback task.
func (l *layout) NewTaskURL() string { return l.Prefix + "tasks/" + newTaskPath }

// httpBad reports whether an HTTP status is a response outside 2xx, which
// the pages mark red; 0 is no response (or a Go task).
func httpBad(status int) bool { return status != 0 && (status < 200 || status > 299) }

// option is one <option> of a select.
type option struct {
	Value    string
	Selected bool
}

// options lists a select's choices with the selected one marked, for the
// "options" template.
func options(selected string, values []string) []option {
	out := make([]option, len(values))
	for i, v := range values {
		out[i] = option{Value: v, Selected: v == selected}
	}
	return out
}

// withValue returns list with v appended when it is missing, so that a
// select shows the value a request names.
func withValue(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// specMessage is a schedule error as the form shows it, under the
// expression it is about: without the library's "xtimer: " and without
// repeating the expression, `minute field "61": value 61 out of range
// 0-59`. app.js's readable does the same to the preview's errors.
func specMessage(e *apiError) string {
	m := strings.TrimPrefix(e.Message, "xtimer: ")
	if e.Field == "spec" {
		m = strings.TrimPrefix(m, "spec "+strconv.Quote(e.Value)+": ")
	}
	return m
}

// stateHelp explains a task state on hover.
func stateHelp(state string) string {
	switch state {
	case StateScheduled:
		return "active, with a next run and a live replica that has its handler"
	case StateRunning:
		return "an execution is running now"
	case StatePaused:
		return "paused by an operator: nothing fires until it is resumed"
	case StateNoReplica:
		return "active, but no live replica has its handler: fires wait for one"
	case StateBadSchedule:
		return "the stored schedule does not parse: nothing fires"
	case StateEnded:
		return "past its end time or run limit: nothing more fires"
	}
	return state
}

// staticTypes are the content types of the static files, set here rather
// than guessed from the machine's MIME table, which differs between hosts.
var staticTypes = map[string]string{
	".css": "text/css; charset=utf-8",
	".js":  "text/javascript; charset=utf-8",
	".svg": "image/svg+xml",
}

// assetVersion changes with the static files: pages link them with
// ?v=assetVersion, so a browser may cache them and still never runs an
// old app.js against new pages.
var assetVersion = func() string {
	h := sha256.New()
	_ = fs.WalkDir(webFS, "web/static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := webFS.ReadFile(p)
			h.Write([]byte(p))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}()

// staticMaxAge is how long a browser keeps a static file; the versioned
// links make a new release fetch new ones at once.
const staticMaxAge = 7 * 24 * time.Hour

// static serves the embedded CSS, JS and icon. guard's no-store is
// overridden here: these files change only with the binary, and the pages
// link them versioned.
func (c *console) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ctype, known := staticTypes[path.Ext(name)]
	data, err := webFS.ReadFile("web/static/" + name)
	if !known || err != nil || strings.Contains(name, "/") {
		c.notFound(w, r)
		return
	}
	sum := sha256.Sum256(data)
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "private, max-age="+strconv.Itoa(int(staticMaxAge/time.Second)))
	h.Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}
