package store

import (
	"fmt"

	"context"

	"gorm.io/gorm"
)

// ClaimFires hands replica the scheduled first attempts it should run
// although it did not record them: rows nobody owns (replica "": manual
// runs, fires whose recorder lacked the handler or stopped) due at dueMs,
// and rows whose owner is not in live and whose run time is older than
// orphanBeforeMs (the owner died between recording and running). Only
// tasks in codes (those replica has handlers for) are claimed. Each claim
// is a conditional update on the owner read, so two claimants never both
// win; the rows returned are the ones replica now owns.
func (s *Store) ClaimFires(ctx context.Context, app, replica string, codes, live []string, dueMs, orphanBeforeMs int64, limit int) ([]Execution, error) {
	if len(codes) == 0 {
		return nil, nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.db.WithContext(ctx).Where("app = ? AND status = ? AND attempt = 0 AND task_code IN ?", app, StatusScheduled, codes)
	orphan := s.db.Where("run_time <= ?", orphanBeforeMs)
	if len(live) > 0 {
		orphan = orphan.Where("replica NOT IN ?", live)
	}
	q = q.Where(s.db.Where("replica = '' AND run_time <= ?", dueMs).Or(orphan))
	var candidates []Execution
	if err := q.Order("run_time, id").Limit(limit).Find(&candidates).Error; err != nil {
		return nil, fmt.Errorf("store: read claimable fires of app %q: %w", app, err)
	}
	var mine []Execution
	for _, c := range candidates {
		res := s.db.WithContext(ctx).Model(&Execution{}).
			Where("id = ? AND status = ? AND attempt = 0 AND replica = ?", c.ID, StatusScheduled, c.Replica).
			UpdateColumns(map[string]any{"replica": replica, "updated_ms": s.nowMs()})
		if res.Error != nil {
			return mine, fmt.Errorf("store: claim execution %d: %w", c.ID, res.Error)
		}
		if res.RowsAffected == 1 {
			c.Replica = replica
			mine = append(mine, c)
		}
	}
	return mine, nil
}

// ReleaseFires gives up the scheduled first attempts replica recorded but
// has not started (a graceful stop), so that another replica claims them
// with ClaimFires when they are due. It returns how many it released.
func (s *Store) ReleaseFires(ctx context.Context, app, replica string) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var n int64
	err := s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Execution{}).
			Where("app = ? AND replica = ? AND status = ? AND attempt = 0", app, replica, StatusScheduled).
			UpdateColumns(map[string]any{"replica": "", "updated_ms": s.nowMs()})
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return 0, fmt.Errorf("store: release fires of replica %q: %w", replica, err)
	}
	return n, nil
}

// ScheduledRuns counts the fires of one task that its schedule created
// (sources schedule and catchup, skipped ones included), for WithMaxRuns.
func (s *Store) ScheduledRuns(ctx context.Context, app, code string) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var n int64
	err := s.db.WithContext(ctx).Model(&Execution{}).
		Where("app = ? AND task_code = ? AND source IN ? AND status <> ?", app, code, []string{SourceSchedule, SourceCatchup}, StatusSkipped).
		Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("store: count runs of task %q: %w", code, err)
	}
	return n, nil
}

