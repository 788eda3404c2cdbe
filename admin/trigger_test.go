package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// registerWithParams registers the defaults and report.params, whose
// handler sends the parameters it got to ran.
func registerWithParams(s *xtimer.Scheduler, ran chan string) {
	registerDefaults(s, ran)
	must(s.Register("report.params", "0 0 3 * * *", func(ctx context.Context, run *xtimer.Run) error {
		ran <- "params " + string(run.Params)
		return nil
	}, xtimer.WithParams(map[string]any{"region": "eu", "limit": 3})))
}

// triggerWith posts body to a task's trigger and moves the fake clock to
// the run's time: a second run recorded in the same millisecond takes the
// next one, and starts once the clock reaches it.
func triggerWith(t *testing.T, f *fixture, code, body string) ExecutionView {
	t.Helper()
	r := apiSend(t, f, http.MethodPost, "api/tasks/"+code+"/trigger", body)
	require.Equal(t, http.StatusCreated, r.Status, "%+v", r.Error)
	e := apiData[ExecutionView](t, r)
	if d := e.RunTime.Sub(f.Clock.Now()); d > 0 {
		f.Clock.Advance(d)
	}
	return e
}

// The trigger takes parameters and a note: the run gets the parameters,
// the execution shows both, and the history names them. {} runs with
// the task's, as ever.
func TestAPITriggerWithParamsAndNote(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{register: registerWithParams}, func(t *testing.T, f *fixture) {
		for _, c := range []struct{ body, params string }{
			{`{"params": {"region": "us"}, "note": "rerun for the US"}`, `{"region": "us"}`},
			{`{"params": "{\"region\":\"ap\"}"}`, `{"region":"ap"}`}, // the form's: the text in a string
		} {
			e := triggerWith(t, f, "report.params", c.body)
			require.NotNil(t, e.Params)
			require.Equal(t, c.params, *e.Params)
			require.Equal(t, "params "+c.params, <-f.Ran)
			e = apiSettled(t, f, e.ID, store.StatusSucceeded)
			require.Equal(t, c.params, *e.Params)
		}
		plain := triggerWith(t, f, "report.params", `{}`)
		require.Nil(t, plain.Params)
		require.Equal(t, `params {"limit":3,"region":"eu"}`, <-f.Ran)
		apiSettled(t, f, plain.ID, store.StatusSucceeded)

		d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.params"))
		require.JSONEq(t, `{"region":"eu","limit":3}`, string(d.Task.Params))
		var got []string
		for _, a := range d.Actions {
			got = append(got, a.Detail)
		}
		require.Len(t, got, 3)
		require.Regexp(t, `^execution \d+$`, got[0])
		require.Regexp(t, `^execution \d+ with its own parameters$`, got[1])
		require.Regexp(t, `^execution \d+ with its own parameters: rerun for the US$`, got[2])

		list := apiData[[]ExecutionView](t, apiGet(t, f, "api/executions?task=report.params"))
		require.Len(t, list, 3)
		for _, e := range list {
			require.Nil(t, e.Params, "lists leave the parameters out")
		}
	})
}

func TestAPITriggerRefusesBadParamsAndNotesNamingThem(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{register: registerWithParams})
	path := "api/tasks/report.params/trigger"
	for _, c := range []struct{ body, field, value, message string }{
		{`{"params": "{\"region\":"}`, "params", `{"region":`,
			`xtimer: trigger "report.params": TriggerOptions.Params "{\"region\":": not valid JSON: unexpected end of JSON input`},
		{`{"params": "eu"}`, "params", "eu",
			`xtimer: trigger "report.params": TriggerOptions.Params "eu": not valid JSON: invalid character 'e' looking for beginning of value`},
		{fmt.Sprintf(`{"params": %q}`, strings.Repeat("x", 1025)), "params", "1025 bytes", ""},
		{`{"note": "a\u0000b"}`, "note", "a\x00b", ""},
		{fmt.Sprintf(`{"note": %q}`, strings.Repeat("n", 1025)), "note", "1025 bytes", ""},
		{`{"note": 3}`, "note", "", ""},
	} {
		e := requireAPIError(t, apiSend(t, f, http.MethodPost, path, c.body), 400, codeInvalid, c.field)
		if c.value != "" {
			require.Equal(t, c.value, e.Value, c.body)
		}
		if c.message != "" {
			require.Equal(t, c.message, e.Message)
		}
	}
	requireAPIError(t, apiSend(t, f, http.MethodPost, path, `{"parameters": {}}`), 400, codeUnknownField, "parameters")
	var n int64
	require.NoError(t, f.DB.Model(&store.Execution{}).Where("app = ? AND source = ?", f.S.App(), store.SourceManual).Count(&n).Error)
	require.Zero(t, n, "nothing recorded")
}

