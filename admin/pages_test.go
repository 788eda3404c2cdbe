package admin

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// Page tests: the server-rendered HTML over real HTTP, without a browser
// (browser_test.go drives the same pages in Chromium).

// pageResp is one answer of the console.
type pageResp struct {
	Status int
	Header http.Header
	Body   string
}

// pagesGet GETs a path relative to the console's root as a browser does,
// with optional cookies, without following redirects.
func pagesGet(t *testing.T, f *fixture, rel string, cookies ...*http.Cookie) pageResp {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.URL+rel, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return pageResp{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
}

// pagesAttrs returns the values of attribute name on the elements whose
// opening tag matches tagRE (a regexp for the tag up to the attribute).
func pagesAttrs(body, tagRE, name string) []string {
	re := regexp.MustCompile(`<` + tagRE + `[^>]*?\s` + regexp.QuoteMeta(name) + `="([^"]*)"`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// pagesSection returns the HTML from the element with id to the end of its
// element, found by the closing tag given.
func pagesSection(t *testing.T, body, id, closing string) string {
	t.Helper()
	return pagesBetween(t, body, `id="`+id+`"`, closing)
}

// pagesBetween returns the HTML from start to the first end after it.
func pagesBetween(t *testing.T, body, start, end string) string {
	t.Helper()
	i := strings.Index(body, start)
	require.GreaterOrEqual(t, i, 0, "no %s", start)
	j := strings.Index(body[i:], end)
	require.GreaterOrEqual(t, j, 0, "no %s after %s", end, start)
	return body[i : i+j]
}

func TestPagesRenderWithTheirContent(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	failed := runNow(t, f, "always.fails", store.StatusFailed)

	tasks := pagesGet(t, f, "")
	require.Equal(t, http.StatusOK, tasks.Status)
	require.Equal(t, "text/html; charset=utf-8", tasks.Header.Get("Content-Type"))
	require.Contains(t, tasks.Body, `<body data-prefix="/xtimer/" data-readonly="false" data-zone="UTC">`)
	require.Equal(t, []string{"always.fails", "billing.reconcile", "report.minutely", "xss.task"}, pagesAttrs(tasks.Body, `tr`, "data-task"))
	for _, id := range []string{"nav-tasks", "nav-executions", "nav-replicas", "zone-form", "zone-select", "flash", "task-filters", "tasks"} {
		require.Contains(t, tasks.Body, `id="`+id+`"`)
	}
	require.Contains(t, tasks.Body, `<div id="flash" class="flash" role="status"`)
	require.Contains(t, tasks.Body, `Times in <strong id="zone-name">UTC</strong>`)
	// Monday 08:59:30 UTC: report.minutely fires in 30 s, at 09:00:00.
	minutely := pagesBetween(t, tasks.Body, `<tr data-task="report.minutely"`, "</tr>")
	require.Contains(t, minutely, `<td class="status" data-label="Status"><span class="badge b-active">active</span></td>`)
	require.Contains(t, minutely, `<td class="state" data-label="State"><span class="badge s-scheduled"`)
	require.Contains(t, minutely, `<span class="rel">in 30 s</span> <time datetime="2026-11-30T09:00:00Z" title="2026-11-30 09:00:00 UTC (UTC)">Mon 2026-11-30 09:00:00</time>`)
	require.Contains(t, minutely, `every minute, UTC`)
	for _, action := range []string{"pause", "trigger"} {
		require.Contains(t, minutely, `data-action="`+action+`" data-task="report.minutely"`)
	}
	require.Contains(t, minutely, `<a class="button small" data-action="edit" href="/xtimer/tasks/report.minutely/schedule" aria-label="Edit schedule">`)
	fails := pagesBetween(t, tasks.Body, `<tr data-task="always.fails"`, "</tr>")
	require.Contains(t, fails, `data-execution="`+strconv.FormatInt(failed, 10)+`" data-status="failed"`)
	require.Contains(t, fails, `<span class="rel">now</span> <time datetime="2026-11-30T08:59:30Z" title="2026-11-30 08:59:30 UTC (UTC)">Mon 2026-11-30 08:59:30</time>`,
		"the last result's time has the weekday, as the next run's")
	require.NotContains(t, tasks.Body, `id="next-page"`, "four tasks fit on a page")

	task := pagesGet(t, f, "tasks/billing.reconcile")
	require.Equal(t, http.StatusOK, task.Status)
	require.Contains(t, task.Body, `<h1 id="task-code">billing.reconcile</h1>`)
	require.Contains(t, task.Body, `<span id="task-status" class="badge b-active">active</span>`)
	require.Contains(t, task.Body, `>scheduled</span>`)
	require.Len(t, regexp.MustCompile(`<li>`).FindAllString(pagesSection(t, task.Body, "next-runs", "</ol>"), -1), 10)
	// 09:00 in Paris is 08:00 UTC; Monday's has passed, Tuesday's is next.
	require.Contains(t, pagesSection(t, task.Body, "next-runs", "</ol>"),
		`<time datetime="2026-12-01T08:00:00Z" title="2026-12-01 09:00:00 CET (Europe/Paris)">Tue 2026-12-01 08:00:00</time>`)
	require.Contains(t, task.Body, `<svg id="chart"`)
	require.Contains(t, task.Body, `<ul id="history"`)
	require.Contains(t, task.Body, `3 <span class="muted">backoff`, "max attempts")
	require.Contains(t, task.Body, `<dt>Timeout</dt><dd>1 min</dd>`)
	require.NotContains(t, task.Body, `data-action="reset"`, "the schedule is the code's")

	sched := pagesGet(t, f, "tasks/billing.reconcile/schedule")
	require.Equal(t, http.StatusOK, sched.Status)
	require.Contains(t, sched.Body, `<form id="schedule-form"`)
	require.Contains(t, sched.Body, `<input id="spec" name="spec" value="0 9 * * 1-5"`)
	require.Contains(t, sched.Body, `<option value="Europe/Paris" selected>Europe/Paris</option>`)
	require.Contains(t, sched.Body, `<option value="cron" selected>`)
	specs := pagesAttrs(sched.Body, `button type="button" class="preset small"`, "data-spec")
	require.Equal(t, []string{"* * * * *", "*/5 * * * *", "*/15 * * * *", "0 * * * *", "0 9 * * *", "0 9 * * 1-5", "0 9 * * 1", "0 0 1 * *", "0 0 L * *"}, specs)
	require.Contains(t, sched.Body, `data-quartz="0 0 9 ? * MON-FRI"`)
	require.Contains(t, sched.Body, `<p id="preview-description" class="description">at 09:00 on Monday through Friday, Europe/Paris</p>`)
	// The fires read in the expression's zone, then in the display zone.
	require.Contains(t, pagesSection(t, sched.Body, "preview-next", "</ol>"),
		`<li><time datetime="2026-12-01T08:00:00Z">Tue 2026-12-01 09:00:00</time> <span class="zone">Europe/Paris</span> <span class="also">· Tue 08:00:00 UTC</span></li>`)
	require.Len(t, regexp.MustCompile(`<li>`).FindAllString(pagesSection(t, sched.Body, "preview-next", "</ol>"), -1), 3)
	require.Contains(t, sched.Body, `<div id="preview" class="preview">`)
	require.Contains(t, sched.Body, `<div id="spec-error" class="field-error" role="alert"></div>`)
	require.Contains(t, sched.Body, `<button id="save" type="submit" class="primary" disabled>Save</button>`)

	execs := pagesGet(t, f, "executions")
	require.Equal(t, http.StatusOK, execs.Status)
	id := strconv.FormatInt(failed, 10)
	require.Contains(t, execs.Body, `<tr data-execution="`+id+`" data-status="failed" class="bad">`)
	require.Contains(t, execs.Body, `<a class="open" href="/xtimer/executions/`+id+`">#`+id+`</a>`)
	require.Contains(t, execs.Body, `boom: the ledger did not balance`)
	for _, name := range []string{"app", "task", "status", "source", "replica", "from", "to"} {
		require.Contains(t, pagesSection(t, execs.Body, "execution-filters", "</form>"), `name="`+name+`"`)
	}

	exec := pagesGet(t, f, "executions/"+id)
	require.Equal(t, http.StatusOK, exec.Status)
	require.Contains(t, exec.Body, `<span id="execution-status" class="badge b-failed">failed</span>`)
	require.Contains(t, exec.Body, `<pre id="output" class="out">about to fail
</pre>`)
	require.Contains(t, exec.Body, `<pre id="error" class="out err">boom: the ledger did not balance</pre>`)
	require.Contains(t, exec.Body, `<dt>Source</dt><dd>manual</dd>`)

	reps := pagesGet(t, f, "replicas")
	require.Equal(t, http.StatusOK, reps.Status)
	require.Equal(t, []string{"replica-a"}, pagesAttrs(reps.Body, `tr`, "data-replica"))
	require.Contains(t, reps.Body, `replica-a <span class="badge b-self"`)
	require.Contains(t, reps.Body, `<span class="badge b-live">live</span>`)
	require.Contains(t, reps.Body, `<td data-label="Version">v1.2.3</td>`)
}

func TestTasksPageFiltersAndPages(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	require.NoError(t, f.S.Pause(context.Background(), "report.minutely"))

	paused := pagesGet(t, f, "?status=paused")
	require.Equal(t, http.StatusOK, paused.Status)
	require.Equal(t, []string{"report.minutely"}, pagesAttrs(paused.Body, `tr`, "data-task"))
	require.Contains(t, paused.Body, `<tr data-task="report.minutely" class="paused">`)
	require.Contains(t, paused.Body, `<td class="status" data-label="Status"><span class="badge b-paused">paused</span></td>`)
	require.Contains(t, paused.Body, `<td class="state" data-label="State"><span class="badge s-paused"`)
	// Its next fire is skipped: the list says paused, and strikes the time.
	require.Contains(t, paused.Body, `<span class="when skipped" title="Paused: this fire is skipped, and nothing fires until the task is resumed"><span class="rel">paused</span> <del><time datetime="2026-11-30T09:00:00Z">Mon 2026-11-30 09:00:00</time></del></span>`)
	require.Contains(t, paused.Body, `data-action="resume" data-task="report.minutely"`)
	require.NotContains(t, paused.Body, `data-action="pause" data-task="report.minutely"`)
	require.Contains(t, paused.Body, `<option value="paused" selected>paused</option>`)

	active := pagesGet(t, f, "?status=active&q=BILL")
	require.Equal(t, []string{"billing.reconcile"}, pagesAttrs(active.Body, `tr`, "data-task"))
	require.Contains(t, active.Body, `name="q" value="BILL"`)

	require.Empty(t, pagesAttrs(pagesGet(t, f, "?kind=http").Body, `tr`, "data-task"))

	// Keyset paging: the next link carries the filters and the cursor.
	first := pagesGet(t, f, "?limit=3")
	require.Equal(t, []string{"always.fails", "billing.reconcile", "report.minutely"}, pagesAttrs(first.Body, `tr`, "data-task"))
	require.Contains(t, first.Body, `<input type="hidden" name="limit" value="3">`, "filtering keeps the page size")
	next := pagesAttrs(first.Body, `a id="next-page"`, "href")
	require.Len(t, next, 1)
	u, err := url.Parse(strings.ReplaceAll(next[0], "&amp;", "&"))
	require.NoError(t, err)
	require.Equal(t, "/xtimer/", u.Path)
	require.Equal(t, "3", u.Query().Get("limit"))
	require.Equal(t, "report.minutely", u.Query().Get("after"))
	rest := pagesGet(t, f, "?"+u.RawQuery)
	require.Equal(t, []string{"xss.task"}, pagesAttrs(rest.Body, `tr`, "data-task"))
	require.NotContains(t, rest.Body, `id="next-page"`)

	// A wrong filter is a 400 that says which, with the form to fix it.
	bad := pagesGet(t, f, "?status=sleeping")
	require.Equal(t, http.StatusBadRequest, bad.Status)
	require.Contains(t, bad.Body, `status &#34;sleeping&#34;: want one of active, paused`)
	require.Contains(t, bad.Body, `<form id="task-filters"`)
	badLimit := pagesGet(t, f, "?limit=0")
	require.Equal(t, http.StatusBadRequest, badLimit.Status)
	require.Contains(t, badLimit.Body, `limit &#34;0&#34;: want a whole number from 1 to 1000`)
	require.NotContains(t, badLimit.Body, `name="limit"`, "the form does not carry the wrong size on")
}

func TestPagesShowAHostileTaskNameAsText(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	runNow(t, f, "xss.task", store.StatusSucceeded)
	for _, rel := range []string{"", "tasks/xss.task", "tasks/xss.task/schedule", "executions"} {
		p := pagesGet(t, f, rel)
		require.Equal(t, http.StatusOK, p.Status, rel)
		require.NotContains(t, p.Body, `<script>alert`, rel)
		require.NotContains(t, p.Body, `<img src=x`, rel)
		if rel != "executions" {
			require.Contains(t, p.Body, `&lt;script&gt;alert(1)&lt;/script&gt;`, rel)
		}
	}
	task := pagesGet(t, f, "tasks/xss.task")
	require.Contains(t, task.Body, `<dt>Description</dt><dd>&lt;img src=x onerror=alert(2)&gt;</dd>`)
	require.Contains(t, task.Body, `<p class="name">&lt;script&gt;alert(1)&lt;/script&gt;</p>`)
}

func TestPagesEscapeHostileQueryValues(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	const evil = `"><script>alert(3)</script>`
	q := url.QueryEscape(evil)

	tasks := pagesGet(t, f, "?q="+q)
	require.Equal(t, http.StatusOK, tasks.Status)
	require.Contains(t, tasks.Body, `name="q" value="&#34;&gt;&lt;script&gt;alert(3)&lt;/script&gt;"`)

	execs := pagesGet(t, f, "executions?task="+q+"&replica="+q)
	require.Equal(t, http.StatusOK, execs.Status)
	require.Contains(t, execs.Body, `name="task" value="&#34;&gt;&lt;script&gt;alert(3)&lt;/script&gt;"`)
	require.Contains(t, execs.Body, `name="replica" value="&#34;&gt;&lt;script&gt;alert(3)&lt;/script&gt;"`)

	badFrom := pagesGet(t, f, "executions?from="+q)
	require.Equal(t, http.StatusBadRequest, badFrom.Status)
	require.Contains(t, badFrom.Body, `from &#34;\&#34;&gt;&lt;script&gt;alert(3)&lt;/script&gt;&#34;: want a date and time`)

	sched := pagesGet(t, f, "tasks/report.minutely/schedule?spec="+q)
	require.Equal(t, http.StatusOK, sched.Status)
	require.Contains(t, sched.Body, `<input id="spec" name="spec" value="&#34;&gt;&lt;script&gt;alert(3)&lt;/script&gt;"`)
	require.Regexp(t, `<div id="spec-error" class="field-error" role="alert" data-field="[^"]*">[^<]+</div>`, sched.Body)

	app := pagesGet(t, f, "replicas?app="+q)
	require.Equal(t, http.StatusOK, app.Status)
	require.Contains(t, app.Body, `<option value="&#34;&gt;&lt;script&gt;alert(3)&lt;/script&gt;" selected>`)

	for _, p := range []pageResp{tasks, execs, badFrom, sched, app} {
		require.NotContains(t, p.Body, `<script>alert`)
	}
}

func TestUnknownPagesAreHTML404s(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})

	task := pagesGet(t, f, "tasks/no.such.task")
	require.Equal(t, http.StatusNotFound, task.Status)
	require.Equal(t, "text/html; charset=utf-8", task.Header.Get("Content-Type"))
	require.Contains(t, task.Body, `<p class="code">404</p>`)
	require.Contains(t, task.Body, `<h1>Not Found</h1>`)
	require.Contains(t, task.Body, `no.such.task`)
	require.Contains(t, task.Body, `id="nav-tasks"`, "the error page has the console's header")

	path := pagesGet(t, f, "nowhere")
	require.Equal(t, http.StatusNotFound, path.Status)
	require.Contains(t, path.Body, `nothing at /xtimer/nowhere`)
	require.Contains(t, path.Body, `id="nav-tasks"`)

	exec := pagesGet(t, f, "executions/999999")
	require.Equal(t, http.StatusNotFound, exec.Status)
	require.Contains(t, exec.Body, `<p class="code">404</p>`)

	badID := pagesGet(t, f, "executions/abc")
	require.Equal(t, http.StatusBadRequest, badID.Status)
	require.Contains(t, badID.Body, `id &#34;abc&#34;: want a positive whole number`)

	// The API answers JSON, even to a browser.
	api := pagesGet(t, f, "api/tasks/no.such.task")
	require.Equal(t, http.StatusNotFound, api.Status)
	require.Equal(t, "application/json; charset=utf-8", api.Header.Get("Content-Type"))
	require.Contains(t, api.Body, `"code":"not_found"`)
}

func TestPagesForbiddenToOthersAreBareHTML(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	req, err := http.NewRequest(http.MethodGet, f.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/html")
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, string(b), `<h1>403 Forbidden</h1>`)
	require.Contains(t, string(b), `came through a proxy`)
	require.NotContains(t, string(b), `app.css`, "no stylesheet that would be refused too")
}

func TestDisplayZone(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})

	// Paris: billing.reconcile's next fire reads 09:00, its own zone's time.
	paris := pagesGet(t, f, "tasks/billing.reconcile", &http.Cookie{Name: zoneCookie, Value: url.QueryEscape("Europe/Paris")})
	require.Equal(t, http.StatusOK, paris.Status)
	require.Contains(t, paris.Body, `Times in <strong id="zone-name">Europe/Paris</strong>`)
	require.Contains(t, paris.Body, `<option value="Europe/Paris" selected>Europe/Paris</option>`)
	require.Contains(t, paris.Body, `data-zone="Europe/Paris"`)
	require.Contains(t, paris.Body, `>Tue 2026-12-01 09:00:00</time>`)
	require.NotContains(t, paris.Body, `id="zone-notice"`)

	// A zone not in the list is added to the selector.
	kabul := pagesGet(t, f, "", &http.Cookie{Name: zoneCookie, Value: "Asia%2FKabul"})
	require.Contains(t, kabul.Body, `<option value="Asia/Kabul" selected>Asia/Kabul</option>`)

	// A zone nobody knows: UTC, and a notice that says so.
	for _, bad := range []string{"Mars%2FOlympus_Mons", "Local", "%3Cb%3Ebold%3C%2Fb%3E"} {
		p := pagesGet(t, f, "tasks/billing.reconcile", &http.Cookie{Name: zoneCookie, Value: bad})
		require.Equal(t, http.StatusOK, p.Status, bad)
		require.Contains(t, p.Body, `Times in <strong id="zone-name">UTC</strong>`, bad)
		require.Contains(t, p.Body, `>Tue 2026-12-01 08:00:00</time>`, bad)
		notice := pagesSection(t, p.Body, "zone-notice", "</p>")
		name, _ := url.QueryUnescape(bad)
		require.Contains(t, notice, "Display zone &#34;"+strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(name)+"&#34; (cookie xtimer_zone)", bad)
		require.Contains(t, notice, "Times are shown in UTC", bad)
		require.NotContains(t, p.Body, "<b>bold")
	}

	// The header's form sets the cookie and returns to the page.
	set := pagesGet(t, f, "zone?zone=Asia%2FTokyo&back="+url.QueryEscape("/xtimer/executions?status=failed"))
	require.Equal(t, http.StatusSeeOther, set.Status)
	require.Equal(t, "/xtimer/executions?status=failed", set.Header.Get("Location"))
	ck := set.Header.Get("Set-Cookie")
	require.Contains(t, ck, "xtimer_zone=Asia%2FTokyo")
	require.Contains(t, ck, "Path=/xtimer/")
	require.Contains(t, ck, "HttpOnly")
	require.Contains(t, ck, "SameSite=Lax")

	// It goes back only within the console.
	for _, back := range []string{"https://evil.example/", "//evil.example/xtimer/", "/elsewhere", `/xtimer/\evil`} {
		p := pagesGet(t, f, "zone?zone=UTC&back="+url.QueryEscape(back))
		require.Equal(t, "/xtimer/", p.Header.Get("Location"), back)
	}
	// An empty zone forgets the choice.
	clear := pagesGet(t, f, "zone?zone=&back=%2Fxtimer%2F")
	require.Contains(t, clear.Header.Get("Set-Cookie"), "Max-Age=0")
}

