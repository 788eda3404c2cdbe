package admin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// receiver is an HTTP callback's other end: it answers every request 200
// with a body a test can recognise, and keeps what it was sent.
type receiver struct {
	*httptest.Server
	got chan *http.Request
}

const receiverBody = `{"reconciled": 42, "by": "receiver-under-test"}`

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan *http.Request, 100)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case rc.got <- r.Clone(context.Background()):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, receiverBody)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// The story: create a callback task in the console form with the
// cron helper, see it fire, open its execution and read the stored
// response.
func TestBrowserCreatesACallbackTaskAndReadsItsResponse(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{realTime: true})
	rc := newReceiver(t)
	tb := openTab(t, f, tabOpts{})
	tb.expectNetworkError("api/tasks")   // the first save is refused on purpose
	tb.expectNetworkError("api/preview") // and so is a minute of 61

	tb.open("")
	_, err := chromedp.Run(tb.ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("a#new-task"), chromedp.NodeVisible)))
	require.NoError(t, err)
	require.Equal(t, 1, tb.count("form#task-form"))
	// With JavaScript, header rows come and go.
	require.Equal(t, minHeaderRows, tb.count("#headers .header-row"))
	tb.click("#add-header")
	require.Equal(t, minHeaderRows+1, tb.count("#headers .header-row"))
	require.Equal(t, []string{"target.headers[3].name"}, tb.attrs("#headers .header-row:last-child [name=header_name]", "data-field"))
	tb.click("#headers .header-row:last-child button.remove-header")
	require.Equal(t, minHeaderRows, tb.count("#headers .header-row"))

	tb.typeInto(`#task-form [name=code]`, "billing.callback")
	tb.typeInto(`#task-form [name=name]`, "Reconcile through the API")
	tb.setField("#task-form", "method", "POST")
	tb.typeInto(`#task-form [name=url]`, "ftp://"+strings.TrimPrefix(rc.URL, "http://")+"/reconcile")
	tb.typeInto(`#task-form [data-field="target.headers[0].name"]`, "Authorization")
	tb.typeInto(`#task-form [data-field="target.headers[0].value"]`, hookToken)
	tb.click(`#task-form #headers .header-row:first-child [name=header_secret]`)
	require.Equal(t, "password", evalJS[string](tb, `document.querySelector('[data-field="target.headers[0].value"]').type`), "a secret is typed unseen")
	tb.typeInto(`#task-form [name=body]`, `{"full": true}`)
	tb.typeInto(`#task-form [name=success_codes]`, "200, 202")
	tb.typeInto(`#task-form [name=secret]`, hookSigKey)
	tb.typeInto(`#task-form [name=timeout_ms]`, "5000")
	tb.typeInto(`#task-form [name=max_attempts]`, "2")

	// The cron helper: a preset fills the spec and previews it; then every
	// second, six fields, so that it fires at once on the system clock.
	tb.click(`button.preset[data-spec="*/5 * * * *"]`)
	tb.waitFor("the preset's preview", `document.querySelector("#spec").value === "*/5 * * * *" && document.querySelectorAll("ol#preview-next li").length === 3`,
		`document.querySelector("#preview").innerText`)
	tb.typeInto("#spec", "61 * * * *")
	tb.waitFor("the minute's error", `document.querySelector("#spec-error").dataset.field === "minute"`, `document.querySelector("#spec-error").outerHTML`)
	require.True(t, evalJS[bool](tb, `document.querySelector("button#save").disabled`), "no save while the spec is wrong")
	tb.typeInto("#spec", "* * * * * *")
	tb.waitFor("three fires a second apart", `(() => {
		const ts = Array.from(document.querySelectorAll("ol#preview-next li time"), t => Date.parse(t.dateTime));
		return ts.length === 3 && ts[1] - ts[0] === 1000 && ts[2] - ts[1] === 1000 && !document.querySelector("button#save").disabled;
	})()`, `document.querySelector("#preview").innerText + " " + document.querySelector("#spec-error").textContent`)
	require.Empty(t, tb.text("#spec-error"))

	// The ftp:// URL is refused: the message in #flash, the URL marked.
	tb.click("button#save")
	tb.waitFor("the URL's error", `document.getElementById("flash").dataset.field === "target.url"`, `document.getElementById("flash").outerHTML`)
	require.Contains(t, tb.text("#flash"), "Not saved")
	require.Equal(t, "true", evalJS[string](tb, `document.querySelector('#task-form [name=url]').getAttribute("aria-invalid")`))
	require.NotContains(t, tb.text("#flash"), hookToken)

	// Fixed, it saves and opens the task's page.
	tb.typeInto(`#task-form [name=url]`, rc.URL+"/reconcile")
	tb.click("button#save")
	tb.waitFor("the new task's page", `location.pathname === "/xtimer/tasks/billing.callback" && !!document.querySelector("h1#task-code")`, `location.href + " " + document.getElementById("flash").textContent`)
	require.Equal(t, "Created billing.callback.", tb.text("#flash"))
	require.Equal(t, rc.URL+"/reconcile", tb.text("#target-url"))
	require.Contains(t, tb.text("#target-headers"), "Authorization: "+xtimer.Masked)
	require.NotContains(t, evalJS[string](tb, `document.documentElement.outerHTML`), hookToken)
	require.NotContains(t, evalJS[string](tb, `document.documentElement.outerHTML`), hookSigKey)

	// It fires within seconds: the receiver hears it, with its headers.
	select {
	case r := <-rc.got:
		require.Equal(t, http.MethodPost, r.Method)
		require.Equal(t, "/reconcile", r.URL.Path)
		require.Equal(t, hookToken, r.Header.Get("Authorization"))
		require.Equal(t, "billing.callback", r.Header.Get(xtimer.HeaderTask))
		require.NotEmpty(t, r.Header.Get(xtimer.HeaderWebhookSignature))
	case <-time.After(settleTimeout):
		t.Fatalf("the receiver heard nothing in %s", settleTimeout)
	}

	// The run shows on the task's page (which is read again until it does)
	// with its response status.
	row := `#recent tbody tr[data-execution][data-status="succeeded"]`
	deadline := time.Now().Add(settleTimeout)
	for tb.open("tasks/billing.callback"); tb.count(row) == 0; tb.open("tasks/billing.callback") {
		require.True(t, time.Now().Before(deadline), "no succeeded execution on the task page after %s: %s", settleTimeout, tb.text("#recent"))
		time.Sleep(300 * time.Millisecond)
	}
	require.Equal(t, "200", tb.text(row+" td.http-status"))

	// Open it: the stored response and its status.
	_, err = chromedp.Run(tb.ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(row+" a.open"), chromedp.NodeVisible)))
	require.NoError(t, err)
	require.Equal(t, "succeeded", tb.text("#execution-status"))
	require.Equal(t, "200", tb.text("#http-status"))
	require.Contains(t, tb.text("pre#output"), receiverBody)

	// Edit it: the form holds the task, secrets masked; a new body saves.
	tb.open("tasks/billing.callback/edit")
	require.Equal(t, "billing.callback", evalJS[string](tb, `document.querySelector("#task-form [name=code]").value`))
	require.True(t, evalJS[bool](tb, `document.querySelector("#task-form [name=code]").readOnly`))
	require.Equal(t, xtimer.Masked, evalJS[string](tb, `document.querySelector('[data-field="target.headers[0].value"]').value`))
	require.Equal(t, "set — leave empty to keep", evalJS[string](tb, `document.querySelector("#task-form [name=secret]").placeholder`))
	require.Equal(t, "* * * * * *", evalJS[string](tb, `document.querySelector("#spec").value`))
	tb.waitFor("the save enabled", `!document.querySelector("button#save").disabled`, `document.querySelector("#spec-error").textContent`)
	tb.typeInto(`#task-form [name=body]`, `{"full": false}`)
	tb.click("button#save")
	tb.waitFor("the task page after the edit", `location.pathname === "/xtimer/tasks/billing.callback" && !!document.querySelector("#target-body")`, `location.href`)
	require.Equal(t, `{"full": false}`, tb.text("#target-body"))
	stored, err := f.Store.Task(context.Background(), f.S.App(), "billing.callback")
	require.NoError(t, err)
	require.Contains(t, *stored.HTTPTarget, hookToken, "the masked header kept its value")
	require.Contains(t, *stored.HTTPTarget, hookSigKey, "the empty secret kept its value")

	// Delete it, confirmed (the harness fails on a real dialog).
	require.NoError(t, chromedp.Do(tb.ctx, chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`)))
	tb.click(`button[data-action="delete"][data-task="billing.callback"]`)
	tb.waitFor("the tasks page without it", `location.pathname === "/xtimer/" && !!document.querySelector("#tasks") && !document.querySelector('#tasks tr[data-task="billing.callback"]')`, `location.href`)
	require.Equal(t, "Deleted billing.callback.", tb.text("#flash"))
	_, err = f.Store.Task(context.Background(), f.S.App(), "billing.callback")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, []string{"delete", "update", "create"}, actionNames(t, f, "billing.callback"))
}

func actionNames(t *testing.T, f *fixture, code string) []string {
	t.Helper()
	rows, err := f.Store.Actions(context.Background(), f.S.App(), code, 50)
	require.NoError(t, err)
	var out []string
	for _, a := range rows {
		out = append(out, a.Action)
	}
	return out
}
