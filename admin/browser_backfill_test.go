package admin

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// setBackfillRange fills the task page's backfill form with 08:50 to
// 08:55 UTC, in the browser's zone as its datetime-local inputs take them.
const setBackfillRange = `(function () {
  function local(ms) { var d = new Date(ms); return new Date(ms - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19); }
  var f = document.querySelector("#backfill-form");
  f.elements.from.value = local(Date.UTC(2026, 10, 30, 8, 50));
  f.elements.to.value = local(Date.UTC(2026, 10, 30, 8, 55));
  return true;
})()`

// The task page previews a range's fires, and backfills them once
// confirmed; the history says so.
func TestBrowserTaskPageBackfillsARange(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	tb := openTab(t, f, tabOpts{})
	tb.open("tasks/report.minutely")
	require.True(t, evalJS[bool](tb, setBackfillRange))
	tb.click(`#backfill-form button[data-backfill="preview"]`)
	tb.waitFor("the preview", `document.querySelector("#backfill-preview").textContent !== ""`, `document.querySelector("#flash").textContent`)
	require.Equal(t, "The range holds 5 fires; 5 never ran.", tb.text("#backfill-preview"))

	// Confirmed (the harness fails on a real dialog).
	require.NoError(t, chromedp.Do(tb.ctx, chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`)))
	tb.click(`#backfill-form [type=submit]`)
	tb.waitFor("the flash", `document.querySelector("#flash").textContent !== ""`, `location.href`)
	require.Equal(t, "Recorded 5 fires of report.minutely to backfill.", tb.text("#flash"))
	require.Equal(t, []string{store.ActionBackfill}, actionNames(t, f, "report.minutely"))
	tb.waitFor("the history", `document.querySelector("#history").textContent.includes("backfill")`, `document.querySelector("#history").textContent`)
}

// The form is an action: a read-only console, or a task of another app,
// does not offer it.
func TestTaskPageOffersBackfillOnlyWhereItActs(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	p := pagesGet(t, f, "tasks/report.minutely")
	require.Equal(t, http.StatusOK, p.Status)
	require.Contains(t, p.Body, `id="backfill-form" data-task="report.minutely"`)
	ro := setup(t, fixtureOpts{admin: Options{ReadOnly: true}})
	p = pagesGet(t, ro, "tasks/report.minutely")
	require.Equal(t, http.StatusOK, p.Status)
	require.NotContains(t, p.Body, `backfill-form`)
}