func TestExecutionsPageFilters(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	failed := runNow(t, f, "always.fails", store.StatusFailed)
	ok := runNow(t, f, "report.minutely", store.StatusSucceeded)
	ids := func(p pageResp) []string { return pagesAttrs(p.Body, `tr`, "data-execution") }
	fid, oid := strconv.FormatInt(failed, 10), strconv.FormatInt(ok, 10)

	require.Equal(t, []string{oid, fid}, ids(pagesGet(t, f, "executions")))
	require.Equal(t, []string{fid}, ids(pagesGet(t, f, "executions?status=failed")))
	require.Equal(t, []string{oid}, ids(pagesGet(t, f, "executions?task=report.minutely&source=manual")))
	require.Empty(t, ids(pagesGet(t, f, "executions?source=schedule")))
	require.Equal(t, []string{oid, fid}, ids(pagesGet(t, f, "executions?replica=replica-a")))

	// from and to are read in the display zone: 09:59 in Paris is 08:59 UTC.
	paris := &http.Cookie{Name: zoneCookie, Value: "Europe%2FParis"}
	in := pagesGet(t, f, "executions?from=2026-11-30T09:59&to=2026-11-30T10:01", paris)
	require.Equal(t, []string{oid, fid}, ids(in))
	require.Contains(t, in.Body, `name="from" value="2026-11-30 09:59"`, "as the input takes it")
	require.Contains(t, in.Body, `placeholder="2026-11-30 09:00"`)
	require.Equal(t, []string{oid, fid}, ids(pagesGet(t, f, "executions?from="+url.QueryEscape("2026-11-30 09:59")+"&to="+url.QueryEscape("2026-11-30 10:01"), paris)),
		"the placeholder's form")
	require.Empty(t, ids(pagesGet(t, f, "executions?from=2026-11-30T10:00", paris)))
	require.Equal(t, []string{oid, fid}, ids(pagesGet(t, f, "executions?from=2026-11-30T08:59")), "UTC without a cookie")

	backwards := pagesGet(t, f, "executions?from=2026-11-30T10:00&to=2026-11-30T09:00")
	require.Equal(t, http.StatusBadRequest, backwards.Status)
	require.Contains(t, backwards.Body, `to &#34;2026-11-30T09:00&#34;: want a time after from`)

	// Paging: one row a page, the next link carries the filters.
	first := pagesGet(t, f, "executions?limit=1&replica=replica-a")
	require.Equal(t, []string{oid}, ids(first))
	next := pagesAttrs(first.Body, `a id="next-page"`, "href")
	require.Len(t, next, 1)
	u, err := url.Parse(strings.ReplaceAll(next[0], "&amp;", "&"))
	require.NoError(t, err)
	require.Equal(t, "replica-a", u.Query().Get("replica"))
	require.Equal(t, []string{fid}, ids(pagesGet(t, f, "executions?"+u.RawQuery)))
}

