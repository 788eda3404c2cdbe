package xtimer

import (
	"context"
	"errors"
	"fmt"

	"github.com/xtimer-go/xtimer/internal/store"
)

// ErrNotRetryable is the error of Retry for an execution that is not
// failed or timed_out (it succeeded, was skipped, or is scheduled,
// running or retrying; a Retry that lost a race to another finds it
// retrying), or whose task is paused or gone.
var ErrNotRetryable = errors.New("xtimer: execution not retryable")

// Retry gives a failed or timed_out execution one more attempt, on the
// same row: the same Run.ID, Run.Attempt one more than its last, and
// Run.MaxAttempts equal to that attempt, so no automatic retry follows
// it. It does not run the handler itself: the execution waits for a
// retry due now, and any started replica that runs the task starts it at
// its next tick (docs/architecture.md, "Retry by hand"). Of Retry calls
// racing for one execution, one wins and the others get ErrNotRetryable.
//
// It returns the execution as Retry left it, retrying. An execution that
// is not failed or timed_out, or whose task is paused or no longer
// exists, is an error matching ErrNotRetryable; an unknown one matches
// ErrExecutionNotFound.
func (s *Scheduler) Retry(ctx context.Context, executionID int64) (Execution, error) {
	row, err := s.store.RetryExecution(ctx, executionID, s.clock.Now().UnixMilli())
	if err != nil {
		if errors.Is(err, store.ErrNotRetryable) {
			err = sentinelError{ErrNotRetryable, err}
		}
		return Execution{}, fmt.Errorf("xtimer: retry execution %d: %w", executionID, execErr(err))
	}
	s.log.Info("execution retried by hand", "task", row.TaskCode, "execution", row.ID, "attempt", row.Attempt+1)
	return toExecution(row, s.eng.Zone(row.TaskCode)), nil
}
