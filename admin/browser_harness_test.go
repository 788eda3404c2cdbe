package admin

// The browser harness: one headless Chromium for the package, a tab per
// test that records what must never happen in a page (a JS dialog, an
// uncaught exception, a console error, a CSP violation, a failed load)
// and fails the test with it, and the few actions and reads the tests in
// browser_test.go are written with.
//
// The browser is Debian's chromium, or the binary XTIMER_CHROMIUM names.
// When it is missing the tests skip, or fail when XTIMER_REQUIRE_SERVICES=1
// (as .ci/run sets). XTIMER_SCREENSHOTS=1 also writes docs/console.md's
// screenshots to docs/screenshots/.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const (
	// browserTestTimeout bounds one test's use of the browser, so that a
	// hung page fails the test instead of hanging CI.
	browserTestTimeout = 60 * time.Second
	// browserStartTimeout bounds starting Chromium.
	browserStartTimeout = 30 * time.Second
	// pageWaitTimeout bounds one wait for the page to show something.
	pageWaitTimeout = 15 * time.Second
	// maxScreenshotBytes keeps docs/console.md's screenshots small.
	maxScreenshotBytes = 300 << 10
)

// Viewports: a laptop, and a phone (an iPhone X's CSS pixels).
var (
	laptop = viewport{width: 1280, height: 800}
	phone  = viewport{width: 375, height: 812, mobile: true}
)

type viewport struct {
	width, height int64
	mobile        bool
}

// sharedBrowser is one Chromium for the package's tests, started on first
// use and stopped by TestMain; each test opens its own tab.
var sharedBrowser struct {
	once        sync.Once
	ctx         context.Context
	cancelAlloc context.CancelFunc
	dir         string // its profile and temporary files
	missing     string // why there is no browser to run
	err         error  // why it did not start
}

