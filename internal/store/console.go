package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// The reads and writes of an admin console, besides ListExecutions
// (history.go) and the task edits of tasks.go. Every value a console passes
// through from a request is validated here, naming the field, and bound as
// a parameter; nothing from a caller is spliced into SQL text.

// MaxLastExecutions is the most codes one LastExecutions call accepts.
const MaxLastExecutions = 1000

// lastChunk is the number of codes per LastExecutions statement: each adds
// a UNION ALL branch and one to three placeholders.
const lastChunk = 100

// likeEscape is the ESCAPE character of ListTasks' LIKE patterns. Not the
// backslash, which MySQL also treats as a string-literal escape.
const likeEscape = "!"

// TaskFilter selects tasks for the console. App is required; zero fields
// do not filter.
type TaskFilter struct {
	App string
	// Status is TaskActive or TaskPaused.
	Status string
	// Kind is KindFunc or KindHTTP.
	Kind string
	// Text matches tasks whose code or name contains it, ignoring case:
	// anywhere on PostgreSQL and SQLite, at the start of a word on MySQL
	// and MariaDB (search.go; MatchesText says it in Go). It is matched
	// literally: % and _ are not wildcards. Case is folded alike on every
	// backend for ASCII letters; beyond ASCII, folding (and on MySQL
	// accent folding) follows the database.
	Text string
}

func (f TaskFilter) validate() error {
	switch {
	case f.App == "":
		return fmt.Errorf("app is required")
	case f.Status != "" && f.Status != TaskActive && f.Status != TaskPaused:
		return fmt.Errorf("status %q: want %s or %s", f.Status, TaskActive, TaskPaused)
	case f.Kind != "" && f.Kind != KindFunc && f.Kind != KindHTTP:
		return fmt.Errorf("kind %q: want %s or %s", f.Kind, KindFunc, KindHTTP)
	case len(f.Text) > 255:
		return fmt.Errorf("text %q: want at most 255 bytes", f.Text)
	}
	return cmp.Or(validText("app", f.App), validText("text", f.Text))
}

// ListTasks returns one page of the tasks of f.App matching f, ordered by
// code, strictly after afterCode ("" for the first page), and the code to
// pass as afterCode for the next page, "" when this page is the last.
// limit 0 means DefaultListLimit; more than MaxListLimit is cut to it.
func (s *Store) ListTasks(ctx context.Context, f TaskFilter, afterCode string, limit int) ([]Task, string, error) {
	if err := f.validate(); err != nil {
		return nil, "", fmt.Errorf("store: list tasks: %w", err)
	}
	if err := validText("after code", afterCode); err != nil {
		return nil, "", fmt.Errorf("store: list tasks: %w", err)
	}
	limit = pageLimit(limit)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	db := s.db.WithContext(ctx)
	var out []Task
	var err error
	switch {
	case f.Text != "" && db.Dialector.Name() == "mysql":
		out, err = searchMySQL(db, f, afterCode, limit)
	case f.Text != "" && db.Dialector.Name() == "postgres":
		out, err = searchPostgres(db, f, afterCode, limit)
	default:
		conds, args := taskConds("", f, afterCode)
		q := db.Where(conds, args...)
		if db.Dialector.Name() == "mysql" {
			q = q.Table(tasksByCode)
		}
		if f.Text != "" {
			q = q.Where(substringCond, substringArgs(f.Text)...)
		}
		err = q.Order("code").Limit(limit + 1).Find(&out).Error
	}
	if err != nil {
		return nil, "", fmt.Errorf("store: list tasks of app %q: %w", f.App, err)
	}
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	return out, out[limit-1].Code, nil
}

// escapeLike makes every character of s match itself in a LIKE pattern
// with ESCAPE likeEscape.
func escapeLike(s string) string {
	return strings.NewReplacer(likeEscape, likeEscape+likeEscape, "%", likeEscape+"%", "_", likeEscape+"_").Replace(s)
}