func TestTaskPageChartHasOneBarPerRecentExecution(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	var want []string
	for range 3 {
		want = append(want, strconv.FormatInt(runNow(t, f, "always.fails", store.StatusFailed), 10))
		// A second manual run in the same millisecond would be recorded a
		// millisecond later, which the fake clock never reaches.
		f.Clock.Advance(time.Second)
	}
	p := pagesGet(t, f, "tasks/always.fails")
	require.Equal(t, http.StatusOK, p.Status)
	chart := pagesSection(t, p.Body, "chart", "</svg>")
	bars := pagesAttrs(chart, `rect class="bar"`, "data-bar-status")
	require.Equal(t, []string{"failed", "failed", "failed"}, bars)
	require.Equal(t, []string{"#e03131", "#e03131", "#e03131"}, pagesAttrs(chart, `rect class="bar"`, "fill"))
	require.Regexp(t, `<title>#`+want[0]+` failed · \d+ ms · Mon 2026-11-30 08:59:30</title>`, chart)
	// Oldest on the left: the links run in id order.
	var links []string
	for _, h := range pagesAttrs(chart, `a`, "href") {
		links = append(links, strings.TrimPrefix(h, "/xtimer/executions/"))
	}
	require.Equal(t, want, links)
	// The table lists them newest first, marked bad.
	require.Equal(t, []string{want[2], want[1], want[0]}, pagesAttrs(pagesSection(t, p.Body, "recent", "</table>"), `tr`, "data-execution"))
	require.Contains(t, p.Body, `<span class="count"><span class="badge b-failed">failed</span> 3</span>`)
	require.Contains(t, p.Body, `trigger`, "the history names the trigger")
}

