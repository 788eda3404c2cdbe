package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/store"
)

// Exclusion calendars in the console: the JSON API that reads and replaces
// them, their pages, and the days a task's next runs leave out.
//
//	GET {prefix}api/calendars?app=          the app's calendars, without their days
//	GET {prefix}api/calendars/{name}?app=   {"name": "holidays", "days": ["2026-12-25", ...]}
//	PUT {prefix}api/calendars/{name}        {"days": [...]}: replaces the days, creating the calendar
//	GET {prefix}calendars?app=              the list page, with a form for a new calendar
//	GET {prefix}calendars/{name}?app=       one calendar: its days, editable
//
// A PUT acts on the scheduler's own app, like every action, through
// Scheduler.SetCalendar, which validates: a bad day answers 400 naming it
// ("days[3]"). It is recorded in the audit log (store.ActionSetCalendar,
// with no task), and refused with 403 read_only by a read-only console.

// CalendarView is one calendar with its days.
type CalendarView struct {
	Name string   `json:"name"`
	Days []string `json:"days"`
}

// CalendarSummary is one calendar of a listing.
type CalendarSummary struct {
	Name      string    `json:"name"`
	DayCount  int       `json:"day_count"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
}

// CalendarEdit is the body of PUT api/calendars/{name}.
type CalendarEdit struct {
	Days []string `json:"days"`
}

func (c *console) routeCalendars(mux *http.ServeMux) {
	api := c.prefix + "api/"
	c.route(mux, api+"calendars", map[string]endpoint{"GET": read(c.apiCalendars)})
	c.route(mux, api+"calendars/{name}", map[string]endpoint{"GET": read(c.apiCalendar), "PUT": administer(c.apiSetCalendar)})
	c.page(mux, "calendars", routeRule{Role: RoleViewer}, c.calendarsPage)
	c.page(mux, "calendars/{name}", routeRule{Role: RoleViewer}, c.calendarPage)
}

// calendarErr maps the scheduler's calendar errors to the API's: a bad
// name or day is a 400 naming it, an unknown calendar a 404.
func calendarErr(err error) error {
	var ce *xtimer.CalendarError
	switch {
	case errors.As(err, &ce):
		return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: ce.Field, Value: ce.Value, Message: err.Error()}
	case errors.Is(err, xtimer.ErrCalendarNotFound):
		return apiErrorf(http.StatusNotFound, codeNotFound, "%s", err.Error())
	}
	return err
}

// calendarName reads the {name} path value.
func calendarName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := checkText("name", name); err != nil {
		return "", err
	}
	if len(name) > 64 {
		return "", fieldError("name", name, "longer than 64 bytes")
	}
	return name, nil
}

func (c *console) calendarSummaries(ctx context.Context, app string) ([]CalendarSummary, error) {
	heads, err := c.st.CalendarHeads(ctx, app)
	if err != nil {
		return nil, err
	}
	out := make([]CalendarSummary, len(heads))
	for i, h := range heads {
		out[i] = CalendarSummary{Name: h.Name, DayCount: h.DayCount, UpdatedAt: time.UnixMilli(h.UpdatedMs).UTC(), Version: h.Version}
	}
	return out, nil
}

// calendarView reads one calendar of app; an unknown one is a 404.
func (c *console) calendarView(ctx context.Context, app, name string) (CalendarView, error) {
	cal, err := c.st.Calendar(ctx, app, name)
	if errors.Is(err, store.ErrNotFound) {
		return CalendarView{}, apiErrorf(http.StatusNotFound, codeNotFound, "no calendar %q in app %q", name, app)
	}
	if err != nil {
		return CalendarView{}, err
	}
	v := CalendarView{Name: cal.Name, Days: cal.Days}
	if v.Days == nil {
		v.Days = []string{}
	}
	return v, nil
}

func (c *console) apiCalendars(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "app")
	app := c.app(q)
	if q.err != nil {
		writeError(w, r, q.err)
		return
	}
	list, err := c.calendarSummaries(r.Context(), app)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, list, "")
}

func (c *console) apiCalendar(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "app")
	app := c.app(q)
	name, err := calendarName(r)
	if err == nil {
		err = q.err
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	v, err := c.calendarView(r.Context(), app, name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, v, "")
}

func (c *console) apiSetCalendar(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var edit CalendarEdit
	if err := decodeBody(r, &edit); err != nil {
		writeError(w, r, err)
		return
	}
	name, err := calendarName(r)
	if err == nil {
		err = newQuery(r).err
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	before, existed := []string(nil), false
	if old, readErr := c.st.Calendar(ctx, c.sopts.App, name); readErr == nil {
		before, existed = old.Days, true
	}
	if err = c.s.SetCalendar(ctx, name, edit.Days); err != nil {
		writeError(w, r, calendarErr(err))
		return
	}
	v, err := c.calendarView(ctx, c.sopts.App, name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	who := principalOf(ctx).Name
	detail := calendarChange(name, before, existed, v.Days)
	c.log.Info("console action", "principal", who, "action", store.ActionSetCalendar, "detail", detail, "app", c.sopts.App)
	if _, err := c.st.RecordAction(ctx, store.Action{App: c.sopts.App, Principal: who, Action: store.ActionSetCalendar, Detail: detail}); err != nil {
		c.log.Error("console action not written to the audit log", "action", store.ActionSetCalendar, "calendar", name, "err", err)
	}
	writeData(w, v, "")
}

// calendarChange is the history line of a calendar's new days: how many
// before and after, and which were added and removed.
func calendarChange(name string, before []string, existed bool, after []string) string {
	was := "none"
	if existed {
		was = fmt.Sprintf("%d days", len(before))
	}
	d := fmt.Sprintf("calendar %s: %s → %d days", name, was, len(after))
	var added, removed []string
	for _, day := range after {
		if !slices.Contains(before, day) {
			added = append(added, day)
		}
	}
	for _, day := range before {
		if !slices.Contains(after, day) {
			removed = append(removed, day)
		}
	}
	if added != nil {
		d += "; added " + strings.Join(added, ", ")
	}
	if removed != nil {
		d += "; removed " + strings.Join(removed, ", ")
	}
	return d
}

// calendarDays holds the days of the calendars the tasks of a page name,
// read once per page; a calendar the app lacks has none.
type calendarDays map[string][]string

// calendarDays reads the calendars the tasks name.
func (c *console) calendarDays(ctx context.Context, app string, tasks ...store.Task) (calendarDays, error) {
	var out calendarDays
	for _, t := range tasks {
		if t.Calendar == "" {
			continue
		}
		if _, ok := out[t.Calendar]; ok {
			continue
		}
		if out == nil {
			out = calendarDays{}
		}
		cal, err := c.st.Calendar(ctx, app, t.Calendar)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		out[t.Calendar] = cal.Days
	}
	return out, nil
}

// excluding is sched less the days t excludes, its own and its
// calendar's, as the engine reads them (engine.Excluding).
func (cals calendarDays) excluding(t store.Task, sched xtimer.Schedule) xtimer.Schedule {
	excludes := engine.DaysExcluder(store.SplitDays(t.ExcludeDays), cals[t.Calendar])
	if excludes == nil {
		return sched
	}
	return engine.Excluding(sched, excludes)
}

// excludeDays is a task's own excluded days, [] for none.
func excludeDays(t store.Task) []string {
	if days := store.SplitDays(t.ExcludeDays); days != nil {
		return days
	}
	return []string{}
}

// sortedDays is days as the scheduler stores them: sorted, without
// repeats; nil when one is not a date (the scheduler refused the edit).
func sortedDays(days []string) []string {
	sorted, bad := engine.NormalizeDays(days)
	if bad >= 0 || len(sorted) == 0 {
		return nil
	}
	return sorted
}

type calendarsPage struct {
	layout
	Apps      []string
	AppSel    string
	Calendars []CalendarSummary
	CanSave   bool
}

func (c *console) calendarsPage(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "app")
	app := c.app(q)
	p := &calendarsPage{layout: c.layoutFor(r, "calendars", "Calendars"), AppSel: app, CanSave: app == c.sopts.App && principalOf(r.Context()).Role.Allows(RoleAdmin)}
	var err error
	if p.Apps, err = c.appsWith(r.Context(), app); err != nil {
		c.fail(w, r, err)
		return
	}
	if q.err != nil {
		p.Err = asAPIError(q.err)
		c.render(w, "calendars", p)
		return
	}
	if p.Calendars, err = c.calendarSummaries(r.Context(), app); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, "calendars", p)
}

type calendarPage struct {
	layout
	AppSel   string
	Calendar CalendarView
	// Text is the days, one a line, as the textarea holds them.
	Text    string
	CanSave bool
}

func (c *console) calendarPage(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "app")
	app := c.app(q)
	name, err := calendarName(r)
	if err == nil {
		err = q.err
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v, err := c.calendarView(r.Context(), app, name)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	p := &calendarPage{layout: c.layoutFor(r, "calendars", "Calendar "+name), AppSel: app, Calendar: v,
		Text: strings.Join(v.Days, "\n"), CanSave: app == c.sopts.App && principalOf(r.Context()).Role.Allows(RoleAdmin)}
	c.render(w, "calendar", p)
}

// CalendarURL links the page of a calendar of app.
func (l *layout) CalendarURL(app, name string) string {
	return l.Prefix + "calendars/" + url.PathEscape(name) + l.appQuery(app)
}