// StartFires marks the first attempts of the given executions running for
// replica, in one round trip, and returns the IDs it started. Each row
// starts only if it is still scheduled, at attempt 0, and owned by replica:
// a fire another replica took over (TakeOverFires, ClaimFires) or already
// started is left alone, so a replica that slept past its lock can never
// start what another one runs. This is the fence of the fire path: a
// handler starts only after its row says running for its replica.
func (s *Store) StartFires(ctx context.Context, app string, ids []int64, replica string, startedMs int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	claim, err := nonce()
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var started []int64
	if name := s.db.Dialector.Name(); name == "postgres" || name == "sqlite" {
		// One statement, one round trip: this is on the fire path.
		for from := 0; from < len(ids); from += insertChunk {
			var got []int64
			err := s.db.WithContext(ctx).Raw(`UPDATE xtimer_executions SET lateness_ms = ? - run_time, status = ?, attempt = 1,
				started_ms = ?, claim = ?, updated_ms = ?
				WHERE app = ? AND id IN ? AND status = ? AND attempt = 0 AND replica = ? RETURNING id`,
				startedMs, StatusRunning, startedMs, claim, s.nowMs(),
				app, ids[from:min(from+insertChunk, len(ids))], StatusScheduled, replica).Scan(&got).Error
			if err != nil {
				return started, fmt.Errorf("store: start fires: %w", err)
			}
			started = append(started, got...)
		}
		return started, nil
	}
	// MySQL/MariaDB have no UPDATE ... RETURNING: the rows this call changed
	// are the ones carrying its nonce.
	err = s.tx(ctx, func(tx *gorm.DB) error {
		started = started[:0]
		for from := 0; from < len(ids); from += insertChunk {
			chunk := ids[from:min(from+insertChunk, len(ids))]
			res := tx.Model(&Execution{}).
				Where("app = ? AND id IN ? AND status = ? AND attempt = 0 AND replica = ?", app, chunk, StatusScheduled, replica).
				UpdateColumns(map[string]any{
					"lateness_ms": gorm.Expr("? - run_time", startedMs), "status": StatusRunning, "attempt": 1,
					"started_ms": startedMs, "claim": claim, "updated_ms": s.nowMs(),
				})
			if res.Error != nil {
				return fmt.Errorf("store: start fires: %w", res.Error)
			}
			if res.RowsAffected == 0 {
				continue
			}
			var got []int64
			if err := tx.Model(&Execution{}).Where("app = ? AND id IN ? AND claim = ? AND status = ?", app, chunk, claim, StatusRunning).
				Pluck("id", &got).Error; err != nil {
				return fmt.Errorf("store: read started fires: %w", err)
			}
			started = append(started, got...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return started, nil
}

// TakeOverFires gives replica the scheduled first attempts of one slot
// (tasks codes, run times in [fromMs, toMs)) that another replica recorded:
// the caller has just won the slot's lock after its owner stopped
// refreshing it (killed, frozen, cut off). The old owner can no longer
// start them: StartFires checks the owner.
func (s *Store) TakeOverFires(ctx context.Context, app string, codes []string, fromMs, toMs int64, replica string) ([]Execution, error) {
	if len(codes) == 0 {
		return nil, nil
	}
	claim, err := nonce()
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var rows []Execution
	err = s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Execution{}).
			Where("app = ? AND task_code IN ? AND run_time >= ? AND run_time < ? AND status = ? AND attempt = 0 AND replica <> ?",
				app, codes, fromMs, toMs, StatusScheduled, replica).
			UpdateColumns(map[string]any{"replica": replica, "claim": claim, "updated_ms": s.nowMs()})
		if res.Error != nil {
			return fmt.Errorf("store: take over fires: %w", res.Error)
		}
		rows = nil
		if res.RowsAffected == 0 {
			return nil
		}
		if err := tx.Where("app = ? AND task_code IN ? AND run_time >= ? AND run_time < ? AND claim = ?", app, codes, fromMs, toMs, claim).
			Order("run_time, id").Find(&rows).Error; err != nil {
			return fmt.Errorf("store: read taken-over fires: %w", err)
		}
		return nil
	})
	return rows, err
}

// SkipFire settles a first attempt that will not run (paused, overlap,
// misfire) as skipped with reason, if the row is still scheduled, at
// attempt 0, and owned by replica: a fire taken over meanwhile is left to
// its new owner. It reports whether it did.
func (s *Store) SkipFire(ctx context.Context, id int64, replica, reason string, atMs int64) (bool, error) {
	if reason == "" || len(reason) > 64 {
		return false, fmt.Errorf("store: skip execution %d: reason %q: want 1 to 64 bytes", id, reason)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	res := s.db.WithContext(ctx).Model(&Execution{}).
		Where("id = ? AND status = ? AND attempt = 0 AND replica = ?", id, StatusScheduled, replica).
		UpdateColumns(map[string]any{"status": StatusSkipped, "reason": reason, "finished_ms": atMs, "updated_ms": s.nowMs()})
	if res.Error != nil {
		return false, fmt.Errorf("store: skip execution %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}