func TestChartLaysOutDurations(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	recent := []ExecutionView{ // newest first, as TaskDetail has them
		{ID: 3, Status: store.StatusRunning, DurationMs: 0, RunTime: at.Add(2 * time.Minute)},
		{ID: 2, Status: store.StatusFailed, DurationMs: 500, RunTime: at.Add(time.Minute)},
		{ID: 1, Status: store.StatusSucceeded, DurationMs: 1000, RunTime: at},
	}
	c := newChart(recent, time.UTC)
	require.Len(t, c.Bars, 3)
	require.Equal(t, []int64{1, 2, 3}, []int64{c.Bars[0].ID, c.Bars[1].ID, c.Bars[2].ID}, "oldest on the left")
	require.Equal(t, chartHeight, c.Bars[0].H, "the longest run is full height")
	require.Equal(t, chartHeight/2, c.Bars[1].H)
	require.Equal(t, chartMinBar, c.Bars[2].H, "a run without a duration stays visible")
	require.Equal(t, "#2f9e44", c.Bars[0].Fill)
	require.Equal(t, "#e03131", c.Bars[1].Fill)
	require.Equal(t, "#1c7ed6", c.Bars[2].Fill)
	for _, b := range c.Bars {
		require.Equal(t, chartHeight, b.Y+b.H, "bars stand on the baseline")
		require.Equal(t, chartMaxBar, b.W, "three runs do not become slabs")
	}
	// Each bar in the middle of its third of the width.
	require.Equal(t, []int{176, 576, 976}, []int{c.Bars[0].X, c.Bars[1].X, c.Bars[2].X})
	require.Equal(t, "#2 failed · 500 ms · Mon 2026-11-30 09:01:00", c.Bars[1].Title)
	require.Equal(t, "1 s", c.Max)
	require.False(t, c.Flat)

	// A full page of runs: narrower bars, across the whole width.
	var many []ExecutionView
	for i := range recentExecutions {
		many = append(many, ExecutionView{ID: int64(i + 1), Status: store.StatusSucceeded, DurationMs: int64(100 + i)})
	}
	c = newChart(many, time.UTC)
	first, last := c.Bars[0], c.Bars[len(c.Bars)-1]
	require.Equal(t, 42, first.W)
	require.Equal(t, 9, first.X)
	require.Equal(t, chartWidth-9, last.X+last.W)

	// Runs that all took 0 ms have no scale: a strip of full bars.
	c = newChart([]ExecutionView{{ID: 2, Status: store.StatusSkipped}, {ID: 1, Status: store.StatusSucceeded}}, time.UTC)
	require.True(t, c.Flat)
	require.Equal(t, "0 ms", c.Max)
	require.Equal(t, []int{chartHeight, chartHeight}, []int{c.Bars[0].H, c.Bars[1].H})
	require.Equal(t, []string{"#2f9e44", "#adb5bd"}, []string{c.Bars[0].Fill, c.Bars[1].Fill})

	require.Empty(t, newChart(nil, time.UTC).Bars)
}

