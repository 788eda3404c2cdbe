package admin

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The execution page's Retry runs one more attempt of a failed execution:
// the page follows it until it is final again, with both attempts listed
// and no Retry left while it runs.
func TestBrowserRetryRunsOneMoreAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{realTime: true})
	id := runNow(t, f, "always.fails", store.StatusFailed)
	tb := openTab(t, f, tabOpts{})
	tb.open(fmt.Sprintf("executions/%d", id))
	require.Equal(t, 1, tb.count("#attempts tbody tr"))
	tb.click("button#retry")
	tb.waitFor("the flash of the retry", `/Retrying execution/.test(document.getElementById("flash").textContent)`, `document.getElementById("flash").textContent`)
	tb.waitFor("two attempts listed, the execution failed again",
		`document.querySelectorAll("#attempts tbody tr").length === 2 && document.getElementById("execution-status").textContent === "failed"`,
		`document.querySelector("main").innerText`)
	require.Equal(t, []string{"1", "2"}, tb.attrs("#attempts tbody tr", "data-attempt"))
	row := waitSettled(t, f, id, store.StatusFailed)
	require.Equal(t, 2, row.Attempt)
	require.Equal(t, 2, row.MaxAttempts)
}
