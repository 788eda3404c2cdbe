package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// HTTP callback tasks in the console: the body of POST api/tasks and PUT
// api/tasks/{code}, the handlers that create, change and delete them
// (through the scheduler's HTTPTask API, which validates), and the view of
// a target, which never carries a secret.

// TaskEdit is the body of POST api/tasks (create an HTTP callback task)
// and PUT api/tasks/{code} (change one). Durations are milliseconds;
// zero takes the scheduler's default. Target.Secret and the values of
// secret headers are write-only: on a change, "" or xtimer.Masked keeps
// the stored one.
type TaskEdit struct {
	// Code names the task; on PUT it may be left out, and must otherwise
	// be the path's.
	Code          string            `json:"code"`
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	Owner         string            `json:"owner"`
	Spec          string            `json:"spec"`
	Dialect       string            `json:"dialect"`
	Zone          string            `json:"zone"`
	Target        xtimer.HTTPTarget `json:"target"`
	TimeoutMs     int64             `json:"timeout_ms"`
	MaxAttempts   int               `json:"max_attempts"`
	BackoffBaseMs int64             `json:"backoff_base_ms"`
	BackoffMaxMs  int64             `json:"backoff_max_ms"`
	MaxConcurrent int               `json:"max_concurrent"`
	// Overlap is the overlap policy's stored value: allow (the default),
	// forbid, buffer_one, buffer_all or cancel_other.
	Overlap string `json:"overlap"`
	// JitterMs spreads each fire's start over [0, jitter_ms) after its
	// nominal instant (WithJitter); 0 for none.
	JitterMs int64 `json:"jitter_ms"`
	// PauseOnFailure pauses the task after this many consecutive failed
	// fires (xtimer.HTTPTask.PauseOnFailure); 0, the default, never.
	PauseOnFailure int `json:"pause_on_failure"`
	// Shards splits each fire into this many calls (xtimer.HTTPTask.Shards;
	// 0 for none); Broadcast makes it one call per live replica.
	Shards    int  `json:"shards"`
	Broadcast bool `json:"broadcast"`
	// Misfire is the misfire policy's stored value: run_once (the
	// default), run_all or skip; MisfireWindowMs how late a missed fire
	// may still run (0: an hour).
	Misfire         string `json:"misfire"`
	MisfireWindowMs int64  `json:"misfire_window_ms"`
	// EndAt stops the schedule (RFC 3339); null or absent for never.
	EndAt *time.Time `json:"end_at"`
	// MaxRuns stops the schedule after this many scheduled fires; 0 for
	// no cap.
	MaxRuns int64 `json:"max_runs"`
	// Paused creates the task paused; on PUT, when given, it pauses or
	// resumes the task.
	Paused *bool `json:"paused"`
	// Exclude are dates, YYYY-MM-DD in the zone, whose fires are skipped;
	// Calendar names a calendar of the app whose days are skipped too.
	Exclude  []string `json:"exclude"`
	Calendar string   `json:"calendar"`
}

// HTTPTargetView is the request an HTTP callback task sends, as the
// console shows it: secret header values masked, the signing secret only
// said to be set.
type HTTPTargetView struct {
	Method        string              `json:"method"`
	URL           string              `json:"url"`
	Headers       []xtimer.HTTPHeader `json:"headers"`
	Body          string              `json:"body"`
	SuccessCodes  []int               `json:"success_codes"`
	SecretSet     bool                `json:"secret_set"`
	TimeoutMs     int64               `json:"timeout_ms"`
	MaxConcurrent int                 `json:"max_concurrent"`
}

// httpTargetView builds the view of a task read with Scheduler.HTTPTask.
// It masks again what the scheduler already masked: a secret must not
// reach a page or an answer even if a read forgot to.
func httpTargetView(t xtimer.HTTPTask) *HTTPTargetView {
	v := &HTTPTargetView{
		Method: t.Target.Method, URL: t.Target.URL, Headers: []xtimer.HTTPHeader{}, Body: t.Target.Body,
		SuccessCodes: slices.Clone(t.Target.SuccessCodes), SecretSet: t.Target.Secret != "",
		TimeoutMs: t.Timeout.Milliseconds(), MaxConcurrent: t.MaxConcurrent,
	}
	if v.SuccessCodes == nil {
		v.SuccessCodes = []int{}
	}
	for _, h := range t.Target.Headers {
		if h.Secret {
			h.Value = xtimer.Masked
		}
		v.Headers = append(v.Headers, h)
	}
	return v
}

