package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// Pause and resume through the API take an optional note: it is stored
// with the task, shown by its detail and pages, and is the action's line
// in the task's history. A note the databases cannot store is a 400
// naming the field "note", and changes nothing.
func TestAPIPauseAndResumeTakeANote(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, fixtureOpts{}, func(t *testing.T, f *fixture) {
		path := "api/tasks/report.minutely/"
		r := apiSend(t, f, http.MethodPost, path+"pause", `{"note": "db migration until 14:00"}`)
		require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
		d := apiData[TaskDetail](t, r)
		require.Equal(t, store.TaskPaused, d.Task.Status)
		require.Equal(t, "db migration until 14:00", d.Task.PauseNote)

		page := rawGet(t, f, "tasks/report.minutely")
		require.Contains(t, page, `<p id="pause-note" class="pause-note"><span class="label">Paused:</span> db migration until 14:00</p>`)
		require.Contains(t, page, `<input id="pause-note-input" data-note-for="report.minutely"`)
		require.Contains(t, rawGet(t, f, "?status=paused"), `<div class="desc pause-note" title="Why the task was last paused or resumed">db migration until 14:00</div>`)

		for _, c := range []struct{ body, value string }{
			{`{"note": "a\u0000b"}`, "a\x00b"},
			{fmt.Sprintf(`{"note": %q}`, strings.Repeat("x", 1025)), "1025 bytes"},
		} {
			e := requireAPIError(t, apiSend(t, f, http.MethodPost, path+"resume", c.body), 400, codeInvalid, "note")
			require.Equal(t, c.value, e.Value)
		}
		requireAPIError(t, apiSend(t, f, http.MethodPost, path+"resume", `{"note": 3}`), 400, codeInvalid, "note")
		requireAPIError(t, apiSend(t, f, http.MethodPost, path+"resume", `{"reason": "x"}`), 400, codeUnknownField, "reason")
		require.Equal(t, store.TaskPaused, taskStatus(t, f, "report.minutely"), "a refused resume changes nothing")

		r = apiSend(t, f, http.MethodPost, path+"resume", `{"note": "migration done"}`)
		require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
		d = apiData[TaskDetail](t, r)
		require.Equal(t, store.TaskActive, d.Task.Status)
		require.Equal(t, "migration done", d.Task.PauseNote, "the resume's note replaces the pause's")
		require.Contains(t, rawGet(t, f, "tasks/report.minutely"), `<span class="label">Resumed:</span> migration done`)

		// {} still pauses, and clears the note.
		d = apiData[TaskDetail](t, apiSend(t, f, http.MethodPost, path+"pause", `{}`))
		require.Empty(t, d.Task.PauseNote)

		d = apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely"))
		var got []string
		for _, a := range d.Actions {
			got = append(got, a.Action+": "+a.Detail)
		}
		require.Equal(t, []string{"pause: ", "resume: migration done", "pause: db migration until 14:00"}, got)
	})
}

// An HTTP task's pause on failure is set, changed and read through the
// API's pause_on_failure, offered by the form, and checked.
func TestAPIHTTPTaskPauseOnFailure(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	e := hookEdit("billing.hook")
	e.PauseOnFailure = 3
	r := apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, e))
	require.Equal(t, http.StatusCreated, r.Status, "%+v", r.Error)
	require.Equal(t, 3, apiData[TaskDetail](t, r).Task.PauseOnFailure)
	row, err := f.Store.Task(t.Context(), f.S.App(), "billing.hook")
	require.NoError(t, err)
	require.Equal(t, 3, row.PauseAfter)

	form := pagesSection(t, rawGet(t, f, "tasks/billing.hook/edit"), "task-form", "</form>")
	require.Contains(t, form, `<input name="pause_on_failure" data-field="pause_on_failure" type="number" min="0" max="1000" step="1" value="3"`)
	require.Contains(t, rawGet(t, f, "tasks/billing.hook"), `<dt>Pause on failure</dt><dd>after 3 consecutive failed fires</dd>`)

	e.PauseOnFailure = 0
	r = apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, e))
	require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
	require.Zero(t, apiData[TaskDetail](t, r).Task.PauseOnFailure, "0 is never")
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/billing.hook"))
	require.Contains(t, d.Actions[0].Detail, "pause_on_failure", "the history names the change")

	for _, n := range []int{-1, 1001} {
		e.PauseOnFailure = n
		got := requireAPIError(t, apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, e)), 400, codeInvalid, "pause_on_failure")
		require.Equal(t, fmt.Sprint(n), got.Value)
		require.Contains(t, got.Message, "want 1-1000 consecutive failures, or 0 for never")
	}
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(jsonBody(t, hookEdit("x"))), &raw))
	require.Contains(t, raw, "pause_on_failure", "the body's field")
}
