package admin

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The preview counts a range's fires and those without a row; the
// backfill records those, once, and writes the task's history.
func TestAPIBackfillPreviewsAndRecordsARange(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	// fakeStart is 08:59:30: five minutely fires from 08:50 to 08:54.
	const rng = "from=2026-11-30T08:50:00Z&to=2026-11-30T08:55:00Z"
	p := apiData[BackfillPreview](t, apiGet(t, f, "api/tasks/report.minutely/backfill?"+rng))
	require.Equal(t, BackfillPreview{Fires: 5, New: 5}, p)

	body := `{"from": "2026-11-30T08:50:00Z", "to": "2026-11-30T08:55:00Z"}`
	r := apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/backfill", body)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, BackfillResult{Recorded: 5}, apiData[BackfillResult](t, r))
	var n int64
	require.NoError(t, f.DB.Model(&store.Execution{}).Where("app = ? AND task_code = ? AND source = ?",
		f.S.App(), "report.minutely", store.SourceBackfill).Count(&n).Error)
	require.EqualValues(t, 5, n)

	p = apiData[BackfillPreview](t, apiGet(t, f, "api/tasks/report.minutely/backfill?"+rng))
	require.Equal(t, BackfillPreview{Fires: 5, New: 0}, p)
	again := apiData[BackfillResult](t, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/backfill", body))
	require.Zero(t, again.Recorded)

	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely"))
	require.GreaterOrEqual(t, len(d.Actions), 2)
	require.Equal(t, store.ActionBackfill, d.Actions[0].Action)
	require.Equal(t, "2026-11-30T08:50:00Z to 2026-11-30T08:55:00Z: 0 fires recorded", d.Actions[0].Detail)
	require.Equal(t, "2026-11-30T08:50:00Z to 2026-11-30T08:55:00Z: 5 fires recorded", d.Actions[1].Detail)
}

// Every bad input is a 400 naming the field and its value; an unknown
// task a 404.
func TestAPIBackfillRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	for _, c := range []struct {
		name, body   string
		status       int
		code, field  string
		value, query string
	}{
		{"no from", `{"to": "2026-11-30T08:55:00Z"}`, 400, codeInvalid, "from", "", "to=2026-11-30T08:55:00Z"},
		{"from not a time", `{"from": "yesterday", "to": "2026-11-30T08:55:00Z"}`, 400, codeInvalid, "from", "yesterday",
			"from=yesterday&to=2026-11-30T08:55:00Z"},
		{"to not a time", `{"from": "2026-11-30T08:50:00Z", "to": "2026-11-30 08:55"}`, 400, codeInvalid, "to", "2026-11-30 08:55",
			"from=2026-11-30T08:50:00Z&to=2026-11-30+08:55"},
		{"to after now", `{"from": "2026-11-30T08:50:00Z", "to": "2026-11-30T09:00:00Z"}`, 400, codeInvalid, "to", "2026-11-30T09:00:00Z",
			"from=2026-11-30T08:50:00Z&to=2026-11-30T09:00:00Z"},
		{"from before the retention", `{"from": "2026-10-01T00:00:00Z", "to": "2026-11-30T08:55:00Z"}`, 400, codeInvalid, "from",
			"2026-10-01T00:00:00Z", "from=2026-10-01T00:00:00Z&to=2026-11-30T08:55:00Z"},
		{"backwards", `{"from": "2026-11-30T08:55:00Z", "to": "2026-11-30T08:50:00Z"}`, 400, codeInvalid, "from", "2026-11-30T08:55:00Z",
			"from=2026-11-30T08:55:00Z&to=2026-11-30T08:50:00Z"},
		{"too many fires", `{"from": "2026-11-01T00:00:00Z", "to": "2026-11-30T08:55:00Z"}`, 400, codeInvalid, "range",
			"2026-11-01T00:00:00Z/2026-11-30T08:55:00Z", "from=2026-11-01T00:00:00Z&to=2026-11-30T08:55:00Z"},
		{"unknown field", `{"from": "2026-11-30T08:50:00Z", "to": "2026-11-30T08:55:00Z", "dry": true}`, 400, codeUnknownField, "dry", "",
			"from=2026-11-30T08:50:00Z&to=2026-11-30T08:55:00Z&dry="},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/backfill", c.body), c.status, c.code, c.field)
			require.Equal(t, c.value, e.Value)
			e = requireAPIError(t, apiGet(t, f, "api/tasks/report.minutely/backfill?"+c.query), c.status, codeInvalid, c.field)
			require.Equal(t, c.value, e.Value)
		})
	}
	body := `{"from": "2026-11-30T08:50:00Z", "to": "2026-11-30T08:55:00Z"}`
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/no.such.task/backfill", body), 404, codeNotFound, "")
	requireAPIError(t, apiGet(t, f, "api/tasks/no.such.task/backfill?from=2026-11-30T08:50:00Z&to=2026-11-30T08:55:00Z"), 404, codeNotFound, "")
	var n int64
	require.NoError(t, f.DB.Model(&store.Execution{}).Where("app = ? AND source = ?", f.S.App(), store.SourceBackfill).Count(&n).Error)
	require.Zero(t, n, "nothing recorded")
}

// A read-only console refuses a backfill and still previews one.
func TestAPIBackfillIsRefusedByAReadOnlyConsole(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{ReadOnly: true}})
	e := requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/backfill",
		`{"from": "2026-11-30T08:50:00Z", "to": "2026-11-30T08:55:00Z"}`), 403, codeReadOnly, "")
	require.Contains(t, e.Message, "admin.Options.ReadOnly")
	p := apiData[BackfillPreview](t, apiGet(t, f, "api/tasks/report.minutely/backfill?from=2026-11-30T08:50:00Z&to=2026-11-30T08:55:00Z"))
	require.Equal(t, BackfillPreview{Fires: 5, New: 5}, p)
}
