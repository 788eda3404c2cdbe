package admin

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// The calendar API reads and replaces a calendar of the scheduler's app,
// names a bad day or name with 400, answers 404 for a calendar the app
// lacks, and records each replacement in the audit log.
func TestAPICalendarsReadAndReplace(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		require.Empty(t, apiData[[]CalendarSummary](t, apiGet(t, f, "api/calendars")))
		e := requireAPIError(t, apiGet(t, f, "api/calendars/holidays"), http.StatusNotFound, codeNotFound, "")
		require.Contains(t, e.Message, `no calendar "holidays"`)

		r := apiSend(t, f, http.MethodPut, "api/calendars/holidays", `{"days": ["2026-12-25", "2026-12-24", "2026-12-25"]}`)
		want := CalendarView{Name: "holidays", Days: []string{"2026-12-24", "2026-12-25"}}
		require.Equal(t, want, apiData[CalendarView](t, r), "sorted, without repeats")
		require.Equal(t, want, apiData[CalendarView](t, apiGet(t, f, "api/calendars/holidays")))
		days, err := f.S.Calendar(ctx, "holidays")
		require.NoError(t, err)
		require.Equal(t, want.Days, days)
		require.Equal(t, []CalendarSummary{{Name: "holidays", DayCount: 2, UpdatedAt: fakeStart, Version: 1}},
			apiData[[]CalendarSummary](t, apiGet(t, f, "api/calendars")))

		r = apiSend(t, f, http.MethodPut, "api/calendars/holidays", `{"days": []}`)
		require.Equal(t, CalendarView{Name: "holidays", Days: []string{}}, apiData[CalendarView](t, r))

		e = requireAPIError(t, apiSend(t, f, http.MethodPut, "api/calendars/holidays", `{"days": ["2026-12-25", "2026-13-01"]}`),
			http.StatusBadRequest, codeInvalid, "days[1]")
		require.Equal(t, "2026-13-01", e.Value)
		require.Contains(t, e.Message, `days[1] "2026-13-01": want a date YYYY-MM-DD`)
		e = requireAPIError(t, apiSend(t, f, http.MethodPut, "api/calendars/Holidays", `{"days": []}`),
			http.StatusBadRequest, codeInvalid, "name")
		require.Equal(t, "Holidays", e.Value)
		requireAPIError(t, apiSend(t, f, http.MethodPut, "api/calendars/holidays", `{"dates": []}`),
			http.StatusBadRequest, codeUnknownField, "dates")
		requireAPIError(t, apiSend(t, f, http.MethodPut, "api/calendars/holidays", `{"days": "2026-12-25"}`),
			http.StatusBadRequest, codeInvalid, "days")
		requireAPIError(t, apiSend(t, f, http.MethodDelete, "api/calendars/holidays", `{}`),
			http.StatusMethodNotAllowed, codeMethod, "")
		days, err = f.S.Calendar(ctx, "holidays")
		require.NoError(t, err)
		require.Empty(t, days, "a refused edit stores nothing")

		actions, err := f.Store.Actions(ctx, f.S.App(), "", 10)
		require.NoError(t, err)
		var details []string
		for _, a := range actions {
			require.Equal(t, store.ActionSetCalendar, a.Action)
			require.Equal(t, "local", a.Principal)
			details = append(details, a.Detail)
		}
		require.ElementsMatch(t, []string{"calendar holidays: none → 2 days; added 2026-12-24, 2026-12-25", "calendar holidays: 2 days → 0 days; removed 2026-12-24, 2026-12-25"}, details)
	})
}

// A read-only console serves the calendars and refuses to change them.
func TestAPICalendarsReadOnly(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{ReadOnly: true}})
	require.NoError(t, f.S.SetCalendar(context.Background(), "holidays", []string{"2026-12-25"}))
	e := requireAPIError(t, apiSend(t, f, http.MethodPut, "api/calendars/holidays", `{"days": []}`), http.StatusForbidden, codeReadOnly, "")
	require.Contains(t, e.Message, "admin.Options.ReadOnly")
	require.Equal(t, []string{"2026-12-25"}, apiData[CalendarView](t, apiGet(t, f, "api/calendars/holidays")).Days)
	page := rawGet(t, f, "calendars/holidays")
	require.Contains(t, page, "2026-12-25")
	require.Contains(t, page, "read-only")
	require.NotContains(t, page, `id="save"`)
}

