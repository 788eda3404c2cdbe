package admin

// Browser tests: the console's pages in real headless Chromium, driven
// from Go with chromedp (browser_harness_test.go). They check what an
// operator sees and does (filter, pause, run now, edit a schedule with a
// live preview), how the pages lay out on a laptop and a phone, and what
// must never happen in a browser: a JS dialog from a hostile task name, a
// script error, a CSP violation, a page wider than a phone, a list that
// needs JavaScript to be read.

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// waitPreview waits until the schedule form previews exactly these fires,
// as their times read in the expression's zone.
func (tb *tab) waitPreview(want []string) {
	tb.t.Helper()
	tb.waitFor(fmt.Sprintf("the preview %q", want),
		fmt.Sprintf(`JSON.stringify(Array.from(document.querySelectorAll("ol#preview-next li time"), t => t.textContent.trim())) === %s`, jsString(jsArray(want))),
		`document.querySelector("#spec").value + " → " + document.querySelector("#spec-error").outerHTML + document.querySelector("ol#preview-next").outerHTML`)
}

// previewTexts asks the JSON API for the next three fires of spec (cron)
// read in zone, and formats them as the form shows them: in that zone.
func previewTexts(t *testing.T, f *fixture, spec, zone string) []string {
	t.Helper()
	v := apiData[PreviewView](t, apiGet(t, f, "api/preview?"+url.Values{"spec": {spec}, "tz": {zone}, "n": {"3"}}.Encode()))
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	out := make([]string, len(v.Next))
	for i, at := range v.Next {
		out[i] = at.In(loc).Format("Mon 2006-01-02 15:04:05")
	}
	return out
}

// rowSel selects the tasks table's row of a task.
func rowSel(code string) string { return fmt.Sprintf(`#tasks tbody tr[data-task=%q]`, code) }

func actionSel(action, code string) string {
	return fmt.Sprintf(`button[data-action=%q][data-task=%q]`, action, code)
}

func TestBrowserTasksPageListsFiltersPausesAndResumes(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	tb := openTab(t, f, tabOpts{})

	tb.open("")
	require.Equal(t, "/xtimer/", evalJS[string](tb, `document.body.dataset.prefix`))
	require.Equal(t, "false", evalJS[string](tb, `document.body.dataset.readonly`))
	for _, id := range []string{"nav-tasks", "nav-executions", "nav-replicas", "zone-form", "zone-select", "flash", "task-filters"} {
		require.Equal(t, 1, tb.count("#"+id), "#%s", id)
	}
	require.Equal(t, "status", evalJS[string](tb, `document.getElementById("flash").getAttribute("role")`))
	got := tb.attrs(`#tasks tbody tr[data-task]`, "data-task")
	slices.Sort(got)
	require.Equal(t, defaultCodes, got)
	require.Equal(t, "scheduled", tb.text(rowSel("report.minutely")+" td.state"))
	require.Equal(t, "active", tb.text(rowSel("report.minutely")+" td.status"))
	require.Equal(t, 0, tb.count("#next-page"), "four tasks fit on one page")

	// Filter by text: the form is a GET, so the filter is in the URL.
	tb.setField("#task-filters", "q", "billing")
	tb.submit("#task-filters")
	require.Equal(t, []string{"billing.reconcile"}, tb.attrs(`#tasks tbody tr[data-task]`, "data-task"))
	loc, err := chromedp.Run(tb.ctx, chromedp.Location())
	require.NoError(t, err)
	u, err := url.Parse(loc)
	require.NoError(t, err)
	require.Equal(t, "billing", u.Query().Get("q"))
	require.Equal(t, "billing", evalJS[string](tb, `document.querySelector("#task-filters [name=q]").value`), "the filter keeps its value")

	// Pause from the list: the row says paused, and so does the database.
	tb.open("")
	tb.click(actionSel("pause", "report.minutely"))
	tb.waitFor("report.minutely paused in the list",
		fmt.Sprintf(`(r => r && r.querySelector("td.state").textContent.trim() === "paused" && r.querySelector("td.status").textContent.trim() === "paused")(document.querySelector(%s))`, jsString(rowSel("report.minutely"))),
		fmt.Sprintf(`(document.querySelector(%s) || {}).innerText + " | flash: " + document.getElementById("flash").innerText`, jsString(rowSel("report.minutely"))))
	require.Equal(t, store.TaskPaused, taskStatus(t, f, "report.minutely"))
	require.NotEmpty(t, tb.text("#flash"), "the action's result shows in #flash")
	require.Equal(t, 1, tb.count(actionSel("resume", "report.minutely")), "a paused task offers resume")

	// The status filter finds it.
	tb.setField("#task-filters", "status", "paused")
	tb.submit("#task-filters")
	require.Equal(t, []string{"report.minutely"}, tb.attrs(`#tasks tbody tr[data-task]`, "data-task"))

	// Resume it from the filtered list.
	tb.click(actionSel("resume", "report.minutely"))
	tb.waitFor("report.minutely active again",
		fmt.Sprintf(`(r => !r || r.querySelector("td.status").textContent.trim() === "active")(document.querySelector(%s))`, jsString(rowSel("report.minutely"))),
		`document.querySelector("#tasks").innerText`)
	require.Equal(t, store.TaskActive, taskStatus(t, f, "report.minutely"))

	// Kind and app filters: every default task is a func task of this app.
	tb.open("?kind=func&app=" + url.QueryEscape(f.S.App()))
	require.Len(t, tb.attrs(`#tasks tbody tr[data-task]`, "data-task"), 4)
	tb.open("?kind=http")
	require.Equal(t, 0, tb.count(`#tasks tbody tr[data-task]`))
}

