package admin

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// A 6-shard fire whose shards are in different states is one line of the
// executions page, with its outcome and its shards' progress; its page
// lists the six shards with their replicas.
func TestBrowserShardedFireIsOneLineAndItsPageListsItsShards(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	fx := insertShardedFires(t, f)
	tb := openTab(t, f, tabOpts{})

	tb.open("executions?" + url.Values{"app": {fx.App}}.Encode())
	require.Equal(t, len(shardedLines), tb.count("#executions tbody tr[data-execution]"), "one line per fire")
	line := fmt.Sprintf(`#executions tbody tr[data-execution="%d"]`, fx.Fire6[5].ID)
	require.Equal(t, "6", tb.attrs(line, "data-fire-shards")[0])
	require.Equal(t, "running", tb.attrs(line, "data-status")[0])
	require.Equal(t, "running", tb.text(line+" .badge"))
	require.Equal(t, "1/6 running, 1 scheduled, 3 succeeded, 1 failed", tb.text(line+" [data-progress]"))
	require.Equal(t, "6 shards", tb.text(line+" td.replica"))
	for _, r := range fx.Fire6[:5] {
		require.Equal(t, 0, tb.count(fmt.Sprintf(`#executions tbody tr[data-execution="%d"]`, r.ID)), "shard %d has no line of its own", r.Shard)
	}
	failedFire := fmt.Sprintf(`#executions tbody tr[data-execution="%d"]`, fx.Rows[len(fx.Rows)-1].ID)
	require.Equal(t, "bad", tb.attrs(failedFire, "class")[0], "a failed fire's line is red")

	tb.click(line + " a.open")
	tb.waitFor("the execution page of the fire's shard 5", `document.querySelectorAll("#shards tbody tr").length === 6`,
		`document.querySelector("main").innerText`)
	require.Equal(t, fmt.Sprintf("Execution #%d", fx.Fire6[5].ID), tb.text("h1"))
	require.Equal(t, "shard 5 of 6", tb.text("#shard"))
	require.Equal(t, "1/6 running, 1 scheduled, 3 succeeded, 1 failed", tb.text("#fire-status [data-progress]"))
	require.Equal(t, []string{"0", "1", "2", "3", "4", "5"}, tb.attrs("#shards tbody tr", "data-shard"))
	require.Equal(t, []string{"succeeded", "succeeded", "succeeded", "running", "failed", "scheduled"}, tb.attrs("#shards tbody tr", "data-status"))
	replicas := evalJS[[]string](tb, `Array.from(document.querySelectorAll("#shards tbody tr td.replica"), e => e.textContent.trim())`)
	require.Equal(t, []string{"replica-0", "replica-1", "replica-2", "replica-3", "replica-4", "replica-5"}, replicas)
	require.Equal(t, []string{"true"}, tb.attrs(`#shards tbody tr[aria-current]`, "aria-current"))
	require.Equal(t, "5", tb.attrs(`#shards tbody tr[aria-current]`, "data-shard")[0])

	// The tasks list's last result is the fire's outcome.
	tb.open("?" + url.Values{"app": {fx.App}}.Encode())
	require.Equal(t, "running", tb.attrs(rowSel("etl.sharded")+" td.last", "data-status")[0])

	// Both pages, and the task's, fit a phone.
	onPhone := openTab(t, f, tabOpts{viewport: phone})
	for _, rel := range []string{"executions?" + url.Values{"app": {fx.App}}.Encode(), fmt.Sprintf("executions/%d", fx.Fire6[3].ID),
		"tasks/etl.sharded?" + url.Values{"app": {fx.App}}.Encode()} {
		onPhone.open(rel)
		require.Empty(t, onPhone.overflow(), "page %q overflows a %dpx phone", rel, phone.width)
	}
	require.Equal(t, "1/6 running, 1 scheduled, 3 succeeded, 1 failed", onPhone.text(`#recent tbody tr[data-fire-shards="6"] [data-progress]`))
}
