package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"gorm.io/gorm"
)

// ReasonRetried is the reason of an execution an operator retried by hand
// (RetryExecution). The row keeps it through its extra attempt.
const ReasonRetried = "retried"

// ErrNotRetryable is returned, wrapped, by RetryExecution for an execution
// that is not failed or timed_out, or whose task is paused or gone.
var ErrNotRetryable = errors.New("store: execution not retryable")

// RetryExecution gives a failed or timed_out execution one more attempt on
// the same row: one conditional update, from the status and attempt it
// read, moves it to retrying with reason ReasonRetried, next_attempt_ms
// nowMs and max_attempts its attempt + 1, so that DueRetries on any replica
// with the handler starts it at its next tick, and no automatic retry
// follows. The attempt that made it final is copied into xtimer_attempts
// in the same transaction, as the next one takes its place on the row. Of callers racing (another RetryExecution, a console click
// twice) exactly one wins; the others get ErrNotRetryable. The task must
// exist and be active.
//
// A row that leaves its final status leaves its day's roll-up (rollup.go)
// too, in the same transaction, when the day was rolled up: its count is
// taken out of the old status, and FinishAttempts puts it in the new one
// (Finish.Retried, countRetried). On a day not rolled up the roll-up
// waits for the row to be final again (RollupDay refuses the day till
// then), and retention never deletes a row that is not final.
//
// It returns the row as the update left it; an unknown execution wraps
// ErrNotFound.
func (s *Store) RetryExecution(ctx context.Context, id, nowMs int64) (Execution, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var e Execution
	err := s.rowTx(ctx, func(tx *gorm.DB) error {
		found, err := takeOne(tx.Where("id = ?", id), &e)
		switch {
		case err != nil:
			return err
		case !found:
			return notFound("execution %d", id)
		case e.Status != StatusFailed && e.Status != StatusTimedOut:
			return fmt.Errorf("%w: execution %d is %s: want failed or timed_out", ErrNotRetryable, id, e.Status)
		}
		var taskStatus []string
		if err := tx.Raw("SELECT status FROM xtimer_tasks WHERE app = ? AND code = ?", e.App, e.TaskCode).Scan(&taskStatus).Error; err != nil {
			return err
		}
		switch {
		case len(taskStatus) == 0:
			return fmt.Errorf("%w: execution %d: task %q does not exist", ErrNotRetryable, id, e.TaskCode)
		case taskStatus[0] != TaskActive:
			return fmt.Errorf("%w: execution %d: task %q is %s", ErrNotRetryable, id, e.TaskCode, taskStatus[0])
		}
		res := tx.Model(&Execution{}).Where("id = ? AND status = ? AND attempt = ?", id, e.Status, e.Attempt).
			UpdateColumns(map[string]any{"status": StatusRetrying, "reason": ReasonRetried, "next_attempt_ms": nowMs,
				"max_attempts": e.Attempt + 1, "cancel_ms": 0, "updated_ms": s.nowMs()})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return fmt.Errorf("%w: execution %d changed meanwhile: retried or deleted elsewhere", ErrNotRetryable, id)
		}
		// Its final attempt is on the row, which the next attempt takes:
		// it is kept in xtimer_attempts (attempts.go).
		var timedOut []int64
		if e.Status == StatusTimedOut {
			timedOut = []int64{id}
		}
		if err := insertAttempts(tx, []int64{id}, timedOut); err != nil {
			return err
		}
		old := e.Status
		e.Status, e.Reason, e.NextAttemptMs, e.MaxAttempts, e.CancelMs = StatusRetrying, ReasonRetried, nowMs, e.Attempt+1, 0
		return s.uncount(tx, e, old)
	})
	if err != nil {
		return Execution{}, fmt.Errorf("store: retry execution %d: %w", id, err)
	}
	return e, nil
}

// uncount takes e, which left its final status old, out of its day's
// roll-up, if the day was rolled up.
func (s *Store) uncount(tx *gorm.DB, e Execution, old string) error {
	if s.noRollups {
		return nil
	}
	day := DayOf(e.RunTime)
	if _, ok, err := marker(tx, e.App, day); err != nil || !ok {
		return err
	}
	return tx.Exec("UPDATE xtimer_rollups SET count = count - 1 WHERE app = ? AND task_code = ? AND day = ? AND status = ? AND count > 0",
		e.App, e.TaskCode, day, old).Error
}

// countRetried adds the executions ids, retried by hand and final again
// in tx, to the counts of their days that are rolled up (the others count
// them when they roll up, or when they delete them).
func (s *Store) countRetried(tx *gorm.DB, ids []int64) error {
	if s.noRollups || len(ids) == 0 {
		return nil
	}
	var rows []struct {
		App      string
		TaskCode string
		RunTime  int64
		Status   string
	}
	if err := tx.Raw("SELECT app, task_code, run_time, status FROM xtimer_executions WHERE id IN ?", ids).Scan(&rows).Error; err != nil {
		return fmt.Errorf("read %d retried executions: %w", len(ids), err)
	}
	sums := map[Rollup]int64{}
	for _, r := range rows {
		if !slices.Contains(FinalStatuses, r.Status) {
			continue
		}
		sums[Rollup{App: r.App, TaskCode: r.TaskCode, Day: DayOf(r.RunTime), Status: r.Status}]++
	}
	var add []Rollup
	for k, n := range sums {
		if _, ok, err := marker(tx, k.App, k.Day); err != nil {
			return err
		} else if ok {
			k.Count = n
			add = append(add, k)
		}
	}
	slices.SortFunc(add, compareRollups)
	return s.addCounts(tx, add)
}