func TestBrowserTasksPageHasANextPage(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	tb := openTab(t, f, tabOpts{})

	tb.open("?limit=3")
	first := tb.attrs(`#tasks tbody tr[data-task]`, "data-task")
	require.Len(t, first, 3)
	require.Equal(t, 1, tb.count("a#next-page"))
	_, err := chromedp.Run(tb.ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("a#next-page"))))
	require.NoError(t, err)
	rest := tb.attrs(`#tasks tbody tr[data-task]`, "data-task")
	all := append(first, rest...)
	slices.Sort(all)
	require.Equal(t, defaultCodes, all)
	require.Equal(t, 0, tb.count("a#next-page"))
}

func TestBrowserRunNowShowsTheNewExecution(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{realTime: true})
	tb := openTab(t, f, tabOpts{})

	// startedID waits for the flash of a run now and returns the
	// execution it names.
	startedID := func() int64 {
		t.Helper()
		tb.waitFor("the flash naming the new execution", `/Started execution \d+ /.test(document.getElementById("flash").textContent)`, `document.getElementById("flash").textContent`)
		id := evalJS[string](tb, `document.getElementById("flash").textContent.match(/Started execution (\d+) /)[1]`)
		n, err := strconv.ParseInt(id, 10, 64)
		require.NoError(t, err)
		row := waitSettled(t, f, n, store.StatusSucceeded)
		require.Equal(t, store.SourceManual, row.Source)
		return n
	}

	// From the list: the row's last result becomes the new execution.
	tb.open("")
	tb.click(actionSel("trigger", "billing.reconcile"))
	id := startedID()
	tb.waitFor("billing.reconcile's last result is the run",
		fmt.Sprintf(`(td => td && td.dataset.execution === "%d" && td.dataset.status === "succeeded")(document.querySelector(%s))`, id, jsString(rowSel("billing.reconcile")+" td.last")),
		jsString(rowSel("billing.reconcile"))+` && document.querySelector(`+jsString(rowSel("billing.reconcile"))+`).innerText`)

	// From the task page: the new row appears in #recent, without a
	// reload, and settles succeeded.
	tb.open("tasks/report.minutely")
	require.Equal(t, "report.minutely", tb.text("h1#task-code"))
	require.Equal(t, "active", tb.text("#task-status"))
	require.Contains(t, []string{"scheduled", "running"}, tb.text("#task-state"))
	require.Equal(t, 10, tb.count("ol#next-runs li"))
	require.Equal(t, 1, tb.count("svg#chart"))
	require.Equal(t, 1, tb.count("ul#history"))
	require.Equal(t, 0, tb.count(`button[data-action="reset"]`), "the schedule is the code's")
	tb.click(actionSel("trigger", "report.minutely"))
	id = startedID()
	tb.waitFor("the run's row in #recent, succeeded",
		fmt.Sprintf(`(r => !!r && r.dataset.status === "succeeded")(document.querySelector('#recent tbody tr[data-execution="%d"]'))`, id),
		`document.querySelector("#recent").innerText`)
	tb.waitFor("the trigger in the history", `document.querySelector("#history").textContent.includes("trigger")`, `document.querySelector("#history").innerText`)

	// Pause from the task page.
	tb.click(actionSel("pause", "report.minutely"))
	tb.waitFor("#task-state paused", `document.querySelector("#task-state").textContent.trim() === "paused"`, `document.querySelector("#task-state").innerText`)
	require.Equal(t, "paused", tb.text("#task-status"))
	require.Equal(t, store.TaskPaused, taskStatus(t, f, "report.minutely"))
}