// An HTTP callback task takes its exclusions from the API's JSON, shows
// them, and its next runs leave out its days and its calendar's, in its
// zone.
func TestAPIHTTPTaskExclusions(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	require.NoError(t, f.S.SetCalendar(context.Background(), "holidays", []string{"2026-12-02"}))
	edit := hookEdit("billing.hook")
	edit.Exclude, edit.Calendar = []string{"2026-12-01"}, "holidays"
	r := apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, edit))
	require.Equal(t, http.StatusCreated, r.Status, "%+v", r.Error)
	d := apiData[TaskDetail](t, r)
	require.Equal(t, []string{"2026-12-01"}, d.Task.Exclude)
	require.Equal(t, "holidays", d.Task.Calendar)
	require.Equal(t, utc(2026, 12, 3, 8, 0), d.NextRuns[0], "09:00 in Paris, on neither excluded day")
	require.Equal(t, utc(2026, 12, 3, 8, 0), *d.Task.NextRun)
	list := apiData[[]TaskView](t, apiGet(t, f, "api/tasks?kind=http"))
	require.Equal(t, utc(2026, 12, 3, 8, 0), *list[0].NextRun)
	ht, err := f.S.HTTPTask(context.Background(), "billing.hook")
	require.NoError(t, err)
	require.Equal(t, []string{"2026-12-01"}, ht.Exclude)

	page := rawGet(t, f, "tasks/billing.hook")
	require.Contains(t, page, `<code>2026-12-01</code>`)
	require.Contains(t, page, `calendars/holidays`)
	form := rawGet(t, f, "tasks/billing.hook/edit")
	require.Contains(t, form, `value="holidays"`)
	require.Contains(t, form, `>2026-12-01</textarea>`)

	edit.Exclude = []string{"2026-12-01", "1 December"}
	e := requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, edit)),
		http.StatusBadRequest, codeInvalid, "exclude[1]")
	require.Equal(t, "1 December", e.Value)
	edit.Exclude, edit.Calendar = nil, "Bad Name"
	requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, edit)),
		http.StatusBadRequest, codeInvalid, "calendar")
	edit.Calendar = ""
	d = apiData[TaskDetail](t, apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, edit)))
	require.Equal(t, []string{}, d.Task.Exclude)
	require.Empty(t, d.Task.Calendar)
	require.Equal(t, utc(2026, 12, 1, 8, 0), d.NextRuns[0])
	require.Contains(t, d.Actions[0].Detail, `exclude [2026-12-01] → []; calendar "holidays" → ""`)
}

// A Go task's page shows its exclusions; the calendars' pages list and
// show the app's calendars, linked from the nav.
func TestCalendarPages(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{register: func(s *xtimer.Scheduler, ran chan string) {
		must(s.Register("payroll", "0 9 * * *", func(context.Context, *xtimer.Run) error { return nil },
			xtimer.WithExclude("2026-12-25"), xtimer.WithCalendar("bank.holidays")))
	}})
	require.NoError(t, f.S.SetCalendar(context.Background(), "bank.holidays", []string{"2026-12-01", "2026-12-26"}))
	page := rawGet(t, f, "tasks/payroll")
	require.Contains(t, page, `<code>2026-12-25</code>`)
	require.Contains(t, page, `href="/xtimer/calendars/bank.holidays"`)
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/payroll"))
	require.Equal(t, []time.Time{utc(2026, 11, 30, 9, 0), utc(2026, 12, 2, 9, 0)}, d.NextRuns[:2], "2026-12-01 is in the calendar")

	list := rawGet(t, f, "calendars")
	require.Contains(t, list, `id="nav-calendars"`)
	require.Contains(t, list, `href="/xtimer/calendars/bank.holidays"`)
	require.Contains(t, list, `id="calendar-form"`, "a form for a new calendar")
	one := rawGet(t, f, "calendars/bank.holidays")
	require.Contains(t, one, "2026-12-01\n2026-12-26</textarea>")
	require.Contains(t, one, `data-calendar="bank.holidays"`)
	missing := pagesGet(t, f, "calendars/nope")
	require.Equal(t, http.StatusNotFound, missing.Status)
}
