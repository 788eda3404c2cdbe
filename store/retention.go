package store

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// Retention deletes old rows in bounded batches: each call deletes at most
// limit rows in one short statement (its own transaction), so that the
// engine's writes to the same table interleave with a sweep of millions of
// rows instead of waiting behind one giant DELETE. Only final executions
// (FinalStatuses) are ever deleted: a scheduled, running or retrying row is
// still the engine's, however old.

// FinalStatuses are the statuses an execution never leaves.
var FinalStatuses = []string{StatusSucceeded, StatusFailed, StatusTimedOut, StatusSkipped}

// DeleteExecutionsBefore deletes up to limit final executions of app whose
// run_time is before beforeMs, oldest first, and returns how many it
// deleted. Fewer than limit means none is left.
func (s *Store) DeleteExecutionsBefore(ctx context.Context, app string, beforeMs int64, limit int) (int64, error) {
	if limit < 1 {
		return 0, fmt.Errorf("store: delete executions: limit %d: want at least 1", limit)
	}
	n, err := s.deleteFinal(ctx, "app = ? AND run_time < ?", []any{app, beforeMs}, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete executions of %q before %d: %w", app, beforeMs, err)
	}
	return n, nil
}

// DeleteBeyondCount keeps the keep newest executions of a task (by
// run_time, whatever their status) and deletes up to limit of the final
// executions older than those, oldest first. It returns how many it
// deleted; fewer than limit means none is left. Non-final rows past the
// keep newest stay.
func (s *Store) DeleteBeyondCount(ctx context.Context, app, code string, keep, limit int) (int64, error) {
	if keep < 1 || limit < 1 {
		return 0, fmt.Errorf("store: delete executions beyond count: keep %d, limit %d: want at least 1", keep, limit)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	// The keep-th newest run_time, read along xtimer_executions_fire
	// (app, task_code, run_time): run times are unique per task, so exactly
	// keep rows are at or after it.
	var cut []int64
	err := s.db.WithContext(ctx).Raw(
		"SELECT run_time FROM xtimer_executions WHERE app = ? AND task_code = ? ORDER BY run_time DESC LIMIT 1 OFFSET ?",
		app, code, keep-1).Scan(&cut).Error
	if err != nil {
		return 0, fmt.Errorf("store: delete executions of %q/%q beyond %d: %w", app, code, keep, err)
	}
	if len(cut) == 0 {
		return 0, nil // keep rows or fewer
	}
	n, err := s.deleteFinal(ctx, "app = ? AND task_code = ? AND run_time < ?", []any{app, code, cut[0]}, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete executions of %q/%q beyond %d: %w", app, code, keep, err)
	}
	return n, nil
}

// deleteFinal deletes up to limit final executions matching where, in
// run_time order. MySQL/MariaDB take ORDER BY and LIMIT on DELETE and walk
// the (app, run_time) or (app, task_code, run_time) index; PostgreSQL and
// SQLite do not, and delete the ids a limited sub-select picks along the
// same index.
func (s *Store) deleteFinal(ctx context.Context, where string, args []any, limit int) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	args = append(args, FinalStatuses, limit)
	sql := "DELETE FROM xtimer_executions WHERE id IN (SELECT id FROM xtimer_executions WHERE " + where +
		" AND status IN ? ORDER BY run_time LIMIT ?)"
	if s.db.Dialector.Name() == "mysql" {
		sql = "DELETE FROM xtimer_executions WHERE " + where + " AND status IN ? ORDER BY run_time LIMIT ?"
	}
	var n int64
	err := s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(sql, args...)
		n = res.RowsAffected
		return res.Error
	})
	return n, err
}

// DeleteSlotsBefore deletes up to limit rows of xtimer_slots of app whose
// minute starts before beforeMs, oldest first, and returns how many it
// deleted. Slots are read only by the catch-up at Start, within
// CatchUpHorizon; older ones are of no use.
func (s *Store) DeleteSlotsBefore(ctx context.Context, app string, beforeMs int64, limit int) (int64, error) {
	if limit < 1 {
		return 0, errors.New("store: delete slots: limit must be at least 1")
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	before := MinuteOf(beforeMs)
	sql := "DELETE FROM xtimer_slots WHERE (app, minute, bucket) IN (SELECT app, minute, bucket FROM xtimer_slots WHERE app = ? AND minute < ? ORDER BY minute LIMIT ?)"
	if s.db.Dialector.Name() == "mysql" {
		sql = "DELETE FROM xtimer_slots WHERE app = ? AND minute < ? ORDER BY minute LIMIT ?"
	}
	var n int64
	err := s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(sql, app, before, limit)
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return 0, fmt.Errorf("store: delete slots of %q before minute %d: %w", app, before, err)
	}
	return n, nil
}