func TestBrowserExecutionsPageMarksFailuresAndOpensOne(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	failed := runNow(t, f, "always.fails", store.StatusFailed)
	ok := runNow(t, f, "report.minutely", store.StatusSucceeded)
	tb := openTab(t, f, tabOpts{})

	tb.open("executions")
	require.Equal(t, 1, tb.count("form#execution-filters"))
	for _, name := range []string{"app", "task", "status", "source", "replica", "from", "to"} {
		require.Equal(t, 1, tb.count(fmt.Sprintf(`#execution-filters [name=%q]`, name)), "filter %s", name)
	}
	rowOf := func(id int64) string { return fmt.Sprintf(`#executions tbody tr[data-execution="%d"]`, id) }
	require.Equal(t, 2, tb.count(`#executions tbody tr[data-execution]`))
	require.Equal(t, "failed", evalJS[string](tb, `document.querySelector('`+rowOf(failed)+`').dataset.status`))
	require.True(t, evalJS[bool](tb, `document.querySelector('`+rowOf(failed)+`').classList.contains("bad")`), "a failed row is marked bad")
	require.Equal(t, "succeeded", evalJS[string](tb, `document.querySelector('`+rowOf(ok)+`').dataset.status`))
	require.False(t, evalJS[bool](tb, `document.querySelector('`+rowOf(ok)+`').classList.contains("bad")`))
	require.Equal(t, 2, tb.count(`#executions tbody tr[data-execution] a.open`))

	tb.setField("#execution-filters", "status", "failed")
	tb.submit("#execution-filters")
	require.Equal(t, []string{strconv.FormatInt(failed, 10)}, tb.attrs(`#executions tbody tr[data-execution]`, "data-execution"))

	tb.open("executions")
	tb.setField("#execution-filters", "task", "report.minutely")
	tb.submit("#execution-filters")
	require.Equal(t, []string{strconv.FormatInt(ok, 10)}, tb.attrs(`#executions tbody tr[data-execution]`, "data-execution"))

	// Open the failed one: its status, output and error, whole.
	tb.open("executions")
	_, err := chromedp.Run(tb.ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(rowOf(failed)+" a.open"))))
	require.NoError(t, err)
	loc, err := chromedp.Run(tb.ctx, chromedp.Location())
	require.NoError(t, err)
	require.Equal(t, f.URL+"executions/"+strconv.FormatInt(failed, 10), loc)
	require.Equal(t, "failed", tb.text("#execution-status"))
	require.Equal(t, "about to fail", tb.text("pre#output"))
	require.Equal(t, errBoom.Error(), tb.text("pre#error"))
}