// TestMain stops the shared browser before looking for leaked goroutines,
// so that only goroutines a test left behind are reported.
func TestMain(m *testing.M) {
	code := m.Run()
	closeBrowser()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// closeBrowser stops the shared browser, if it started, and removes its
// files.
func closeBrowser() {
	b := &sharedBrowser
	if b.ctx != nil {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		_ = chromedp.Cancel(ctx) // waits for Chromium to exit; the tests are over either way
		cancel()
		b.cancelAlloc()
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// chromiumPath finds the browser: XTIMER_CHROMIUM, else /usr/bin/chromium,
// else chromium on PATH. It returns "" and why when there is none.
func chromiumPath() (string, string) {
	const install = "install Debian's chromium (apt-get install -y chromium) or set XTIMER_CHROMIUM to a Chromium or Chrome binary"
	if p := os.Getenv("XTIMER_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Sprintf("XTIMER_CHROMIUM=%s: %v; %s", p, err, install)
		}
		return p, ""
	}
	if _, err := exec.LookPath("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", ""
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, ""
	}
	return "", "no browser: /usr/bin/chromium is missing and chromium is not on PATH; " + install
}

// browser returns the shared browser's context, starting it on first use.
// A missing browser skips the test, or fails it under
// XTIMER_REQUIRE_SERVICES=1.
func browser(t *testing.T) context.Context {
	t.Helper()
	b := &sharedBrowser
	b.once.Do(func() {
		path, missing := chromiumPath()
		if path == "" {
			b.missing = missing
			return
		}
		if b.dir, b.err = os.MkdirTemp("", "xtimer-chromium-"); b.err != nil {
			return
		}
		tmp := filepath.Join(b.dir, "tmp") // Chromium leaves empty directories in TMPDIR
		if b.err = os.Mkdir(tmp, 0o700); b.err != nil {
			return
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(path),
			chromedp.Headless,
			chromedp.NoSandbox, // CI runs as root
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.Flag("disable-extensions", true),
			chromedp.Flag("disable-background-timer-throttling", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
			chromedp.Flag("lang", "en-US"),
			chromedp.UserDataDir(filepath.Join(b.dir, "profile")),
			chromedp.Env("TMPDIR="+tmp),
			chromedp.WindowSize(int(laptop.width), int(laptop.height)),
		)
		b.cancelAlloc = cancelAlloc
		b.ctx, _ = chromedp.NewContext(alloc) // closeBrowser cancels it
		// The first Do starts the browser and ties it to ctx, so it cannot
		// run under a timeout context: bound it from outside.
		started := make(chan error, 1)
		go func() { started <- chromedp.Do(b.ctx) }()
		select {
		case b.err = <-started:
		case <-time.After(browserStartTimeout):
			b.err = fmt.Errorf("chromium did not start within %s", browserStartTimeout)
		}
		if b.err != nil {
			b.err = fmt.Errorf("start %s: %w", path, b.err)
			closeBrowser()
		}
	})
	switch {
	case b.missing != "" && os.Getenv("XTIMER_REQUIRE_SERVICES") == "1":
		t.Fatal(b.missing)
	case b.missing != "":
		t.Skip(b.missing)
	case b.err != nil:
		t.Fatal(b.err)
	}
	return b.ctx
}

// tab is one browser tab on a fixture's console. It records what must not
// happen in any page (JS dialogs, uncaught exceptions, console errors, CSP
// violations, failed loads) and fails the test with them when it ends.
type tab struct {
	t   *testing.T
	ctx context.Context
	f   *fixture

	mu       sync.Mutex
	problems []string
	expected []string // substrings of network errors the test causes on purpose
}

type tabOpts struct {
	viewport viewport
	noJS     bool // emulation.SetScriptExecutionDisabled: the no-JS reading path
}

func openTab(t *testing.T, f *fixture, o tabOpts) *tab {
	t.Helper()
	if o.viewport.width == 0 {
		o.viewport = laptop
	}
	timeoutCtx, cancelTimeout := context.WithTimeout(browser(t), browserTestTimeout)
	// A browser context of its own, as a private window: cookies (the
	// display zone's) are per host, not per port, so tabs on different
	// fixtures' 127.0.0.1 servers would otherwise share them.
	ctx, cancelTab := chromedp.NewContext(timeoutCtx, chromedp.WithNewBrowserContext())
	tb := &tab{t: t, ctx: ctx, f: f}
	// Cleanups run last-in first-out: close the tab, then report what it saw.
	t.Cleanup(tb.report)
	t.Cleanup(func() { cancelTab(); cancelTimeout() })

	require.NoError(t, chromedp.Do(ctx), "open a tab")
	require.NoError(t, chromedp.Listen(ctx, tb.watch))
	opts := []chromedp.EmulateViewportOption{}
	if o.viewport.mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(o.viewport.width, o.viewport.height, opts...)))
	// Times in the pages must not depend on the machine's zone or language.
	_, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "UTC"})
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: "en-US"})
	require.NoError(t, err)
	if o.noJS {
		_, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		require.NoError(t, err)
	} else {
		// Chrome logs CSP violations; the event also reaches scripts, so
		// report it from the page too, in case the log entry's wording or
		// level changes.
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `document.addEventListener('securitypolicyviolation', e =>
				console.error('CSP violation: ' + e.violatedDirective + ' blocked ' + e.blockedURI + ' at ' + e.sourceFile + ':' + e.lineNumber));`,
		})
		require.NoError(t, err)
	}
	return tb
}

// watch runs in the tab's event loop: it must return fast and send no
// command.
func (tb *tab) watch(ev any) {
	switch ev := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		tb.problem("a JavaScript %s dialog opened: %q", ev.Type, ev.Message)
		go chromedp.Call(tb.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false}) //nolint:errcheck // the test fails anyway
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			text += " " + d.Exception.Description
		}
		tb.problem("uncaught exception at %s:%d: %s", d.URL, d.LineNumber+1, text)
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				if a.Value != nil {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			tb.problem("console.%s: %s", ev.Type, strings.Join(args, " "))
		}
	case *log.EventEntryAdded:
		e := ev.Entry
		// Errors, and anything security says (CSP); not the verbose
		// "[Violation] handler took 60ms" timing notes, which depend on
		// the machine's speed.
		if e.Level != log.EntryLevelError && e.Source != log.EntrySourceSecurity {
			return
		}
		tb.mu.Lock()
		defer tb.mu.Unlock()
		if e.Source == log.EntrySourceNetwork {
			for _, s := range tb.expected {
				if strings.Contains(e.URL, s) {
					return
				}
			}
		}
		tb.problems = append(tb.problems, fmt.Sprintf("browser log (%s %s): %s %s", e.Source, e.Level, e.Text, e.URL))
	}
}

