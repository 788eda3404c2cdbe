package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// retriedBy waits, moving the fake clock a second at a time so that a
// replica's tick picks the retry up, until execution id is final again
// at attempt n, and returns it.
func retriedBy(t *testing.T, f *fixture, id int64, n int) store.Execution {
	t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for {
		row, err := f.Store.Execution(context.Background(), id)
		require.NoError(t, err)
		if row.Attempt == n && row.Status != store.StatusRunning && row.Status != store.StatusRetrying {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %d not final at attempt %d: %+v", id, n, row)
		}
		f.Clock.Advance(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
}

// POST api/executions/{id}/retry gives a failed execution one more
// attempt, audited in its task's history; GET .../attempts lists both
// attempts. A succeeded execution answers 409, an unknown one 404.
func TestAPIRetryAndAttempts(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	e := apiTrigger(t, f, "always.fails", store.StatusFailed)
	attempts := apiData[[]AttemptView](t, apiGet(t, f, fmt.Sprintf("api/executions/%d/attempts", e.ID)))
	require.Len(t, attempts, 1)
	require.Equal(t, 1, attempts[0].Number)
	require.Equal(t, store.StatusFailed, attempts[0].Status)
	require.Equal(t, "about to fail\n", attempts[0].Output)
	require.Equal(t, "boom: the ledger did not balance", attempts[0].Error)
	require.Equal(t, "replica-a", attempts[0].Replica)

	r := apiSend(t, f, http.MethodPost, fmt.Sprintf("api/executions/%d/retry", e.ID), "{}")
	require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
	v := apiData[ExecutionView](t, r)
	require.Equal(t, store.StatusRetrying, v.Status)
	require.Equal(t, store.ReasonRetried, v.Reason)
	require.Equal(t, 1, v.Attempt)
	require.Equal(t, 2, v.MaxAttempts)
	requireAPIError(t, apiSend(t, f, http.MethodPost, fmt.Sprintf("api/executions/%d/retry", e.ID), "{}"), 409, codeConflict, "")

	row := retriedBy(t, f, e.ID, 2)
	require.Equal(t, store.StatusFailed, row.Status)
	require.Equal(t, 2, row.MaxAttempts)
	attempts = apiData[[]AttemptView](t, apiGet(t, f, fmt.Sprintf("api/executions/%d/attempts", e.ID)))
	require.Len(t, attempts, 2)
	require.Equal(t, []int{1, 2}, []int{attempts[0].Number, attempts[1].Number})
	require.Equal(t, store.StatusFailed, attempts[1].Status)

	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/always.fails"))
	require.Equal(t, ActionView{At: d.Actions[0].At, Principal: "local", Action: store.ActionRetry, Detail: fmt.Sprintf("execution %d", e.ID)}, d.Actions[0])

	ok := runNow(t, f, "report.minutely", store.StatusSucceeded)
	requireAPIError(t, apiSend(t, f, http.MethodPost, fmt.Sprintf("api/executions/%d/retry", ok), "{}"), 409, codeConflict, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, fmt.Sprintf("api/executions/%d/retry", e.ID+1000), "{}"), 404, codeNotFound, "")
	requireAPIError(t, apiGet(t, f, fmt.Sprintf("api/executions/%d/attempts", e.ID+1000)), 404, codeNotFound, "")
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/executions/x1/retry", "{}"), 400, codeInvalid, "id")
	requireAPIError(t, apiGet(t, f, fmt.Sprintf("api/executions/%d/retry", e.ID)), 405, codeMethod, "")
}

func TestAPIRetryIsRefusedByAReadOnlyConsole(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{ReadOnly: true}})
	id := runNow(t, f, "always.fails", store.StatusFailed)
	requireAPIError(t, apiSend(t, f, http.MethodPost, fmt.Sprintf("api/executions/%d/retry", id), "{}"), 403, codeReadOnly, "")
	p := pagesGet(t, f, fmt.Sprintf("executions/%d", id))
	require.Contains(t, p.Body, `<tr data-attempt="1" data-status="failed">`)
	require.NotContains(t, p.Body, `data-retry=`)
	waitSettled(t, f, id, store.StatusFailed) // unchanged
}

// The execution page lists the attempts, and offers Retry for a failed
// execution only.
func TestExecutionPageListsAttemptsAndOffersRetry(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	failed := runNow(t, f, "always.fails", store.StatusFailed)
	p := pagesGet(t, f, fmt.Sprintf("executions/%d", failed))
	require.Equal(t, http.StatusOK, p.Status)
	require.Contains(t, p.Body, `<table id="attempts" class="list cards">`)
	require.Contains(t, p.Body, `<tr data-attempt="1" data-status="failed">`)
	require.Contains(t, p.Body, `<summary>boom: the ledger did not balance</summary>`)
	require.Contains(t, p.Body, `data-retry="`+fmt.Sprint(failed)+`"`)

	ok := runNow(t, f, "report.minutely", store.StatusSucceeded)
	p = pagesGet(t, f, fmt.Sprintf("executions/%d", ok))
	require.Contains(t, p.Body, `<tr data-attempt="1" data-status="succeeded">`)
	require.NotContains(t, p.Body, `data-retry=`)
	require.Equal(t, 1, strings.Count(p.Body, `data-attempt=`))

	rows := insertExecutions(t, f, store.Execution{TaskCode: "report.minutely", RunTime: fakeStart.Add(time.Hour).UnixMilli(), Status: store.StatusScheduled})
	p = pagesGet(t, f, fmt.Sprintf("executions/%d", rows[0].ID))
	require.Contains(t, p.Body, `<p id="attempts" class="muted">No attempt yet.</p>`)
}