func TestBrowserScheduleFormShowsFieldErrorsAndPreviewsAndSaves(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	tb := openTab(t, f, tabOpts{})
	tb.expectNetworkError("api/preview") // the bad spec's preview answers 400

	tb.open("tasks/report.minutely/schedule")
	require.Equal(t, 1, tb.count("form#schedule-form"))
	require.Equal(t, "* * * * *", evalJS[string](tb, `document.querySelector("#spec").value`))
	require.GreaterOrEqual(t, tb.count("button.preset[data-spec]"), 8)
	require.Equal(t, 1, tb.count("select#dialect"))
	require.Equal(t, 1, tb.count("#zone"))

	// A minute of 61: the error names the field, and nothing is previewed.
	tb.typeInto("#spec", "61 * * * *")
	// (Typing fires a preview whenever it pauses, so a slow machine may
	// see the errors of "61 * *" first: wait for the whole spec's.)
	tb.waitFor("the minute field's error for 61 * * * *", `document.querySelector("#spec-error").dataset.field === "minute"`,
		`document.querySelector("#spec-error").outerHTML`)
	// It reads without the library's prefix or the expression it is
	// about; the preview is hidden and nothing can be saved.
	require.Equal(t, `minute field "61": value 61 out of range 0-59`, tb.text("#spec-error"))
	require.Equal(t, 0, tb.count("ol#preview-next li"))
	require.True(t, evalJS[bool](tb, `document.querySelector("#preview").hidden`))
	require.True(t, evalJS[bool](tb, `document.querySelector("button#save").disabled`), "no save while the spec is invalid")

	// Weekdays at nine: no error, a description and the next three fires
	// after the fake clock's Monday 08:59:30 UTC, and a save.
	tb.typeInto("#spec", "0 9 * * 1-5")
	tb.waitPreview([]string{"Mon 2026-11-30 09:00:00", "Tue 2026-12-01 09:00:00", "Wed 2026-12-02 09:00:00"})
	require.Empty(t, tb.text("#spec-error"))
	require.Contains(t, tb.text("#preview-description"), "09:00")
	require.False(t, evalJS[bool](tb, `document.querySelector("button#save").disabled`))
	// The task's zone is the display zone: each fire is said once.
	require.Equal(t, "Mon 2026-11-30 09:00:00 UTC", tb.text("ol#preview-next li"))
	// No room is kept for an error there is not: the preview follows the
	// hint.
	require.Equal(t, 0, evalJS[int](tb, `document.querySelector("#spec-error").getBoundingClientRect().height`))
	require.Less(t, evalJS[float64](tb, `document.querySelector("#preview").getBoundingClientRect().top - document.querySelector("p.hint").getBoundingClientRect().bottom`), 24.0)
	// An edit whose preview has not come back yet cannot be saved either.
	require.True(t, evalJS[bool](tb, `(s => { s.value = "0 10 * * *"; s.dispatchEvent(new Event("input")); return document.querySelector("button#save").disabled; })(document.querySelector("#spec"))`),
		"no save while the preview is in flight")

	// Each preset fills the spec, and the preview follows: the API's.
	presets := tb.attrs("button.preset[data-spec]", "data-spec")
	for _, preset := range presets {
		want := previewTexts(t, f, preset, "UTC")
		tb.click(fmt.Sprintf(`button.preset[data-spec=%q]`, preset))
		require.Equal(t, preset, evalJS[string](tb, `document.querySelector("#spec").value`))
		tb.waitPreview(want)
		require.Empty(t, tb.text("#spec-error"), "preset %q", preset)
	}

	// Save weekdays at nine: the task page, with the override and a reset.
	tb.typeInto("#spec", "0 9 * * 1-5")
	tb.waitPreview(previewTexts(t, f, "0 9 * * 1-5", "UTC"))
	tb.click("button#save")
	tb.waitFor("the task page after save", fmt.Sprintf(`location.pathname === %s && !!document.querySelector("h1#task-code")`, jsString("/xtimer/tasks/report.minutely")), `location.href`)
	row, err := f.Store.Task(context.Background(), f.S.App(), "report.minutely")
	require.NoError(t, err)
	require.NotNil(t, row.SpecOverride)
	require.Equal(t, "0 9 * * 1-5", *row.SpecOverride)
	tb.waitFor("a reset button for the override", `!!document.querySelector('button[data-action="reset"]')`, `document.body.innerText`)
	require.Equal(t, 1, tb.count(`button[data-action="reset"]`), "one reset, beside the override")
	require.Equal(t, 1, tb.count(`section.card dl.kv button[data-action="reset"][data-task="report.minutely"]`), "in the Configuration card")
	require.Contains(t, evalJS[string](tb, `document.body.innerText`), "0 9 * * 1-5")
	require.NotEmpty(t, tb.text("#flash"), "the save says so after the navigation")

	tb.click(`button[data-action="reset"]`)
	tb.waitFor("the reset button gone", `!document.querySelector('button[data-action="reset"]')`, `document.body.innerText`)
	row, err = f.Store.Task(context.Background(), f.S.App(), "report.minutely")
	require.NoError(t, err)
	require.Nil(t, row.SpecOverride)
}

func TestBrowserHostileTaskNameRendersAsText(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	runNow(t, f, "xss.task", store.StatusSucceeded)
	tb := openTab(t, f, tabOpts{})

	// No dialog opens (the tab's watcher fails the test if one does), no
	// element comes from the name or the description, and both read as
	// the text they are.
	const name, desc = `<script>alert(1)</script>`, `<img src=x onerror=alert(2)>`
	injected := `document.querySelectorAll('img[src="x"], script:not([src])').length`
	for _, rel := range []string{"", "tasks/xss.task", "tasks/xss.task/schedule", "executions"} {
		tb.open(rel)
		require.Equal(t, 0, evalJS[int](tb, injected), "page %q has an element from the hostile name", rel)
		if rel == "" || rel == "tasks/xss.task" {
			require.Contains(t, evalJS[string](tb, `document.body.innerText`), name, "page %q shows the name as text", rel)
		}
		if rel == "tasks/xss.task" {
			require.Contains(t, evalJS[string](tb, `document.body.innerText`), desc)
		}
	}
}

