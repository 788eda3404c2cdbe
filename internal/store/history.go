package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultListLimit and MaxListLimit bound a page of ListExecutions and
// ListTasks.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// statuses and sources are the values ExecutionFilter accepts, in the
// order its errors list them.
var (
	statuses = []string{StatusScheduled, StatusRunning, StatusRetrying, StatusSucceeded, StatusFailed, StatusTimedOut, StatusSkipped}
	sources  = []string{SourceSchedule, SourceManual, SourceRetry, SourceCatchup}
)

// ExecutionFilter selects executions for the console. App is required;
// zero fields do not filter; the others match exactly.
type ExecutionFilter struct {
	App      string
	TaskCode string
	// Status is one of the Status* constants.
	Status string
	// Source is one of the Source* constants.
	Source string
	// Replica is the ID of the replica that owns or ran the execution.
	Replica string
	// FromMs <= run_time < ToMs, each bound ignored when 0.
	FromMs int64
	ToMs   int64
}

// validate checks the values a console passes through from its URL.
func (f ExecutionFilter) validate() error {
	switch {
	case f.App == "":
		return fmt.Errorf("app is required")
	case f.Status != "" && !slices.Contains(statuses, f.Status):
		return fmt.Errorf("status %q: want one of %s", f.Status, strings.Join(statuses, ", "))
	case f.Source != "" && !slices.Contains(sources, f.Source):
		return fmt.Errorf("source %q: want one of %s", f.Source, strings.Join(sources, ", "))
	case f.FromMs != 0 && f.ToMs != 0 && f.FromMs > f.ToMs:
		return fmt.Errorf("from_ms %d is after to_ms %d", f.FromMs, f.ToMs)
	}
	return cmp.Or(validText("app", f.App), validText("task", f.TaskCode), validText("replica", f.Replica))
}

// Cursor marks a position in a listing ordered by (run_time, id)
// descending, or, within one task, by (run_time, shard) descending: the
// shards of one fire share its run time. The zero Cursor is the start:
// the newest execution.
type Cursor struct {
	RunTime int64
	ID      int64
	Shard   int
}

// String writes c as the console and Scheduler.Executions hand it out:
// "<run_time ms>.<id>", with ".<shard>" after it for a shard other than
// 0; "" for the start.
func (c Cursor) String() string {
	if c == (Cursor{}) {
		return ""
	}
	s := strconv.FormatInt(c.RunTime, 10) + "." + strconv.FormatInt(c.ID, 10)
	if c.Shard != 0 {
		s += "." + strconv.Itoa(c.Shard)
	}
	return s
}

// ParseCursor reads what Cursor.String wrote; "" is the start. ok is
// false for anything else.
func ParseCursor(s string) (c Cursor, ok bool) {
	if s == "" {
		return Cursor{}, true
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Cursor{}, false
	}
	rt, err1 := strconv.ParseInt(parts[0], 10, 64)
	id, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || id <= 0 {
		return Cursor{}, false
	}
	c = Cursor{RunTime: rt, ID: id}
	if len(parts) == 3 {
		shard, err := strconv.Atoi(parts[2])
		if err != nil || shard <= 0 || shard >= MaxShards {
			return Cursor{}, false
		}
		c.Shard = shard
	}
	return c, true
}

// MaxShards bounds the shards of a fire (WithShards, and the replicas a
// broadcast fire reaches).
const MaxShards = 1024

// ListExecutions returns one page of executions matching f, newest run_time
// first (ties by id), strictly after the cursor, and the cursor of the next
// page, which is zero when this page is the last. limit 0 means
// DefaultListLimit; more than MaxListLimit is cut to it. Keyset paging keeps
// pages stable while new rows arrive, and a page deep in the history costs
// what the first one does.
//
// A page reads little more than the rows it returns, however deep, when
// its most selective filter has an index in the listing's order (see
// Execution): a task, a live status (few rows), a replica, another status,
// or else the time index, filtering the other fields on the way.
func (s *Store) ListExecutions(ctx context.Context, f ExecutionFilter, after Cursor, limit int) ([]Execution, Cursor, error) {
	if err := f.validate(); err != nil {
		return nil, Cursor{}, fmt.Errorf("store: list executions: %w", err)
	}
	limit = pageLimit(limit)
	// The index that serves f: MySQL/MariaDB are told below, PostgreSQL
	// and SQLite find it themselves.
	index, order := "xtimer_executions_time", "run_time DESC, id DESC"
	switch {
	case f.TaskCode != "":
		// (run_time, shard) is unique within a task: the listing follows
		// the unique index, and MariaDB reads it in order instead of
		// sorting every row of the task.
		index, order = "xtimer_executions_shard", "run_time DESC, shard DESC"
	case f.Status == StatusScheduled || f.Status == StatusRunning || f.Status == StatusRetrying:
		index = "xtimer_executions_status"
	case f.Replica != "":
		index = "xtimer_executions_replica_time"
	case f.Status != "":
		index = "xtimer_executions_status"
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.db.WithContext(ctx)
	if s.db.Dialector.Name() == "mysql" {
		// MariaDB otherwise reads the index's equality prefix from the
		// newest row down to the cursor (ref access, slower the deeper the
		// page) or sorts another index's rows; forced, it seeks to the
		// cursor.
		q = q.Table("xtimer_executions FORCE INDEX (" + index + ")")
	}
	q = f.matchRow(q.Where("app = ?", f.App))
	if f.FromMs != 0 {
		q = q.Where("run_time >= ?", f.FromMs)
	}
	if f.ToMs != 0 {
		q = q.Where("run_time < ?", f.ToMs)
	}
	switch {
	case after == (Cursor{}):
	case f.TaskCode != "":
		q = q.Where("run_time <= ? AND (run_time < ? OR (run_time = ? AND shard < ?))",
			after.RunTime, after.RunTime, after.RunTime, after.Shard)
	default:
		// run_time <= ? says nothing the OR does not, but only it bounds the
		// index range: without it PostgreSQL reads the index from the newest
		// row down to the cursor, slower the deeper the page.
		q = q.Where("run_time <= ? AND (run_time < ? OR (run_time = ? AND id < ?))",
			after.RunTime, after.RunTime, after.RunTime, after.ID)
	}
	var out []Execution
	if err := q.Order(order).Limit(limit + 1).Find(&out).Error; err != nil {
		return nil, Cursor{}, fmt.Errorf("store: list executions of app %q: %w", f.App, err)
	}
	if len(out) <= limit {
		return out, Cursor{}, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, Cursor{RunTime: last.RunTime, ID: last.ID, Shard: last.Shard}, nil
}

// pageLimit applies DefaultListLimit and MaxListLimit to a requested page size.
func pageLimit(limit int) int {
	if limit <= 0 {
		return DefaultListLimit
	}
	return min(limit, MaxListLimit)
}