func TestScheduleOverrideShowsResetOnTaskPage(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	require.NoError(t, f.S.SetSchedule(context.Background(), "report.minutely", "0 0 9 ? * MON-FRI", "quartz", "Asia/Tokyo"))
	p := pagesGet(t, f, "tasks/report.minutely")
	require.Equal(t, http.StatusOK, p.Status)
	require.Contains(t, p.Body, `<code>0 0 9 ? * MON-FRI</code> <span class="muted">quartz</span>`)
	require.Contains(t, p.Body, `<dt>Code default</dt>`)
	require.Contains(t, p.Body, `<code>* * * * *</code> <span class="muted">cron, UTC</span>`)
	require.Equal(t, 1, strings.Count(p.Body, `data-action="reset" data-task="report.minutely"`))

	form := pagesGet(t, f, "tasks/report.minutely/schedule")
	require.Contains(t, form.Body, `<option value="quartz" selected>`)
	require.Contains(t, form.Body, `<option value="Asia/Tokyo" selected>Asia/Tokyo</option>`)
	require.Contains(t, form.Body, `class="preset small" data-spec="0 * * * * ?"`, "presets in the task's dialect")

	// Without JavaScript, the form's GET previews what was typed.
	typed := pagesGet(t, f, "tasks/report.minutely/schedule?spec=61+*+*+*+*&dialect=cron&zone=UTC")
	require.Contains(t, typed.Body, `<div id="spec-error" class="field-error" role="alert" data-field="minute">minute field &#34;61&#34;: value 61 out of range 0-59</div>`,
		"the message without the library's prefix or the expression it is about")
	require.Contains(t, typed.Body, `<div id="preview" class="preview" hidden>`)
	require.Contains(t, typed.Body, `<ol id="preview-next" class="runs"></ol>`)
}