func TestBrowserZonePickerShowsTimesInTheChosenZone(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	tb := openTab(t, f, tabOpts{})
	firstRun := `document.querySelector("ol#next-runs li time").textContent.trim()`

	// Weekdays at 09:00 in Paris, seen at Monday 08:59:30 UTC: Tuesday's
	// fire is 08:00 UTC, 09:00 in Paris.
	tb.open("tasks/billing.reconcile")
	require.Equal(t, "UTC", tb.text("#zone-name"))
	require.Equal(t, "Tue 2026-12-01 08:00:00", evalJS[string](tb, firstRun))
	require.NoError(t, chromedp.Do(tb.ctx, chromedp.Evaluate[chromedp.Void](
		`(s => { s.value = "Europe/Paris"; s.dispatchEvent(new Event("change")); })(document.getElementById("zone-select"))`)))
	tb.waitFor("the page in Europe/Paris", `location.pathname.endsWith("/tasks/billing.reconcile") && document.querySelector("#zone-name").textContent === "Europe/Paris"`,
		`location.href + " " + document.querySelector("#zone-name").textContent`)
	require.Equal(t, "Tue 2026-12-01 09:00:00", evalJS[string](tb, firstRun))
	tb.open("")
	require.Equal(t, "Europe/Paris", tb.text("#zone-name"), "the choice holds on every page")
}

func TestBrowserReadOnlyConsoleOffersNoActions(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{ReadOnly: true}})
	tb := openTab(t, f, tabOpts{})
	for _, rel := range []string{"", "tasks/report.minutely", "tasks/report.minutely/schedule", "tasks/new"} {
		tb.open(rel)
		require.Equal(t, "true", evalJS[string](tb, `document.body.dataset.readonly`), rel)
		require.Equal(t, 0, tb.count("button[data-action]"), "page %q offers actions", rel)
		require.Equal(t, 0, tb.count("button#save"), "page %q offers a save", rel)
		require.Equal(t, 0, tb.count("a#new-task"), "page %q offers a new task", rel)
	}
}

func TestBrowserPagesLoadWithoutScriptErrors(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	id := runNow(t, f, "always.fails", store.StatusFailed)
	tb := openTab(t, f, tabOpts{})
	// Each page, read to the end: the tab's watcher fails the test on an
	// exception, a console error, a CSP violation or a failed load.
	for _, p := range []struct{ rel, ready string }{
		{"", rowSel("xss.task")},
		{"tasks/billing.reconcile", "h1#task-code"},
		{"tasks/billing.reconcile/schedule", "ol#preview-next li"},
		{"tasks/new", "ol#preview-next li"},
		{"executions", fmt.Sprintf(`tr[data-execution="%d"]`, id)},
		{fmt.Sprintf("executions/%d", id), "#execution-status"},
		{"replicas", `#replicas tbody tr[data-replica="replica-a"]`},
	} {
		tb.open(p.rel)
		tb.waitFor(p.ready+" on "+p.rel, fmt.Sprintf(`!!document.querySelector(%s)`, jsString(p.ready)), `document.body.innerText.slice(0, 500)`)
	}
}

func TestBrowserPagesFitAPhoneScreen(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	id := insertHistory(t, f) // long errors, many rows
	tb := openTab(t, f, tabOpts{viewport: phone})
	createHook(t, f, "billing.hook")
	for _, rel := range []string{"", "tasks/billing.reconcile", "tasks/billing.reconcile/schedule", "tasks/xss.task", "executions", fmt.Sprintf("executions/%d", id), "replicas", "tasks/new", "tasks/billing.hook", "tasks/billing.hook/edit"} {
		tb.open(rel)
		// A page without <meta name=viewport> lays out 980px wide and
		// would pass the overflow check below without fitting anything.
		require.Equal(t, int(phone.width), evalJS[int](tb, `window.innerWidth`), "page %q: the layout viewport is the phone's width (meta viewport)", rel)
		require.Empty(t, tb.overflow(), "page %q overflows a %dpx phone", rel, phone.width)
	}

	// What a row is read for is on screen: each task's state, next run
	// and buttons; each failed run's error, whole, in a card of its own
	// height; each replica's health and last heartbeat.
	onScreen := func(sel string) int {
		t.Helper()
		return evalJS[int](tb, fmt.Sprintf(`Array.from(document.querySelectorAll(%s)).filter(e => {
			const r = e.getBoundingClientRect();
			return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= window.innerWidth && e.scrollWidth <= e.clientWidth + 1;
		}).length`, jsString(sel)))
	}
	tb.open("")
	for _, sel := range []string{"td.state", "td.next", "td.acts", `button[data-action="trigger"]`, `a[data-action="edit"]`} {
		require.Equal(t, len(defaultCodes)+1, onScreen("#tasks tbody tr[data-task] "+sel), "every task's %s is on a phone's screen", sel) // and billing.hook
	}
	tb.open("executions")
	bad := tb.count("#executions tbody tr.bad")
	require.Positive(t, bad)
	require.Equal(t, bad, onScreen("#executions tbody tr.bad td.err"), "every failed run's error is on screen")
	require.Less(t, evalJS[float64](tb, `Math.max(...Array.from(document.querySelectorAll("#executions tbody tr.bad"), r => r.getBoundingClientRect().height))`), 200.0,
		"a failed run is a card, not a tall band")
	tb.open("replicas")
	require.Equal(t, 1, onScreen(`#replicas tbody tr[data-replica] td.health`))
	require.Equal(t, 1, onScreen(`#replicas tbody tr[data-replica] td[data-label="Last heartbeat"]`))
	tb.open("tasks/xss.task")
	require.Equal(t, 1, onScreen("#recent tr.empty td"), "the empty table's message is whole")
	require.Equal(t, "No executions yet.", tb.text("#recent tr.empty td"))
	// The chart's labels are HTML, at a size a phone reads, and its bar
	// spans as much as on a laptop.
	tb.open("tasks/report.minutely")
	require.Equal(t, "longest 1.2 s", tb.text(".chart-axis span"))
	require.GreaterOrEqual(t, evalJS[float64](tb, `parseFloat(getComputedStyle(document.querySelector(".chart-axis")).fontSize)`), 11.0)
	require.GreaterOrEqual(t, chartSpan(tb), 0.9)
}