// Apps returns the apps that have tasks, sorted.
func (s *Store) Apps(ctx context.Context) ([]string, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	db := s.db.WithContext(ctx)
	var apps []string
	var err error
	if db.Dialector.Name() == "mysql" {
		// MySQL and MariaDB read DISTINCT app as a loose scan of the
		// (app, code) index: one probe per app.
		err = db.Model(&Task{}).Distinct("app").Order("app").Pluck("app", &apps).Error
	} else {
		// PostgreSQL and SQLite would read every entry of the index, a
		// million for an app of a million tasks: this recursion makes the
		// one probe per app by hand.
		err = db.Raw(`WITH RECURSIVE a(app) AS (
			SELECT MIN(app) FROM xtimer_tasks
			UNION ALL
			SELECT (SELECT MIN(t.app) FROM xtimer_tasks t WHERE t.app > a.app) FROM a WHERE a.app IS NOT NULL)
			SELECT app FROM a WHERE app IS NOT NULL ORDER BY app`).Scan(&apps).Error
	}
	if err != nil {
		return nil, fmt.Errorf("store: list apps: %w", err)
	}
	return apps, nil
}

// StatusCounts returns how many executions of one task have each status,
// among those with fromMs <= run_time < toMs (each bound ignored when 0).
// Statuses with none are absent. The fire index bounds the rows read.
func (s *Store) StatusCounts(ctx context.Context, app, code string, fromMs, toMs int64) (map[string]int64, error) {
	switch {
	case app == "" || code == "":
		return nil, fmt.Errorf("store: count executions: app %q and task %q are required", app, code)
	case fromMs != 0 && toMs != 0 && fromMs > toMs:
		return nil, fmt.Errorf("store: count executions of task %q: from_ms %d is after to_ms %d", code, fromMs, toMs)
	}
	if err := cmp.Or(validText("app", app), validText("task", code)); err != nil {
		return nil, fmt.Errorf("store: count executions: %w", err)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.db.WithContext(ctx).Model(&Execution{}).Select("status, COUNT(*) AS n").Where("app = ? AND task_code = ?", app, code)
	if fromMs != 0 {
		q = q.Where("run_time >= ?", fromMs)
	}
	if toMs != 0 {
		q = q.Where("run_time < ?", toMs)
	}
	var rows []struct {
		Status string
		N      int64
	}
	if err := q.Group("status").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: count executions of task %q: %w", code, err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// LastExecutions returns, for each of up to MaxLastExecutions codes, the
// execution of that task with the greatest run_time <= beforeMs, whatever
// its status. Codes without one are absent from the map.
//
// Each code costs one backward probe of xtimer_executions_shard; lastChunk
// codes go to the server in one statement, whose text depends only on how
// many codes it carries. A GROUP BY MAX would read every row of the tasks
// (PostgreSQL has no loose index scan, MariaDB none under a run_time
// bound), and LATERAL is missing from MariaDB and SQLite. So the probe is
// a correlated subquery over the list of codes, except on MySQL/MariaDB:
// there a correlated LIMIT 1 reads the task from its newest row down
// (thousands of index entries per code on 10M rows), and a UNION ALL of
// one parenthesized LIMIT 1 per code seeks each directly. PostgreSQL runs
// that UNION slower than its correlated subquery, and SQLite cannot
// parenthesize it.
func (s *Store) LastExecutions(ctx context.Context, app string, codes []string, beforeMs int64) (map[string]Execution, error) {
	if app == "" {
		return nil, fmt.Errorf("store: last executions: app is required")
	}
	if len(codes) > MaxLastExecutions {
		return nil, fmt.Errorf("store: last executions: %d codes: want at most %d", len(codes), MaxLastExecutions)
	}
	if err := validText("app", app); err != nil {
		return nil, fmt.Errorf("store: last executions: %w", err)
	}
	for _, c := range codes {
		if err := validText("task", c); err != nil {
			return nil, fmt.Errorf("store: last executions: %w", err)
		}
	}
	codes = slices.Compact(slices.Sorted(slices.Values(codes)))
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	out := make(map[string]Execution, len(codes))
	for from := 0; from < len(codes); from += lastChunk {
		chunk := codes[from:min(from+lastChunk, len(codes))]
		query, args := lastQuery(s.db.Dialector.Name(), app, chunk, beforeMs)
		var rows []Execution
		if err := s.db.WithContext(ctx).Raw(query, args...).Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("store: last executions of %d tasks of app %q: %w", len(chunk), app, err)
		}
		for _, e := range rows {
			out[e.TaskCode] = e
		}
	}
	return out, nil
}

// lastQuery returns LastExecutions' statement for some codes.
func lastQuery(dialect, app string, codes []string, beforeMs int64) (string, []any) {
	parts := make([]string, len(codes))
	var args []any
	if dialect == "mysql" {
		for i, c := range codes {
			// Parenthesized, not derived tables: MariaDB materializes each
			// derived table, a temporary table for every code.
			parts[i] = "(SELECT * FROM xtimer_executions FORCE INDEX (xtimer_executions_shard)" +
				" WHERE app = ? AND task_code = ? AND run_time <= ? ORDER BY run_time DESC LIMIT 1)"
			args = append(args, app, c, beforeMs)
		}
		return strings.Join(parts, " UNION ALL "), args
	}
	args = append(args, app, beforeMs)
	for i, c := range codes {
		parts[i] = "SELECT ? AS code"
		args = append(args, c)
	}
	return `SELECT * FROM xtimer_executions WHERE id IN (SELECT (SELECT x.id FROM xtimer_executions x
		WHERE x.app = ? AND x.task_code = c.code AND x.run_time <= ? ORDER BY x.run_time DESC LIMIT 1)
		FROM (` + strings.Join(parts, " UNION ALL ") + `) AS c)`, args
}

// RecordAction appends a to the audit log and returns it as stored. AtMs
// defaults to now. Principal, Action and Detail are made storable the way
// execution output is (see cleanText): invalid UTF-8 replaced, NUL bytes
// dropped, Detail cut to MaxTextBytes. App, TaskCode, Principal and Action
// longer than their columns are an error.
func (s *Store) RecordAction(ctx context.Context, a Action) (Action, error) {
	a.ID = 0
	a.Principal, a.Action, a.Detail = cleanText(a.Principal), cleanText(a.Action), cleanText(a.Detail)
	if err := cmp.Or(validText("app", a.App), validText("task", a.TaskCode)); err != nil {
		return Action{}, fmt.Errorf("store: record action: %w", err)
	}
	switch {
	case a.App == "" || len(a.App) > 64:
		return Action{}, fmt.Errorf("store: record action: app %q: want 1 to 64 bytes", a.App)
	case len(a.TaskCode) > 128:
		return Action{}, fmt.Errorf("store: record action: task %q: want at most 128 bytes", a.TaskCode)
	case len(a.Principal) > 255:
		return Action{}, fmt.Errorf("store: record action: principal %q: want at most 255 bytes", a.Principal)
	case a.Action == "" || len(a.Action) > 32:
		return Action{}, fmt.Errorf("store: record action: action %q: want 1 to 32 bytes", a.Action)
	}
	if a.AtMs == 0 {
		a.AtMs = s.nowMs()
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.db.WithContext(ctx).Create(&a).Error; err != nil {
		return Action{}, fmt.Errorf("store: record action %q on task %q: %w", a.Action, a.TaskCode, err)
	}
	return a, nil
}

// Actions returns up to limit actions on one task of app, or on every
// task of app when code is "", newest first. limit 0 means
// DefaultListLimit; more than MaxListLimit is cut to it.
func (s *Store) Actions(ctx context.Context, app, code string, limit int) ([]Action, error) {
	if app == "" {
		return nil, fmt.Errorf("store: list actions: app is required")
	}
	if err := cmp.Or(validText("app", app), validText("task", code)); err != nil {
		return nil, fmt.Errorf("store: list actions: %w", err)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.db.WithContext(ctx).Where("app = ?", app)
	if code != "" {
		q = q.Where("task_code = ?", code)
	}
	var out []Action
	if err := q.Order("at_ms DESC, id DESC").Limit(pageLimit(limit)).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("store: list actions of app %q: %w", app, err)
	}
	return out, nil
}

// validText rejects a value no backend can compare: invalid UTF-8, or NUL
// bytes, which PostgreSQL refuses. field names it in the error.
func validText(field, v string) error {
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return fmt.Errorf("%s %q: want UTF-8 text without NUL bytes", field, v)
	}
	return nil
}
