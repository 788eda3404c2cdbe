package admin

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// PUT and DELETE options: the overrides apply and show beside the code's
// values, the history says before → after, bad input names the body's
// field, and what is not a Go task of the app is refused.
func TestAPITaskOptionsOverrideAndReset(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	path := "api/tasks/billing.reconcile/options"
	r := apiSend(t, f, http.MethodPut, path, `{"max_attempts": 5, "timeout_ms": 120000, "overlap": "forbid", "params": {"region": "eu"}, "jitter_ms": null}`)
	require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
	d := apiData[TaskDetail](t, r)
	require.Equal(t, 5, d.Task.MaxAttempts, "the override applies")
	require.Equal(t, int64(120000), d.Task.TimeoutMs)
	require.Equal(t, "forbid", d.Task.Overlap)
	require.JSONEq(t, `{"region":"eu"}`, string(d.Task.Params))
	require.JSONEq(t, `{"max_attempts":5,"timeout_ms":120000,"overlap":"forbid","params":{"region":"eu"}}`, string(d.Task.OptionOverrides))
	require.JSONEq(t, `{"max_attempts":3,"timeout_ms":60000,"overlap":"allow"}`, string(d.Task.CodeOptions))
	after := `{"timeout_ms":120000,"max_attempts":5,"overlap":"forbid","params":{"region":"eu"}}`
	require.Equal(t, []ActionView{{At: fakeStart, Principal: "local", Action: store.ActionSetOptions, Detail: "{} → " + after}}, d.Actions)

	row, err := f.Store.Task(context.Background(), f.S.App(), "billing.reconcile")
	require.NoError(t, err)
	require.Equal(t, 3, row.MaxAttempts, "the code's column is untouched")
	require.Equal(t, store.OverridesJSON(after), row.OptionOverrides)

	// Bad input changes nothing and names the body's field.
	for _, c := range []struct{ body, field, value string }{
		{`{"max_attempts": 0}`, "max_attempts", "0"},
		{`{"timeout_ms": -5}`, "timeout_ms", "-5"},
		{`{"backoff_max_ms": 10}`, "backoff_max_ms", "10"},
		{`{"misfire": "often"}`, "misfire", `"often"`},
		{`{"overlap": "never"}`, "overlap", `"never"`},
		{`{"jitter_ms": 120000}`, "jitter_ms", "120000"},
		{`{"pause_on_failure": 1001}`, "pause_on_failure", "1001"},
		{`{"misfire_window_ms": 9223372036854775807}`, "misfire_window_ms", "9223372036854775807"},
	} {
		e := requireAPIError(t, apiSend(t, f, http.MethodPut, path, c.body), 400, codeInvalid, c.field)
		require.Equal(t, c.value, e.Value, c.body)
		require.Contains(t, e.Message, c.field, c.body)
	}
	requireAPIError(t, apiSend(t, f, http.MethodPut, path, `{"retries": 3}`), 400, codeUnknownField, "retries")
	d = apiData[TaskDetail](t, apiGet(t, f, "api/tasks/billing.reconcile"))
	require.Equal(t, 5, d.Task.MaxAttempts, "refused edits stored nothing")
	require.Len(t, d.Actions, 1, "refused edits are not in the history")

	requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/no.such.task/options", `{"max_attempts": 2}`), 404, codeNotFound, "")
	requireAPIError(t, apiSend(t, f, http.MethodDelete, "api/tasks/no.such.task/options", "{}"), 404, codeNotFound, "")
	createHook(t, f, "billing.hook")
	requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/billing.hook/options", `{"max_attempts": 2}`), 409, codeConflict, "")

	r = apiSend(t, f, http.MethodDelete, path, "{}")
	require.Equal(t, http.StatusOK, r.Status)
	d = apiData[TaskDetail](t, r)
	require.Equal(t, 3, d.Task.MaxAttempts)
	require.Equal(t, int64(60000), d.Task.TimeoutMs)
	require.Nil(t, d.Task.OptionOverrides)
	require.Nil(t, d.Task.CodeOptions)
	require.Equal(t, ActionView{At: fakeStart, Principal: "local", Action: store.ActionResetOptions, Detail: after + " → {}"}, d.Actions[0])

	// {} sets nothing: the code's options, as DELETE.
	apiData[TaskDetail](t, apiSend(t, f, http.MethodPut, path, `{"max_attempts": 2}`))
	d = apiData[TaskDetail](t, apiSend(t, f, http.MethodPut, path, `{}`))
	require.Equal(t, 3, d.Task.MaxAttempts)
	require.Nil(t, d.Task.OptionOverrides)
}

func TestAPITaskOptionsAreRefusedReadOnly(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{ReadOnly: true}})
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		e := requireAPIError(t, apiSend(t, f, method, "api/tasks/billing.reconcile/options", `{}`), 403, codeReadOnly, "")
		require.Contains(t, e.Message, "admin.Options.ReadOnly")
	}
	row, err := f.Store.Task(context.Background(), f.S.App(), "billing.reconcile")
	require.NoError(t, err)
	require.Equal(t, store.OverridesJSON(""), row.OptionOverrides)
}

// The task page shows each overridden option as the code's value → the
// override, with a reset, and offers the form to Go tasks only.
func TestTaskPageShowsOptionOverridesBesideTheCode(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	p := pagesGet(t, f, "tasks/billing.reconcile")
	require.NotContains(t, p.Body, `id="option-overrides"`)
	require.Contains(t, p.Body, `id="options-form"`)
	apiData[TaskDetail](t, apiSend(t, f, http.MethodPut, "api/tasks/billing.reconcile/options", `{"max_attempts": 5, "params": {"region": "eu"}}`))
	p = pagesGet(t, f, "tasks/billing.reconcile")
	require.Equal(t, http.StatusOK, p.Status)
	section := pagesSection(t, p.Body, "option-overrides", "</dd>")
	require.Contains(t, section, `<li><code>max_attempts</code> <span class="muted">3</span> → <strong>5</strong></li>`)
	require.Contains(t, section, `<li><code>params</code> <span class="muted">none</span> → <strong>{&#34;region&#34;:&#34;eu&#34;}</strong></li>`)
	require.Contains(t, section, `data-action="reset-options"`)
	createHook(t, f, "billing.hook")
	require.NotContains(t, pagesGet(t, f, "tasks/billing.hook").Body, `id="options-form"`)
}