func (tb *tab) problem(format string, args ...any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.problems = append(tb.problems, fmt.Sprintf(format, args...))
}

// expectNetworkError lets a failed request whose URL contains s pass: a
// fetch answered 400 on purpose shows in Chrome's log as an error.
func (tb *tab) expectNetworkError(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.expected = append(tb.expected, s)
}

// takeProblems returns what the tab recorded so far and forgets it.
func (tb *tab) takeProblems() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	p := tb.problems
	tb.problems = nil
	return p
}

func (tb *tab) report() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, p := range tb.problems {
		tb.t.Errorf("browser: %s", p)
	}
}

// open loads a console page (a path relative to the console's root) and
// requires a 200.
func (tb *tab) open(rel string) {
	tb.t.Helper()
	resp, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(tb.f.URL+rel))
	require.NoError(tb.t, err, "load %s", rel)
	require.Equal(tb.t, int64(200), resp.Status, "load %s", rel)
}

// evalJS evaluates an expression in the page.
func evalJS[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	require.NoError(tb.t, err, "evaluate %s", expr)
	return v
}

// waitFor polls a JavaScript condition until it holds on a fully loaded
// document: a page still being parsed already shows its header (the zone
// name, the flash) but not yet its body. It keeps polling across a
// navigation (the old document's context goes away mid-call).
// what says what the test waits for; on timeout the failure shows it and
// the value of show, an expression describing the page's state.
func (tb *tab) waitFor(what, cond, show string) {
	tb.t.Helper()
	deadline := time.Now().Add(pageWaitTimeout)
	var lastErr error
	for {
		ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](`document.readyState === "complete" && (`+cond+`)`))
		if err == nil && ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) || tb.ctx.Err() != nil {
			state := "?"
			if show != "" {
				if s, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](show)); err == nil {
					state = s
				}
			}
			tb.t.Fatalf("waited %s for %s; page shows %s (last error: %v)", pageWaitTimeout, what, state, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// overflow says what sticks out sideways of the page, "" when nothing
// does: not the document, and not a table that would scroll inside its
// box with its columns out of sight; not even what a <details> shows when
// it is opened.
func (tb *tab) overflow() string {
	tb.t.Helper()
	return evalJS[string](tb, `(() => {
			document.querySelectorAll("details").forEach(d => { d.open = true; });
			const wide = Array.from(document.querySelectorAll("body *")).filter(e => {
				const r = e.getBoundingClientRect();
				return r.width > 0 && (r.right > window.innerWidth + 1 || r.left < -1);
			}).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\s+/).join(".") : "") + " right=" + Math.round(e.getBoundingClientRect().right));
			const d = document.documentElement;
			if (d.scrollWidth <= window.innerWidth && wide.length === 0) return "";
			return "scrollWidth " + d.scrollWidth + " vs " + window.innerWidth + "; sticking out: " + wide.slice(0, 8).join(", ");
		})()`)
}

// text is the trimmed text of the first element matching sel, or "<none>".
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return evalJS[string](tb, fmt.Sprintf(`(e => e ? e.textContent.trim() : "<none>")(document.querySelector(%s))`, jsString(sel)))
}

// count is how many elements match sel.
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	return evalJS[int](tb, fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel)))
}

// attrs lists attribute name of every element matching sel.
func (tb *tab) attrs(sel, name string) []string {
	tb.t.Helper()
	return evalJS[[]string](tb, fmt.Sprintf(`Array.from(document.querySelectorAll(%s), e => e.getAttribute(%s))`, jsString(sel), jsString(name)))
}

func (tb *tab) click(sel string) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Do(tb.ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)), "click %s", sel)
}

// setField sets a filter form's field by name (an input or a select).
func (tb *tab) setField(form, name, value string) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Do(tb.ctx, chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`%s [name=%q]`, form, name)), value)))
}