func TestReadOnlyConsoleHidesActions(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{ReadOnly: true}})
	for _, rel := range []string{"", "tasks/report.minutely", "tasks/report.minutely/schedule"} {
		p := pagesGet(t, f, rel)
		require.Equal(t, http.StatusOK, p.Status, rel)
		require.Contains(t, p.Body, `data-readonly="true"`, rel)
		require.Contains(t, p.Body, `>read-only</span>`, rel)
		require.NotContains(t, p.Body, `data-action=`, rel)
		require.NotContains(t, p.Body, `id="save"`, rel)
	}
}

func TestStaticFiles(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	for file, ctype := range map[string]string{
		"app.css":     "text/css; charset=utf-8",
		"app.js":      "text/javascript; charset=utf-8",
		"favicon.svg": "image/svg+xml",
	} {
		p := pagesGet(t, f, "static/"+file+"?v="+assetVersion)
		require.Equal(t, http.StatusOK, p.Status, file)
		require.Equal(t, ctype, p.Header.Get("Content-Type"), file)
		require.Equal(t, "private, max-age=604800", p.Header.Get("Cache-Control"), file)
		require.NotEmpty(t, p.Header.Get("ETag"), file)
		require.Equal(t, "nosniff", p.Header.Get("X-Content-Type-Options"), file)
		want, err := webFS.ReadFile("web/static/" + file)
		require.NoError(t, err)
		require.Equal(t, string(want), p.Body, file)
	}
	for _, rel := range []string{"static/nope.js", "static/", "static/..%2Ftemplates%2Flayout.html", "static/layout.html"} {
		require.Equal(t, http.StatusNotFound, pagesGet(t, f, rel).Status, rel)
	}
	// Pages link them versioned.
	require.Contains(t, pagesGet(t, f, "").Body, `<link rel="stylesheet" href="/xtimer/static/app.css?v=`+assetVersion+`">`)
}

