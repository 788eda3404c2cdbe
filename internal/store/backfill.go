package store

import (
	"context"
	"fmt"
)

// BackfillState counts, anywhere in the fleet, the backfilled fires
// (SourceBackfill) of task code that are going (started, running, or
// waiting for a retry) and those due before runTime that wait to start,
// leaving the fire with ID self out of both. A backfilled fire starts only
// when both are 0: that is what runs a task's backfill one fire at a time,
// in run-time order, whichever replicas own its rows. The task's other
// fires do not count, nor do backfilled fires count for them
// (OverlapState).
func (s *Store) BackfillState(ctx context.Context, app, code string, runTime, self int64) (Overlap, error) {
	return s.overlapState(ctx, app, code, runTime, self, -1, "=")
}

// RunTimesIn returns the run times (Unix ms) of the executions of task
// code in [fromMs, toMs), in order: the fires of a range that have a row
// already, whatever made it; each once, a sharded fire by its shard 0.
func (s *Store) RunTimesIn(ctx context.Context, app, code string, fromMs, toMs int64) ([]int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []int64
	err := s.db.WithContext(ctx).Model(&Execution{}).
		Where("app = ? AND task_code = ? AND run_time >= ? AND run_time < ? AND shard = 0", app, code, fromMs, toMs).
		Order("run_time").Pluck("run_time", &out).Error
	if err != nil {
		return nil, fmt.Errorf("store: read run times of task %q: %w", code, err)
	}
	return out, nil
}