// chartSpan is the share of the task page's chart that its bars span,
// from the first one's left edge to the last one's right.
func chartSpan(tb *tab) float64 {
	tb.t.Helper()
	return evalJS[float64](tb, `(() => {
		const c = document.querySelector("svg#chart").getBoundingClientRect();
		const bars = Array.from(document.querySelectorAll("svg#chart rect.bar"), b => b.getBoundingClientRect());
		return (Math.max(...bars.map(b => b.right)) - Math.min(...bars.map(b => b.left))) / c.width;
	})()`)
}

// On a laptop: the chart spans its card, the executions filters fit on
// one line, a task code sits on the line of the cells beside it, and a
// task's buttons on one line.
func TestBrowserLaptopLayout(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	insertHistory(t, f) // 12 runs of report.minutely
	require.NoError(t, f.S.SetSchedule(context.Background(), "billing.reconcile", "30 8 * * 1-5", "cron", "Europe/Paris"))
	tb := openTab(t, f, tabOpts{})

	tb.open("tasks/report.minutely")
	require.Equal(t, 12, tb.count("svg#chart rect.bar"))
	require.GreaterOrEqual(t, chartSpan(tb), 0.9, "the bars span the chart's width")
	require.Equal(t, "longest 1.2 s", evalJS[string](tb, `document.querySelector(".chart-axis span").textContent`), "the axis hint")
	require.Equal(t, []string{"#e03131"}, tb.attrs(`svg#chart rect.bar[data-bar-status="failed"]`, "fill"))
	require.Equal(t, 12, tb.count("svg#chart rect.bar > title"), "each bar says which run it is on hover")
	require.Equal(t, 0, tb.count(`button[data-action="reset"]`), "the schedule is the code's")

	tb.open("tasks/billing.reconcile")
	require.Equal(t, 1, tb.count(`button[data-action="reset"]`), "one reset for an edited schedule")

	tb.open("executions")
	oneLine := evalJS[string](tb, `(() => {
		const items = Array.from(document.querySelectorAll("#execution-filters > *"), e => e.getBoundingClientRect()).filter(r => r.height > 0);
		const bottom = Math.min(...items.map(r => r.bottom));
		const below = items.filter(r => r.top >= bottom);
		return below.length ? below.length + " of " + items.length + " items below the first line" : "";
	})()`)
	require.Empty(t, oneLine, "the filter bar fits on one line at %dpx", laptop.width)
	require.Equal(t, "2026-11-30 09:00", evalJS[string](tb, `document.querySelector('#execution-filters [name="from"]').placeholder`))
	// A task code's text sits on the baseline of the cells beside it, at
	// their size.
	align := evalJS[[]float64](tb, `(() => {
		const row = document.querySelector("#executions tbody tr[data-execution]");
		const base = td => { const m = document.createElement("span"); m.style.display = "inline-block"; td.appendChild(m); const b = m.getBoundingClientRect().bottom; m.remove(); return b; };
		const code = row.querySelector("td.code"), id = row.querySelector("td.id");
		return [base(code) - base(id), parseFloat(getComputedStyle(code.querySelector("a")).fontSize) / parseFloat(getComputedStyle(id.querySelector("a")).fontSize)];
	})()`)
	require.InDelta(t, 0, align[0], 1, "the task code's baseline is its row's")
	require.GreaterOrEqual(t, align[1], 0.99, "the task code is not smaller than the cells beside it")

	tb.open("")
	tops := evalJS[[]float64](tb, `Array.from(document.querySelectorAll(`+jsString(rowSel("report.minutely")+" td.acts .actions > *")+`), e => Math.round(e.getBoundingClientRect().top))`)
	require.Len(t, tops, 3)
	require.Equal(t, tops[0], tops[2], "a task's buttons are on one line")
	require.Less(t, evalJS[float64](tb, `document.querySelector(`+jsString(rowSel("billing.reconcile"))+`).getBoundingClientRect().height`), 80.0)
}