// httpTask reads the HTTP task of the scheduler's app with its secrets
// masked; ok is false for a func task, or a task of another app (whose
// target only its own scheduler reads).
func (c *console) httpTask(ctx context.Context, app, code string) (xtimer.HTTPTask, bool, error) {
	if app != c.sopts.App {
		return xtimer.HTTPTask{}, false, nil
	}
	t, err := c.s.HTTPTask(ctx, code)
	switch {
	case errors.Is(err, xtimer.ErrNotHTTPTask):
		return xtimer.HTTPTask{}, false, nil
	case err != nil:
		return xtimer.HTTPTask{}, false, err
	}
	return t, true, nil
}

// task turns an edit into the scheduler's HTTPTask.
func (e *TaskEdit) task() xtimer.HTTPTask {
	return xtimer.HTTPTask{
		Code: e.Code, Name: e.Name, Description: e.Description, Owner: e.Owner,
		Spec: e.Spec, Dialect: xtimer.Dialect(e.Dialect), Zone: e.Zone, Target: e.Target,
		Timeout: time.Duration(e.TimeoutMs) * time.Millisecond, MaxAttempts: e.MaxAttempts,
		BackoffBase: time.Duration(e.BackoffBaseMs) * time.Millisecond, BackoffMax: time.Duration(e.BackoffMaxMs) * time.Millisecond,
		MaxConcurrent: e.MaxConcurrent, Overlap: xtimer.OverlapPolicy(e.Overlap), Paused: e.Paused != nil && *e.Paused,
		Jitter:         time.Duration(e.JitterMs) * time.Millisecond,
		PauseOnFailure: e.PauseOnFailure, Shards: e.Shards, Broadcast: e.Broadcast,
		Misfire: xtimer.MisfirePolicy(e.Misfire), MisfireWindow: time.Duration(e.MisfireWindowMs) * time.Millisecond,
		EndAt: derefTime(e.EndAt), MaxRuns: e.MaxRuns,
		Exclude: e.Exclude, Calendar: e.Calendar,
	}
}

// derefTime is *t, or the zero time for nil.
func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// check refuses what the console reserves; the scheduler validates the
// rest, and names the field.
func (e *TaskEdit) check() error {
	if e.Code == newTaskPath {
		return fieldError("code", e.Code, "reserved: tasks/"+newTaskPath+" is the console's form for a new task")
	}
	return nil
}

// secrets are the write-only values of an edit, which an error must not
// repeat.
func (e *TaskEdit) secrets() []string {
	var out []string
	if e.Target.Secret != "" && e.Target.Secret != xtimer.Masked {
		out = append(out, e.Target.Secret)
	}
	for _, h := range e.Target.Headers {
		if h.Secret && h.Value != "" && h.Value != xtimer.Masked {
			out = append(out, h.Value)
		}
	}
	return out
}

// scrub masks the edit's secrets in an error's message and value: the
// scheduler names the value it refuses, and a refused secret is still a
// secret.
func (e *TaskEdit) scrub(err error) error {
	secrets := e.secrets()
	if err == nil || len(secrets) == 0 {
		return err
	}
	a := *asAPIError(err)
	for _, s := range secrets {
		a.Message = strings.ReplaceAll(a.Message, s, xtimer.Masked)
		a.Value = strings.ReplaceAll(a.Value, s, xtimer.Masked)
	}
	return &a
}

// describeTarget says what a task calls and when, for the history: the
// URL without its credentials or query, which may hold tokens.
func describeTarget(t xtimer.HTTPTask) string {
	u := t.Target.URL
	if p, err := url.Parse(u); err == nil {
		p.User = nil
		if p.RawQuery != "" {
			p.RawQuery = "…"
		}
		p.Fragment = ""
		u = p.String()
	}
	v := describe(t.Spec, string(t.Dialect), t.Zone)
	return fmt.Sprintf("%s %s, %q (%s, %s)", t.Target.Method, u, v.Spec, v.Dialect, v.Zone)
}