func TestAPITriggerWithParamsIsRefusedByAReadOnlyConsole(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{register: registerWithParams, admin: Options{ReadOnly: true}})
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/report.params/trigger", `{"params": {"region": "us"}, "note": "x"}`), 403, codeReadOnly, "")
	page := rawGet(t, f, "tasks/report.params")
	require.NotContains(t, page, `id="trigger-form"`, "a read-only console offers no run")
	require.Contains(t, page, `<pre id="params" class="out">`, "but shows the parameters")
}

// The task page shows the parameters and offers "Run now…" prefilled
// with them; the execution page shows what a manual run ran with.
func TestTaskPageShowsParamsAndOffersARunWithThem(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{register: registerWithParams})
	page := rawGet(t, f, "tasks/report.params")
	pretty := "{\n  &#34;limit&#34;: 3,\n  &#34;region&#34;: &#34;eu&#34;\n}"
	require.Contains(t, page, `<dt>Parameters</dt><dd><pre id="params" class="out">`+pretty+`</pre></dd>`)
	form := pagesSection(t, page, "run-with", "</details>")
	require.Contains(t, form, `<summary>Run now…</summary>`)
	require.Contains(t, form, `<form id="trigger-form" data-task="report.params">`)
	require.Contains(t, form, `<textarea id="trigger-params" name="params" rows="6" spellcheck="false">`+pretty+`</textarea>`)
	require.Contains(t, form, `<input id="trigger-note" name="note" type="text" maxlength="1024"`)
	require.NotContains(t, rawGet(t, f, "tasks/report.minutely"), `<dt>Parameters</dt>`, "a task without parameters shows none")

	e := triggerWith(t, f, "report.params", `{"params": {"region": "<us>"}, "note": "<b>why</b>"}`)
	<-f.Ran
	apiSettled(t, f, e.ID, store.StatusSucceeded)
	exec := rawGet(t, f, fmt.Sprintf("executions/%d", e.ID))
	require.Contains(t, exec, `<dt>Note</dt><dd id="note">&lt;b&gt;why&lt;/b&gt;</dd>`)
	require.Contains(t, exec, `<pre id="params" class="out">{&#34;region&#34;: &#34;&lt;us&gt;&#34;}</pre>`)

	plain := triggerWith(t, f, "report.params", `{}`)
	<-f.Ran
	apiSettled(t, f, plain.ID, store.StatusSucceeded)
	require.Contains(t, rawGet(t, f, fmt.Sprintf("executions/%d", plain.ID)), `<span id="params" class="muted">the task's, as they were when it ran</span>`)
}

// An HTTP task's form starts with its body, and the trigger's params
// replace it (any text, as a JSON string).
func TestAPITriggerOfAnHTTPTaskTakesABody(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	createHook(t, f, "billing.hook")
	form := pagesSection(t, rawGet(t, f, "tasks/billing.hook"), "run-with", "</details>")
	require.Contains(t, form, `>{&#34;full&#34;:true}</textarea>`)
	r := apiSend(t, f, http.MethodPost, "api/tasks/billing.hook/trigger", `{"params": "{\"full\":false}"}`)
	require.Equal(t, http.StatusCreated, r.Status, "%+v", r.Error)
	e := apiData[ExecutionView](t, r)
	require.Equal(t, `{"full":false}`, *e.Params)
	e2 := requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/billing.hook/trigger", `{"params": "full=false"}`), 400, codeInvalid, "params")
	require.Contains(t, e2.Message, "the task's Content-Type says JSON but the body is not")
}