func TestBrowserTasksListReadsWithoutJavaScript(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	id := runNow(t, f, "always.fails", store.StatusFailed)
	tb := openTab(t, f, tabOpts{noJS: true})

	// Only DOM queries here: with scripts off, the pages are server-rendered.
	codes := func(sel, attr string) []string {
		nodes, err := chromedp.Run(tb.ctx, chromedp.Nodes(chromedp.CSSAll(sel), chromedp.AtLeast(0)))
		require.NoError(t, err)
		var out []string
		for _, n := range nodes {
			out = append(out, n.AttributeValue(attr))
		}
		slices.Sort(out)
		return out
	}
	tb.open("")
	require.Equal(t, defaultCodes, codes(`#tasks tbody tr[data-task]`, "data-task"))
	// The filter is a plain GET form: type, click Filter, read.
	_, err := chromedp.Run(tb.ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Steps(
		chromedp.SendKeys(chromedp.CSS(`#task-filters [name=q]`), "billing"),
		chromedp.Click(chromedp.CSS(`#task-filters [type=submit]`), chromedp.NodeVisible),
	)))
	require.NoError(t, err)
	require.Equal(t, []string{"billing.reconcile"}, codes(`#tasks tbody tr[data-task]`, "data-task"), "filters work as a plain GET form")
	tb.open("tasks/billing.reconcile")
	require.Len(t, codes("ol#next-runs li", "class"), 10)
	// Without a script the schedule form previews through the server.
	tb.open("tasks/report.minutely/schedule?" + url.Values{"spec": {"61 * * * *"}}.Encode())
	require.Equal(t, []string{"minute"}, codes("#spec-error", "data-field"))
	tb.open("tasks/report.minutely/schedule?" + url.Values{"spec": {"0 9 * * 1-5"}}.Encode())
	require.Equal(t, []string{""}, codes("#spec-error", "data-field"))
	require.Len(t, codes("ol#preview-next li", "class"), 3)
	tb.open("executions")
	require.Equal(t, []string{strconv.FormatInt(id, 10)}, codes(`#executions tbody tr[data-execution]`, "data-execution"))
	tb.open("replicas")
	require.Equal(t, []string{"replica-a"}, codes(`#replicas tbody tr[data-replica]`, "data-replica"))
}