func (c *console) apiCreateTask(w http.ResponseWriter, r *http.Request) {
	var edit TaskEdit
	c.act(w, r, "create", &edit, func(ctx context.Context, _ string) (outcome, error) {
		if err := edit.check(); err != nil {
			return outcome{}, err
		}
		if strings.TrimSpace(edit.Code) == "" {
			return outcome{}, fieldError("code", edit.Code, `empty: want a code such as "billing.reconcile"`)
		}
		t := edit.task()
		if err := c.s.CreateHTTPTask(ctx, t); err != nil {
			return outcome{}, edit.scrub(err)
		}
		return outcome{code: edit.Code, status: http.StatusCreated, detail: describeTarget(t)}, nil
	})
}

func (c *console) apiUpdateTask(w http.ResponseWriter, r *http.Request) {
	var edit TaskEdit
	c.act(w, r, "update", &edit, func(ctx context.Context, code string) (outcome, error) {
		switch edit.Code {
		case "":
			edit.Code = code
		case code:
		default:
			return outcome{}, fieldError("code", edit.Code, fmt.Sprintf("want the path's code %q: a task's code never changes", code))
		}
		if err := edit.check(); err != nil {
			return outcome{}, err
		}
		before, err := c.s.HTTPTask(ctx, code)
		if err != nil {
			return outcome{}, err
		}
		if err = c.s.UpdateHTTPTask(ctx, edit.task()); err != nil {
			return outcome{}, edit.scrub(err)
		}
		after, err := c.s.HTTPTask(ctx, code)
		if err != nil {
			return outcome{}, err
		}
		changed := taskChanges(before, after, &edit)
		if edit.Paused != nil {
			row, err := c.st.Task(ctx, c.sopts.App, code)
			if err != nil {
				return outcome{}, err
			}
			switch {
			case *edit.Paused && row.Status != store.TaskPaused:
				err, changed = c.s.Pause(ctx, code), append(changed, "status active → paused")
			case !*edit.Paused && row.Status == store.TaskPaused:
				err, changed = c.s.Resume(ctx, code), append(changed, "status paused → active")
			}
			if err != nil {
				return outcome{}, err
			}
		}
		detail := "no change"
		if len(changed) > 0 {
			detail = "changed " + strings.Join(changed, "; ")
		}
		return outcome{detail: detail}, nil
	})
}

func (c *console) apiDeleteTask(w http.ResponseWriter, r *http.Request) {
	c.act(w, r, "delete", &emptyBody{}, func(ctx context.Context, code string) (outcome, error) {
		detail := "a Go task no live replica registers"
		switch before, err := c.s.HTTPTask(ctx, code); {
		case err == nil:
			detail = describeTarget(before)
		case !errors.Is(err, xtimer.ErrNotHTTPTask):
			return outcome{}, err
		}
		if err := c.s.DeleteTask(ctx, code); err != nil {
			return outcome{}, err
		}
		return outcome{data: map[string]string{"deleted": code}, detail: detail}, nil
	})
}

// overlapPolicies are the overlap policies the form offers, by stored
// value.
var overlapPolicies = []string{string(xtimer.OverlapAllowAll), string(xtimer.OverlapSkip),
	string(xtimer.OverlapBufferOne), string(xtimer.OverlapBufferAll), string(xtimer.OverlapCancelOther)}

// misfirePolicies are the misfire policies the form offers, by stored
// value.
var misfirePolicies = []string{string(xtimer.MisfireRunOnce), string(xtimer.MisfireRunAll), string(xtimer.MisfireSkip)}

// newTaskPath is the page of the form for a new task, tasks/new, which
// is why no task created in the console may be called "new".
const newTaskPath = "new"

