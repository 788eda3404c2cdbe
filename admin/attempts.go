package admin

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The attempts of an execution and its retry by hand:
//
//	GET  api/executions/{id}/attempts  [AttemptView, ...], oldest first
//	POST api/executions/{id}/retry     {}: the execution, retrying (Scheduler.Retry);
//	                                   409 unless failed or timed_out, or of another app
//
// The execution page lists the attempts and, for a failed or timed_out
// execution of the console's app, has a Retry button (app.js).

// AttemptView is one attempt of an execution: every attempt that ended,
// then the one running, if any.
type AttemptView struct {
	Number     int        `json:"number"`
	Replica    string     `json:"replica,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	DurationMs int64      `json:"duration_ms"`
	// Status is the attempt's outcome: succeeded, failed, timed_out, or
	// running.
	Status     string `json:"status"`
	Output     string `json:"output"`
	Error      string `json:"error"`
	ErrorHead  string `json:"error_head,omitempty"`
	HTTPStatus int    `json:"http_status,omitempty"`
}

func (c *console) routeAttempts(mux *http.ServeMux) {
	api := c.prefix + "api/"
	c.route(mux, api+"executions/{id}/attempts", map[string]endpoint{"GET": read(c.apiAttempts)})
	c.route(mux, api+"executions/{id}/retry", map[string]endpoint{"POST": operate(c.apiRetry)})
}

// attemptViews reads the attempts of execution id, and its row.
func (c *console) attemptViews(ctx context.Context, id int64) (store.Execution, []AttemptView, error) {
	row, rows, err := c.st.Attempts(ctx, id)
	if err != nil {
		return store.Execution{}, nil, err
	}
	if !principalOf(ctx).SeesApp(row.App) {
		return store.Execution{}, nil, errOutOfScope(fmt.Sprintf("execution %d", id))
	}
	out := make([]AttemptView, len(rows))
	for i, a := range rows {
		out[i] = AttemptView{Number: a.Attempt, Replica: a.Replica, StartedAt: msTime(a.StartedMs), FinishedAt: msTime(a.FinishedMs),
			DurationMs: a.DurationMs, Status: a.Status, Output: a.Output, Error: a.Error, ErrorHead: firstLine(a.Error, 200),
			HTTPStatus: a.HTTPStatus}
	}
	return row, out, nil
}

func (c *console) apiAttempts(w http.ResponseWriter, r *http.Request) {
	id, ok := apiExecutionID(w, r)
	if !ok {
		return
	}
	_, views, err := c.attemptViews(r.Context(), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, views, "")
}

// apiRetry retries an execution of the console's app, and records the
// action in its task's history.
func (c *console) apiRetry(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := decodeBody(r, &emptyBody{}); err != nil {
		writeError(w, r, err)
		return
	}
	id, ok := apiExecutionID(w, r)
	if !ok {
		return
	}
	row, err := c.st.Execution(ctx, id)
	if err == nil && !principalOf(ctx).SeesApp(row.App) {
		err = errOutOfScope(fmt.Sprintf("execution %d", id))
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	if row.App != c.sopts.App {
		writeError(w, r, apiErrorf(http.StatusConflict, codeConflict,
			"execution %d is of app %q: this console retries the executions of app %q, whose replicas hold the handlers", id, row.App, c.sopts.App))
		return
	}
	if _, err = c.s.Retry(ctx, id); err != nil {
		writeError(w, r, err)
		return
	}
	who := principalOf(ctx).Name
	detail := "execution " + strconv.FormatInt(id, 10)
	c.log.Info("console action", "principal", who, "task", row.TaskCode, "action", store.ActionRetry, "detail", detail, "app", c.sopts.App)
	if _, err = c.st.RecordAction(ctx, store.Action{App: c.sopts.App, TaskCode: row.TaskCode, Principal: who, Action: store.ActionRetry, Detail: detail}); err != nil {
		c.log.Error("console action not written to the task's history", "task", row.TaskCode, "action", store.ActionRetry, "err", err)
	}
	v, err := c.executionDetail(ctx, id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, v, "")
}

// canRetry tells whether the execution page offers Retry for e to p.
func (c *console) canRetry(p Principal, e ExecutionView) bool {
	return p.Role.Allows(RoleOperator) && e.App == c.sopts.App && (e.Status == store.StatusFailed || e.Status == store.StatusTimedOut)
}
