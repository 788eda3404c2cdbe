package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// This file holds the console's reads of sharded and broadcast fires as a
// whole (docs/architecture.md, "Sharded and broadcast fires"): the
// listings show such a fire as one line, on the row of its first shard in
// the listing's order, with the progress of all its shards.

// FireKey names one fire; the rows of its shards share it.
type FireKey struct {
	App      string
	TaskCode string
	RunTime  int64
}

// Fire is the fire the row records, or the fire the shard is part of.
func (e Execution) Fire() FireKey {
	return FireKey{App: e.App, TaskCode: e.TaskCode, RunTime: e.RunTime}
}

// FireSummary counts the rows of one fire by status.
type FireSummary struct {
	FireKey
	// Rows is how many rows the fire has: its shards, unless the per-task
	// retention cap deleted some.
	Rows int
	// Shards is the largest Shards among the rows.
	Shards int
	// Broadcast is set when any row is a broadcast shard.
	Broadcast bool
	// Counts are the rows by status.
	Counts map[string]int
	// StartedMs is the earliest start among the rows and FinishedMs the
	// latest finish, Unix ms; 0 when none started, or none finished.
	StartedMs  int64
	FinishedMs int64
}

// fireChunk bounds the fires one statement names: each takes three
// placeholders.
const fireChunk = 200

// FireSummaries returns the summary of each of the fires keys, which
// have at least one row. It reads the unique (app, task_code, run_time,
// shard) index, one range per fire.
func (s *Store) FireSummaries(ctx context.Context, keys []FireKey) (map[FireKey]FireSummary, error) {
	out := make(map[FireKey]FireSummary, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	type group struct {
		App        string
		TaskCode   string
		RunTime    int64
		Status     string
		N          int
		Shards     int
		Broadcast  int
		StartedMs  int64
		FinishedMs int64
	}
	for from := 0; from < len(keys); from += fireChunk {
		var groups []group
		// broadcast is summed as 0 or 1 because MAX of a boolean is not
		// portable (PostgreSQL has no max(boolean)).
		err := s.db.WithContext(ctx).Model(&Execution{}).
			Select("app, task_code, run_time, status, COUNT(*) AS n, MAX(shards) AS shards, " +
				"SUM(CASE WHEN broadcast THEN 1 ELSE 0 END) AS broadcast, " +
				"COALESCE(MIN(CASE WHEN started_ms > 0 THEN started_ms END), 0) AS started_ms, MAX(finished_ms) AS finished_ms").
			Where(firesWhere(s.db, keys[from:min(from+fireChunk, len(keys))])).
			Group("app, task_code, run_time, status").Scan(&groups).Error
		if err != nil {
			return nil, fmt.Errorf("store: summarize %d fires: %w", len(keys), err)
		}
		for _, g := range groups {
			k := FireKey{App: g.App, TaskCode: g.TaskCode, RunTime: g.RunTime}
			sum, ok := out[k]
			if !ok {
				sum = FireSummary{FireKey: k, Counts: map[string]int{}}
			}
			sum.Rows += g.N
			sum.Counts[g.Status] += g.N
			sum.Shards = max(sum.Shards, g.Shards)
			sum.Broadcast = sum.Broadcast || g.Broadcast > 0
			if g.StartedMs > 0 && (sum.StartedMs == 0 || g.StartedMs < sum.StartedMs) {
				sum.StartedMs = g.StartedMs
			}
			sum.FinishedMs = max(sum.FinishedMs, g.FinishedMs)
			out[k] = sum
		}
	}
	return out, nil
}

// firesWhere is the condition that selects the rows of keys.
func firesWhere(db *gorm.DB, keys []FireKey) *gorm.DB {
	cond := db.Session(&gorm.Session{NewDB: true})
	for i, k := range keys {
		if i == 0 {
			cond = cond.Where("app = ? AND task_code = ? AND run_time = ?", k.App, k.TaskCode, k.RunTime)
		} else {
			cond = cond.Or("app = ? AND task_code = ? AND run_time = ?", k.App, k.TaskCode, k.RunTime)
		}
	}
	return cond
}

// FireShards returns every row of fire k in shard order: the shards of a
// sharded or broadcast fire, or the one row of another.
func (s *Store) FireShards(ctx context.Context, k FireKey) ([]Execution, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []Execution
	err := s.db.WithContext(ctx).Where("app = ? AND task_code = ? AND run_time = ?", k.App, k.TaskCode, k.RunTime).
		Order("shard").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("store: read the shards of %s/%s/%d: %w", k.App, k.TaskCode, k.RunTime, err)
	}
	return out, nil
}

// FiresListedBefore answers, for the fires at the cursor's run time of
// the tasks codes, whether ListExecutions(f) lists a row of the fire at
// or before the cursor after (the last row of the previous page): an
// earlier page showed such a fire, so the page that starts at after
// leaves out its rows. It returns the codes of those fires.
func (s *Store) FiresListedBefore(ctx context.Context, f ExecutionFilter, after Cursor, codes []string) (map[string]bool, error) {
	out := map[string]bool{}
	if after == (Cursor{}) || len(codes) == 0 {
		return out, nil
	}
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("store: fires listed before %s: %w", after, err)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	for from := 0; from < len(codes); from += insertChunk {
		q := s.db.WithContext(ctx).Model(&Execution{}).
			Where("app = ? AND run_time = ? AND task_code IN ?", f.App, after.RunTime, codes[from:min(from+insertChunk, len(codes))])
		q = f.matchRow(q)
		// The listing's order: (run_time, shard) within a task, else
		// (run_time, id); newest first, so "before" is greater, and the
		// cursor is the previous page's last row.
		if f.TaskCode != "" {
			q = q.Where("shard >= ?", after.Shard)
		} else {
			q = q.Where("id >= ?", after.ID)
		}
		var shown []string
		if err := q.Distinct("task_code").Pluck("task_code", &shown).Error; err != nil {
			return nil, fmt.Errorf("store: fires of app %q listed before %s: %w", f.App, after, err)
		}
		for _, c := range shown {
			out[c] = true
		}
	}
	return out, nil
}

// matchRow adds the conditions of f that a row of a fire may meet or not
// on its own (task, status, source, replica): ListExecutions' filter, and
// the one that tells which rows of a fire a listing shows; the run time
// bounds are the caller's.
func (f ExecutionFilter) matchRow(q *gorm.DB) *gorm.DB {
	if f.TaskCode != "" {
		q = q.Where("task_code = ?", f.TaskCode)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Source != "" {
		q = q.Where("source = ?", f.Source)
	}
	if f.Replica != "" {
		q = q.Where("replica = ?", f.Replica)
	}
	return q
}
