package store

import (
	"fmt"

	"context"

	"gorm.io/gorm"
)

// Start is one item of MarkStarted.
type Start struct {
	ID        int64
	Replica   string
	StartedMs int64
	// Finish, when set, is how the attempt already ended: the start and the
	// end are written in one update (a fast handler's whole life fits in
	// one batch, and halving the writes keeps the database out of the way).
	Finish *Result
}

// MarkStarted records first attempts that the replica which recorded them
// started on time without waiting for the database (record-then-run: the
// row exists before the handler starts; only its status is written later,
// batched). Each update is conditional on the row still being scheduled,
// at attempt 0, and owned by Start.Replica, so it cannot overwrite a rescue
// by another replica. oks[i] is false when that happened: the fire then ran
// twice, which the caller must report loudly.
func (s *Store) MarkStarted(ctx context.Context, starts []Start) (oks []bool, err error) {
	sets := make([]map[string]any, len(starts))
	for i, st := range starts {
		set := map[string]any{"status": StatusRunning, "started_ms": st.StartedMs}
		if st.Finish != nil {
			if set, err = s.finishSet(Finish{ID: st.ID, Attempt: 1, Result: *st.Finish}); err != nil {
				return nil, err
			}
			set["started_ms"] = st.StartedMs
			set["duration_ms"] = st.Finish.FinishedMs - st.StartedMs
		}
		set["attempt"] = 1
		set["lateness_ms"] = gorm.Expr("? - run_time", st.StartedMs)
		set["updated_ms"] = s.nowMs()
		sets[i] = set
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err = s.tx(ctx, func(tx *gorm.DB) error {
		oks = make([]bool, len(starts))
		for i, st := range starts {
			res := tx.Model(&Execution{}).
				Where("id = ? AND status = ? AND attempt = 0 AND replica = ?", st.ID, StatusScheduled, st.Replica).
				UpdateColumns(sets[i])
			if res.Error != nil {
				return fmt.Errorf("store: mark execution %d started: %w", st.ID, res.Error)
			}
			oks[i] = res.RowsAffected == 1
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return oks, nil
}

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