func TestPagesUseNoInlineScriptOrStyle(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	id := runNow(t, f, "always.fails", store.StatusFailed)
	inline := regexp.MustCompile(`<script>|<script [^>]*>[^<]|<style|\sstyle=|\son[a-z]+=`)
	for _, rel := range []string{"", "tasks/billing.reconcile", "tasks/billing.reconcile/schedule", "executions", "executions/" + strconv.FormatInt(id, 10), "replicas", "nowhere"} {
		p := pagesGet(t, f, rel)
		require.Empty(t, inline.FindAllString(p.Body, -1), rel)
		require.Contains(t, p.Body, `<meta name="viewport" content="width=device-width, initial-scale=1">`, rel)
	}
}

func TestLooksLikeAPI(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		"/xtimer/api/tasks":                 true,
		"/xtimer/api/tasks/a/pause":         true,
		"/xtimer/api/":                      true,
		"/xtimer/api/preview":               true,
		"/xtimer/":                          false,
		"/xtimer/tasks/api":                 false,
		"/xtimer/tasks/api/schedule":        false,
		"/xtimer/tasks/api%2Ftasks":         false,
		"/ops/api/xtimer/tasks/report.x":    false,
		"/ops/api/xtimer/api/executions/12": true,
	} {
		require.Equal(t, want, looksLikeAPI(path), path)
	}
}