// TestBrowserScreenshots walks the console as docs/console.md shows it, on a
// fixture with half an hour of history, at laptop width and the tasks at
// phone width; with XTIMER_SCREENSHOTS=1 it writes the pictures.
func TestBrowserScreenshots(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{app: "shop"})
	failed := insertHistory(t, f)
	require.NoError(t, f.S.Pause(context.Background(), "xss.task"))
	tb := openTab(t, f, tabOpts{})
	tb.expectNetworkError("api/preview") // a pause in typing previews a partial spec

	tb.open("")
	tb.screenshot("tasks.png")

	// Two console actions, for the history.
	tb.open("tasks/report.minutely")
	tb.click(actionSel("pause", "report.minutely"))
	tb.waitFor("paused", `document.querySelector("#task-state").textContent.trim() === "paused"`, `document.querySelector("#task-state").innerText`)
	tb.click(actionSel("resume", "report.minutely"))
	tb.waitFor("resumed", `document.querySelector("#task-status").textContent.trim() === "active"`, `document.querySelector("#task-status").innerText`)
	tb.open("tasks/report.minutely")
	require.Equal(t, 2, tb.count("#history li"))
	require.Equal(t, 12, tb.count("#recent tbody tr[data-execution]"))
	tb.screenshot("task.png")

	tb.open("executions")
	require.Equal(t, 1, tb.count(fmt.Sprintf(`#executions tr.bad[data-execution="%d"]`, failed)))
	tb.screenshot("executions.png")
	tb.open(fmt.Sprintf("executions/%d", failed))
	tb.screenshot("execution.png")
	tb.open("tasks/billing.reconcile/schedule")
	tb.typeInto("#spec", "30 8 * * 1-5")
	tb.waitPreview(previewTexts(t, f, "30 8 * * 1-5", "Europe/Paris"))
	// In the zone the expression is read in, then in the display zone.
	require.Equal(t, "Tue 2026-12-01 08:30:00 Europe/Paris · Tue 07:30:00 UTC", tb.text("ol#preview-next li"))
	tb.screenshot("schedule.png")
	tb.open("replicas")
	tb.screenshot("replicas.png")
	tb.open("tasks/new")
	tb.typeInto(`#task-form [name=code]`, "billing.callback")
	tb.typeInto(`#task-form [name=name]`, "Reconcile through the billing API")
	tb.typeInto(`#task-form [name=url]`, "https://billing.internal/reconcile")
	tb.typeInto(`#task-form [data-field="target.headers[0].name"]`, "Authorization")
	tb.click(`#task-form #headers .header-row:first-child [name=header_secret]`)
	tb.typeInto(`#task-form [data-field="target.headers[0].value"]`, "Bearer token")
	tb.typeInto(`#task-form [data-field="target.headers[1].name"]`, "Content-Type")
	tb.typeInto(`#task-form [data-field="target.headers[1].value"]`, "application/json")
	tb.typeInto(`#task-form [name=body]`, `{"since": "yesterday"}`)
	tb.typeInto(`#task-form [name=success_codes]`, "200, 202")
	tb.typeInto(`#task-form [name=max_attempts]`, "3")
	tb.click(`button.preset[data-spec="0 9 * * 1-5"]`)
	tb.waitPreview(previewTexts(t, f, "0 9 * * 1-5", "UTC"))
	tb.screenshot("new-task.png")

	onPhone := openTab(t, f, tabOpts{viewport: phone})
	onPhone.open("")
	onPhone.screenshot("tasks-phone.png")
}

// insertHistory writes the last half hour of executions as a busy
// replica would have left them (the fake clock's own runs all take 0 ms):
// report.minutely every minute for 12 minutes with varied durations and
// one failure, always.fails every five minutes, and Friday's
// billing.reconcile, which took two attempts. It returns the newest
// failed execution of always.fails.
func insertHistory(t *testing.T, f *fixture) int64 {
	t.Helper()
	run := func(code string, at time.Time, status string, attempt, maxAttempts int, lateMs, durMs int64, output, errText string) store.Execution {
		start := at.UnixMilli() + lateMs
		return store.Execution{
			TaskCode: code, RunTime: at.UnixMilli(), Status: status, Source: store.SourceSchedule,
			Attempt: attempt, MaxAttempts: maxAttempts, Replica: f.S.InstanceID(), ScheduledMs: at.Add(-time.Minute).UnixMilli(),
			StartedMs: start, FinishedMs: start + durMs, LatenessMs: lateMs, DurationMs: durMs,
			Output: output, Error: errText, UpdatedMs: start + durMs,
		}
	}
	minute := fakeStart.Truncate(time.Minute) // 08:59
	var rows []store.Execution
	for i := 29; i >= 1; i-- {
		at := minute.Add(-time.Duration(i) * time.Minute)
		if i <= 12 {
			dur := 180 + int64(i*97%11)*41
			if i == 5 {
				rows = append(rows, run("report.minutely", at, store.StatusFailed, 1, 1, 4, 1207, "fetching orders\n",
					"report: GET https://orders.internal/v1/summary: 503 Service Unavailable"))
			} else {
				rows = append(rows, run("report.minutely", at, store.StatusSucceeded, 1, 1, 2+int64(i%5), dur,
					fmt.Sprintf("ran report.minutely\n%d orders in the last minute\n", 40+i*3%17), ""))
			}
		}
		if at.Minute()%5 == 0 {
			rows = append(rows, run("always.fails", at, store.StatusFailed, 1, 1, 3, 27, "about to fail\n", errBoom.Error()))
		}
	}
	friday := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC) // 09:00 in Paris
	rows = append(rows, run("billing.reconcile", friday, store.StatusSucceeded, 2, 3, 5, 2318, "ran billing.reconcile\n", ""))
	var failed int64
	for _, r := range insertExecutions(t, f, rows...) {
		if r.TaskCode == "always.fails" {
			failed = r.ID
		}
	}
	// The failed run's attempt is its row's own, as FinishAttempts leaves
	// it: the execution page lists it, error and output
	// (TestBrowserPagesFitAPhoneScreen).
	return failed
}
