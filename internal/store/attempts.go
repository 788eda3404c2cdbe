package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Attempt is one attempt of an execution and how it ended.
//
// An execution's row holds its last attempt: the one running, or the one
// whose result made it final. xtimer_attempts holds the attempts before
// it, copied from the row when another is to take its place there:
// FinishAttempts (and MarkRunning, for a first attempt that ended before
// its start was written) copies an attempt whose row goes on to retrying,
// in the transaction that records its result; RetryExecution copies the
// final attempt of the row it retries by hand. Attempts reads the table
// and then the row, so every attempt that ended is kept, not only the
// last, and a fire that ends at its first attempt (almost every fire)
// writes no row here. deleteFinal deletes an execution's attempts with
// it. A row of the table never changes after it is written.
//
// Status is the attempt's own outcome: succeeded, failed or timed_out (an
// attempt that was retried ended failed or timed_out, while its row went
// on to retrying).
type Attempt struct {
	App         string `gorm:"column:app;size:64;not null"`
	ExecutionID int64  `gorm:"column:execution_id;primaryKey;autoIncrement:false"`
	Attempt     int    `gorm:"column:attempt;primaryKey;autoIncrement:false"`
	Replica     string `gorm:"column:replica;size:128;not null;default:''"`
	StartedMs   int64  `gorm:"column:started_ms;not null;default:0"`
	FinishedMs  int64  `gorm:"column:finished_ms;not null;default:0"`
	DurationMs  int64  `gorm:"column:duration_ms;not null;default:0"`
	Status      string `gorm:"column:status;size:16;not null"`
	Output      string `gorm:"column:output;type:text;not null"`
	Error       string `gorm:"column:error;type:text;not null"`
	HTTPStatus  int    `gorm:"column:http_status;not null;default:0"`
}

// TableName is xtimer_attempts, whatever the caller's naming strategy.
func (Attempt) TableName() string { return "xtimer_attempts" }

// insertAttempts copies, in tx, the attempt that last ended of each
// execution of ids (rows FinishAttempts or MarkRunning has just moved to
// retrying, or RetryExecution is retrying) into xtimer_attempts: one
// statement for the batch, not one per attempt. timedOut are those of ids
// whose row is retrying after an attempt that timed out; the other
// retrying rows' attempts failed. An attempt already there (copied by an
// earlier version, which kept every attempt) is left as it is.
func insertAttempts(tx *gorm.DB, ids, timedOut []int64) error {
	if len(ids) == 0 {
		return nil
	}
	status := "CASE WHEN status <> ? THEN status ELSE ? END"
	args := []any{StatusRetrying, StatusFailed}
	if len(timedOut) > 0 {
		status = "CASE WHEN status <> ? THEN status WHEN id IN ? THEN ? ELSE ? END"
		args = []any{StatusRetrying, timedOut, StatusTimedOut, StatusFailed}
	}
	sql := `INSERT INTO xtimer_attempts (app, execution_id, attempt, replica, started_ms, finished_ms, duration_ms,
		status, output, error, http_status)
		SELECT app, id, attempt, replica, started_ms, finished_ms, duration_ms, ` + status + `, output, error, http_status
		FROM xtimer_executions WHERE id IN ?`
	switch tx.Dialector.Name() {
	case "mysql":
		sql += " ON DUPLICATE KEY UPDATE attempt = xtimer_attempts.attempt"
	case "sqlite":
	default: // the WHERE tells SQLite's parser that ON starts the upsert
		sql += " ON CONFLICT DO NOTHING"
	}
	if err := tx.Exec(sql, append(args, ids)...).Error; err != nil {
		return fmt.Errorf("record %d attempts: %w", len(ids), err)
	}
	return nil
}

// Attempts returns execution id and its attempts that ended, in order,
// followed by the one running now, if any (Status running, from the
// execution's row). An unknown execution is an error wrapping ErrNotFound.
func (s *Store) Attempts(ctx context.Context, id int64) (Execution, []Attempt, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	// The row first, then its attempts: an attempt that ends between the
	// two reads shows once, as ended.
	var e Execution
	db := s.db.WithContext(ctx)
	found, err := takeOne(db.Where("id = ?", id), &e)
	if err != nil {
		return Execution{}, nil, fmt.Errorf("store: read the attempts of execution %d: %w", id, err)
	}
	if !found {
		return Execution{}, nil, notFound("execution %d", id)
	}
	var out []Attempt
	if err := db.Where("execution_id = ?", id).Order("attempt").Find(&out).Error; err != nil {
		return Execution{}, nil, fmt.Errorf("store: read the attempts of execution %d: %w", id, err)
	}
	if len(out) > 0 && out[len(out)-1].Attempt >= e.Attempt {
		return e, out, nil // the row's attempt was copied: retrying, or cancelled while it waited
	}
	// The row's own attempt: the one running, or the final one.
	own := Attempt{App: e.App, ExecutionID: e.ID, Attempt: e.Attempt, Replica: e.Replica,
		StartedMs: e.StartedMs, Status: e.Status}
	switch e.Status {
	case StatusRunning:
		out = append(out, own)
	case StatusSucceeded, StatusFailed, StatusTimedOut:
		if e.Attempt > 0 {
			own.FinishedMs, own.DurationMs, own.Output, own.Error, own.HTTPStatus =
				e.FinishedMs, e.DurationMs, e.Output, e.Error, e.HTTPStatus
			out = append(out, own)
		}
	}
	return e, out, nil
}

// deleteAttempts deletes, in tx, the attempts of the executions ids.
func deleteAttempts(tx *gorm.DB, ids []int64) error {
	for from := 0; from < len(ids); from += insertChunk {
		chunk := ids[from:min(from+insertChunk, len(ids))]
		if err := tx.Exec("DELETE FROM xtimer_attempts WHERE execution_id IN ?", chunk).Error; err != nil {
			return fmt.Errorf("delete the attempts of %d executions: %w", len(chunk), err)
		}
	}
	return nil
}

// recordsAttempt tells whether recordAttempts has anything to write for
// f: an attempt its row goes on to retrying from, or the end of a retry by
// hand.
func (f Finish) recordsAttempt() bool { return f.Status == StatusRetrying || f.Retried }

// recordAttempts keeps, in tx, the attempts of the finishes recorded
// (those whose oks is true; nil oks: all) that their rows went on to
// retrying from, and counts the new final statuses of executions retried
// by hand in their days' roll-ups. A final attempt stays on its row.
func (s *Store) recordAttempts(tx *gorm.DB, finishes []Finish, oks []bool) error {
	var ids, timedOut, retried []int64
	for i, f := range finishes {
		if oks != nil && !oks[i] || !f.recordsAttempt() {
			continue
		}
		if f.Status == StatusRetrying {
			ids = append(ids, f.ID)
			if f.TimedOut {
				timedOut = append(timedOut, f.ID)
			}
		}
		if f.Retried && f.Status != StatusRetrying {
			retried = append(retried, f.ID)
		}
	}
	if err := insertAttempts(tx, ids, timedOut); err != nil {
		return err
	}
	return s.countRetried(tx, retried)
}