func TestRelativeAndDurations(t *testing.T) {
	t.Parallel()
	now := fakeStart
	for d, want := range map[time.Duration]string{
		0: "now", 30 * time.Second: "in 30 s", -45 * time.Second: "45 s ago", 3 * time.Minute: "in 3 min",
		-2 * time.Hour: "2 h ago", 50 * time.Hour: "in 2 d",
	} {
		require.Equal(t, want, relative(now, now.Add(d)), d.String())
	}
	for ms, want := range map[int64]string{0: "0 ms", 350: "350 ms", 1234: "1.2 s", 12_400: "12 s", 123_000: "2 min 3 s", 600_000: "10 min", 3_900_000: "1 h 5 min", 3_600_000: "1 h"} {
		require.Equal(t, want, millis(ms), ms)
	}
	require.Equal(t, "2026-11-30 09:59:30 CET (Europe/Paris)", inZone(now, "Europe/Paris"))
	require.Equal(t, "2026-11-30 08:59:30 UTC (UTC)", inZone(now, ""))
	require.Equal(t, "2026-11-30 08:59:30 UTC (UTC)", inZone(now, "Nowhere/Special"))
}

// The Replicas page and api/replicas show each replica's clock offset, a
// replica more than a second off as skewed, and one beyond its
// MaxClockSkew as claiming nothing.
func TestReplicasShowClockOffsets(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	ctx := context.Background()
	at := fakeStart.UnixMilli()
	require.NoError(t, f.Store.Heartbeat(ctx, store.Replica{App: f.S.App(), ID: "replica-fast", HeartbeatMs: at, ClockOffsetMs: -30_250}))
	require.NoError(t, f.Store.Heartbeat(ctx, store.Replica{App: f.S.App(), ID: "replica-far", HeartbeatMs: at,
		ClockOffsetMs: 660_000, ClockRefused: true}))
	require.NoError(t, f.Store.Heartbeat(ctx, store.Replica{App: f.S.App(), ID: "replica-near", HeartbeatMs: at, ClockOffsetMs: 400}))

	rs := apiData[[]ReplicaView](t, apiGet(t, f, "api/replicas"))
	byID := map[string]ReplicaView{}
	for _, r := range rs {
		byID[r.ID] = r
	}
	require.Equal(t, int64(-30_250), byID["replica-fast"].ClockOffsetMs)
	require.True(t, byID["replica-fast"].ClockSkewed)
	require.False(t, byID["replica-fast"].ClockRefused)
	require.True(t, byID["replica-far"].ClockRefused)
	require.False(t, byID["replica-near"].ClockSkewed)
	require.Equal(t, int64(0), byID["replica-a"].ClockOffsetMs, "the reference is off in these tests")

	reps := pagesGet(t, f, "replicas")
	require.Equal(t, http.StatusOK, reps.Status)
	require.Contains(t, reps.Body, `data-offset-ms="-30250"`)
	require.Contains(t, reps.Body, `30.25s fast <span class="badge b-skewed"`)
	require.Contains(t, reps.Body, `11m0s slow <span class="badge b-refused"`)
	require.Contains(t, reps.Body, `>claims nothing</span>`)
	require.Contains(t, reps.Body, `400ms slow</td>`)
	require.Contains(t, reps.Body, `>in step</td>`)
}