// submit submits a form as its submit button does and waits for the page
// it loads.
func (tb *tab) submit(form string) {
	tb.t.Helper()
	_, err := chromedp.Run(tb.ctx, chromedp.WaitEvent(page.LoadEventFired, nil,
		chromedp.Click(chromedp.CSS(form+` [type=submit], `+form+` button:not([type])`), chromedp.NodeVisible)))
	require.NoError(tb.t, err, "submit %s", form)
}

// typeInto replaces the text of an input as a user would: select all, type.
func (tb *tab) typeInto(sel, text string) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Do(tb.ctx,
		chromedp.Focus(chromedp.CSS(sel)),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%s).select()`, jsString(sel))),
		chromedp.SendKeys(chromedp.CSS(sel), text),
	), "type %q into %s", text, sel)
}

// screenshot writes the page, whole, to docs/screenshots/name when
// XTIMER_SCREENSHOTS=1.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	if os.Getenv("XTIMER_SCREENSHOTS") != "1" {
		return
	}
	// Fonts and the chart settle before the picture.
	require.NoError(tb.t, chromedp.Do(tb.ctx, chromedp.Evaluate[chromedp.Void](`document.fonts.ready`, chromedp.EvalAwaitPromise)))
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	require.NoError(tb.t, err, "screenshot %s", name)
	dir := filepath.Join("..", "docs", "screenshots")
	require.NoError(tb.t, os.MkdirAll(dir, 0o755))
	require.NoError(tb.t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	tb.t.Logf("wrote docs/screenshots/%s (%d KB)", name, len(png)>>10)
	if len(png) > maxScreenshotBytes {
		tb.t.Errorf("docs/screenshots/%s is %d KB; keep screenshots under %d KB", name, len(png)>>10, maxScreenshotBytes>>10)
	}
}

// jsString and jsArray write Go values as JavaScript literals, for the
// expressions the tests evaluate in a page.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func jsArray(ss []string) string {
	if ss == nil {
		ss = []string{}
	}
	b, _ := json.Marshal(ss)
	return string(b)
}

// TestBrowserHarnessCatchesDialogsErrorsAndCSPViolations checks the checks:
// the tab's watcher sees a dialog, an exception and a CSP violation, and
// the no-JS tab runs no script, so the console's tests cannot pass by
// watching nothing.
func TestBrowserHarnessCatchesDialogsErrorsAndCSPViolations(t *testing.T) {
	t.Parallel()
	pages := map[string]string{
		"/dialog":    `<script>alert("hi")</script>`,
		"/exception": `<script>throw new Error("kaboom")</script>`,
		"/csp":       `<script>document.title = "ran"</script>`,
		"/nojs":      `<p id=p></p><script>document.getElementById("p").id = "ran"</script>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.URL.Path == "/csp" {
			w.Header().Set("Content-Security-Policy", "default-src 'self'")
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>t</title><link rel="icon" href="data:,"></head><body>%s</body></html>`, body)
	}))
	t.Cleanup(srv.Close)
	f := &fixture{URL: srv.URL + "/"}

	tb := openTab(t, f, tabOpts{})
	for _, c := range []struct{ path, want string }{
		{"dialog", `a JavaScript alert dialog opened: "hi"`},
		{"exception", "kaboom"},
		{"csp", "script-src"},
	} {
		tb.open(c.path)
		tb.waitFor("the watcher to see "+c.path, `true`, "")
		require.Eventually(t, func() bool {
			tb.mu.Lock()
			defer tb.mu.Unlock()
			return strings.Contains(strings.Join(tb.problems, "\n"), c.want)
		}, pageWaitTimeout, 20*time.Millisecond, "the watcher never reported %q on /%s", c.want, c.path)
		t.Logf("/%s: %q", c.path, tb.takeProblems())
	}
	require.Equal(t, "t", evalJS[string](tb, `document.title`), "CSP blocked the inline script")

	noJS := openTab(t, f, tabOpts{noJS: true})
	noJS.open("nojs")
	nodes, err := chromedp.Run(noJS.ctx, chromedp.Nodes(chromedp.CSSAll("#p"), chromedp.AtLeast(0)))
	require.NoError(t, err)
	require.Len(t, nodes, 1, "the script did not run")
}
