package store

import (
	"context"
	"fmt"
)

// DefaultListLimit and MaxListLimit bound a page of ListExecutions.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// ExecutionFilter selects executions for the console. App is required;
// zero fields do not filter.
type ExecutionFilter struct {
	App      string
	TaskCode string
	Status   string
	// FromMs <= run_time < ToMs, each bound ignored when 0.
	FromMs int64
	ToMs   int64
}

// Cursor marks a position in a listing ordered by (run_time, id)
// descending. The zero Cursor is the start: the newest execution.
type Cursor struct {
	RunTime int64
	ID      int64
}

// ListExecutions returns one page of executions matching f, newest run_time
// first (ties by id), strictly after the cursor, and the cursor of the next
// page, which is zero when this page is the last. limit 0 means
// DefaultListLimit; more than MaxListLimit is cut to it. Keyset paging keeps
// pages stable while new rows arrive.
func (s *Store) ListExecutions(ctx context.Context, f ExecutionFilter, after Cursor, limit int) ([]Execution, Cursor, error) {
	if f.App == "" {
		return nil, Cursor{}, fmt.Errorf("store: list executions: app is required")
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.db.WithContext(ctx).Where("app = ?", f.App)
	if f.TaskCode != "" {
		q = q.Where("task_code = ?", f.TaskCode)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.FromMs != 0 {
		q = q.Where("run_time >= ?", f.FromMs)
	}
	if f.ToMs != 0 {
		q = q.Where("run_time < ?", f.ToMs)
	}
	if after != (Cursor{}) {
		q = q.Where("(run_time < ? OR (run_time = ? AND id < ?))", after.RunTime, after.RunTime, after.ID)
	}
	var out []Execution
	if err := q.Order("run_time DESC, id DESC").Limit(limit + 1).Find(&out).Error; err != nil {
		return nil, Cursor{}, fmt.Errorf("store: list executions of app %q: %w", f.App, err)
	}
	if len(out) <= limit {
		return out, Cursor{}, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, Cursor{RunTime: last.RunTime, ID: last.ID}, nil
}