// taskFormPage is the form of an HTTP callback task: empty for a new
// one, filled (secrets masked) for a change.
type taskFormPage struct {
	layout
	Cron cronHelper
	// Edit is false for a new task.
	Edit    bool
	Task    xtimer.HTTPTask
	Headers []xtimer.HTTPHeader // the task's, then empty rows
	// SuccessCodes is the comma list the input holds.
	SuccessCodes string
	// Exclude is the task's excluded days, one a line, as the textarea
	// holds them.
	Exclude         string
	SecretSet       bool
	Methods         []string
	Overlaps        []string
	Overlap         string // the task's policy, stored value
	Misfires        []string
	Misfire         string // the task's misfire policy, stored value
	MisfireWindowMs int64
	EndAt           string // RFC 3339, "" for never
	TimeoutMs       int64
	BackoffBase     int64
	BackoffMax      int64
	JitterMs        int64
	CanSave         bool
	CancelURL       string
}

// httpMethods are the methods the form offers, as HTTPTarget takes them.
var httpMethods = []string{"POST", "GET", "PUT", "PATCH", "DELETE"}

// minHeaderRows is how many header rows the form has at least, so that
// headers can be added without JavaScript.
const minHeaderRows = 3

func (c *console) newTaskPage(w http.ResponseWriter, r *http.Request) {
	if q := newQuery(r); q.err != nil {
		c.fail(w, r, q.err)
		return
	}
	t := xtimer.HTTPTask{Spec: "0 9 * * *", Dialect: xtimer.DialectCron, Zone: "UTC", Target: xtimer.HTTPTarget{Method: "POST"}, MaxAttempts: 1}
	c.renderTaskForm(w, r, "New callback task", t, false)
}

func (c *console) editTaskPage(w http.ResponseWriter, r *http.Request) {
	if q := newQuery(r); q.err != nil {
		c.fail(w, r, q.err)
		return
	}
	t, err := c.s.HTTPTask(r.Context(), r.PathValue("code"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.renderTaskForm(w, r, "Edit "+t.Code, t, true)
}

func (c *console) renderTaskForm(w http.ResponseWriter, r *http.Request, title string, t xtimer.HTTPTask, edit bool) {
	l := c.layoutFor(r, "tasks", title)
	overlap := string(cmp.Or(t.Overlap, xtimer.OverlapAllowAll))
	p := &taskFormPage{layout: l, Edit: edit, Task: t, Methods: withValue(httpMethods, t.Target.Method),
		Overlaps: withValue(overlapPolicies, overlap), Overlap: overlap,
		SecretSet: t.Target.Secret != "", TimeoutMs: t.Timeout.Milliseconds(),
		BackoffBase: t.BackoffBase.Milliseconds(), BackoffMax: t.BackoffMax.Milliseconds(),
		JitterMs: t.Jitter.Milliseconds(), CanSave: l.CanAdmin(), CancelURL: c.prefix,
		Misfires: withValue(misfirePolicies, string(cmp.Or(t.Misfire, xtimer.MisfireRunOnce))),
		Misfire:  string(cmp.Or(t.Misfire, xtimer.MisfireRunOnce)), MisfireWindowMs: t.MisfireWindow.Milliseconds()}
	if !t.EndAt.IsZero() {
		p.EndAt = t.EndAt.UTC().Format(time.RFC3339)
	}
	p.Task.Target.Secret = "" // the input stays empty: "set — leave empty to keep"
	p.Headers = httpTargetView(t).Headers
	for len(p.Headers) < minHeaderRows {
		p.Headers = append(p.Headers, xtimer.HTTPHeader{})
	}
	codes := make([]string, len(t.Target.SuccessCodes))
	for i, n := range t.Target.SuccessCodes {
		codes[i] = fmt.Sprint(n)
	}
	p.SuccessCodes = strings.Join(codes, ", ")
	p.Exclude = strings.Join(t.Exclude, "\n")
	if edit {
		p.CancelURL = p.TaskURL(c.sopts.App, t.Code)
	}
	p.Cron = newCronHelper(&p.layout, scheduleForm{Spec: t.Spec, Dialect: string(t.Dialect), Zone: t.Zone})
	c.render(w, "task-form", p)
}
