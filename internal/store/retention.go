package store

import (
	"context"
	"errors"
	"fmt"
	"math"

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

// DeleteExecutionsBefore deletes up to limit final executions of app
// whose run_time is in [fromMs, beforeMs), oldest first, and returns how
// many it deleted and the run_time of the newest of them. Fewer than limit
// means none is left in the range.
//
// A sweep passes lastMs back as the next call's fromMs: each batch then
// starts where the previous one stopped, instead of reading again, from
// the start of the range, the index entries of the rows already deleted
// (dead until vacuum on PostgreSQL, purged later on InnoDB) and of the
// non-final rows it passed. Without that cursor each batch read more dead
// entries than the one before and the sweep slowed as it went (docs/configuration.md
// has the figures, from internal/pagingbench -retention). fromMs is
// inclusive: rows of that run_time the previous batch left (more rows than
// limit at one instant) are not skipped. Pass math.MinInt64 to start at
// the oldest.
func (s *Store) DeleteExecutionsBefore(ctx context.Context, app string, fromMs, beforeMs int64, limit int) (n, lastMs int64, err error) {
	if limit < 1 {
		return 0, 0, fmt.Errorf("store: delete executions: limit %d: want at least 1", limit)
	}
	n, lastMs, err = s.deleteFinal(ctx, "app = ? AND run_time < ?", []any{app, beforeMs}, fromMs, limit)
	if err != nil {
		return 0, 0, fmt.Errorf("store: delete executions of %q from %d before %d: %w", app, fromMs, beforeMs, err)
	}
	return n, lastMs, nil
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
	// The keep-th newest (run_time, shard), read along
	// xtimer_executions_shard (app, task_code, run_time, shard): the pair
	// is unique per task, so exactly keep rows are at or after it, however
	// many shards a fire has.
	var cut []struct {
		RunTime int64
		Shard   int
	}
	err := s.db.WithContext(ctx).Raw(
		"SELECT run_time, shard FROM xtimer_executions WHERE app = ? AND task_code = ? ORDER BY run_time DESC, shard DESC LIMIT 1 OFFSET ?",
		app, code, keep-1).Scan(&cut).Error
	if err != nil {
		return 0, fmt.Errorf("store: delete executions of %q/%q beyond %d: %w", app, code, keep, err)
	}
	if len(cut) == 0 {
		return 0, nil // keep rows or fewer
	}
	n, _, err := s.deleteFinal(ctx, "app = ? AND task_code = ? AND (run_time < ? OR (run_time = ? AND shard < ?))",
		[]any{app, code, cut[0].RunTime, cut[0].RunTime, cut[0].Shard}, math.MinInt64, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete executions of %q/%q beyond %d: %w", app, code, keep, err)
	}
	return n, nil
}

// deleteFinal deletes up to limit final executions matching where (whose
// first argument is the app) and run_time >= fromMs, in run_time order,
// along the (app, run_time) or (app, task_code, run_time) index, and counts
// them in their days' roll-ups (rollup.go) and deletes their attempts
// (attempts.go) in the same transaction. It
// returns how many it deleted and the greatest run_time among them.
// PostgreSQL and SQLite delete the ids a limited sub-select picks and
// return the rows. MySQL has no RETURNING: the transaction reads the batch
// FOR UPDATE, then deletes the same rows, which the read locked, by id.
func (s *Store) deleteFinal(ctx context.Context, where string, args []any, fromMs int64, limit int) (n, lastMs int64, err error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	app := args[0].(string)
	pick := "SELECT %s FROM xtimer_executions WHERE " + where + " AND run_time >= ? AND status IN ? ORDER BY run_time LIMIT ?"
	args = append(args, fromMs, FinalStatuses, limit)
	mysql := s.db.Dialector.Name() == "mysql"
	err = s.tx(ctx, func(tx *gorm.DB) error {
		var rows []deletedRow
		n, lastMs = 0, 0
		if !mysql {
			// status again outside the sub-select: a row that left its
			// final status meanwhile (Retry) is rechecked and kept.
			sql := "DELETE FROM xtimer_executions WHERE id IN (" + fmt.Sprintf(pick, "id") + ") AND status IN ? RETURNING id, task_code, run_time, status"
			if err = tx.Raw(sql, append(args, FinalStatuses)...).Scan(&rows).Error; err != nil {
				return err
			}
		} else {
			if err = tx.Raw(fmt.Sprintf(pick, "id, task_code, run_time, status")+" FOR UPDATE", args...).Scan(&rows).Error; err != nil {
				return err
			}
			if len(rows) == 0 {
				return nil
			}
			// By id, not by range: the shards of a fire share its run time,
			// and a range could end inside a fire other than where the read
			// did.
			ids := make([]int64, len(rows))
			for i, r := range rows {
				ids[i] = r.ID
			}
			res := tx.Exec("DELETE FROM xtimer_executions WHERE id IN ? AND status IN ?", ids, FinalStatuses)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != int64(len(rows)) {
				return fmt.Errorf("deleted %d rows, but read %d", res.RowsAffected, len(rows))
			}
		}
		if n = int64(len(rows)); n == 0 {
			return nil
		}
		lastMs = rows[0].RunTime
		ids := make([]int64, len(rows))
		for i, r := range rows {
			lastMs = max(lastMs, r.RunTime)
			ids[i] = r.ID
		}
		if err = deleteAttempts(tx, ids); err != nil {
			return err
		}
		return s.countDeleted(tx, app, rows)
	})
	return n, lastMs, err
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
