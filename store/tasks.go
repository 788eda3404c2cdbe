package store

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// maxUpsertTries bounds UpsertTask's optimistic loop; each lost race means
// another replica changed the row in between, which settles quickly.
const maxUpsertTries = 10

// Override is a console edit of a task's schedule. An empty field leaves the
// code-defined value in force. The caller validates the spec; the store
// stores what it is given.
type Override struct {
	Spec     string
	Dialect  string
	TimeZone string
}

// UpsertTask records the definition of t as the code registered it: it
// inserts the row (status active unless t.Status says paused, version 1),
// or updates only the code-defined columns of the existing row: name,
// description, owner, kind, spec, dialect, time_zone, timeout, retry,
// misfire, overlap, end_at, max_runs and http_target. Status and the
// override columns belong to operators and are never written here, so a
// redeploy does not resume a paused task. Version grows only when something
// changed. It returns the row as stored.
func (s *Store) UpsertTask(ctx context.Context, t *Task) (Task, error) {
	rows, err := s.UpsertTasks(ctx, []*Task{t}) // one implementation of the rules, for one or many
	if err != nil {
		return Task{}, err
	}
	return rows[0], nil
}

// validTask checks what the schema needs; the root package checks the rest
// (code syntax, spec, policies) before calling.
func validTask(t *Task) error {
	switch {
	case t.App == "" || len(t.App) > 64:
		return fmt.Errorf("store: task app %q: want 1 to 64 bytes", t.App)
	case t.Code == "" || len(t.Code) > 128:
		return fmt.Errorf("store: task code %q: want 1 to 128 bytes", t.Code)
	case t.Spec == "" || len(t.Spec) > 255:
		return fmt.Errorf("store: task %q spec %q: want 1 to 255 bytes", t.Code, t.Spec)
	case t.Kind != "" && t.Kind != KindFunc && t.Kind != KindHTTP:
		return fmt.Errorf("store: task %q kind %q: want %q or %q", t.Code, t.Kind, KindFunc, KindHTTP)
	case t.Status != "" && t.Status != TaskActive && t.Status != TaskPaused:
		return fmt.Errorf("store: task %q status %q: want %q or %q", t.Code, t.Status, TaskActive, TaskPaused)
	case t.MaxAttempts < 0:
		return fmt.Errorf("store: task %q max_attempts %d: want 0 (meaning 1) or more", t.Code, t.MaxAttempts)
	}
	return nil
}

// definition returns the code-defined columns of t, with the defaults the
// schema applies to zero values.
func definition(t *Task) map[string]any {
	kind, tz, attempts := t.Kind, t.TimeZone, t.MaxAttempts
	if kind == "" {
		kind = KindFunc
	}
	if tz == "" {
		tz = "UTC"
	}
	if attempts == 0 {
		attempts = 1
	}
	return map[string]any{
		"name": t.Name, "description": t.Description, "owner": t.Owner, "kind": kind,
		"spec": t.Spec, "dialect": t.Dialect, "time_zone": tz,
		"timeout_ms": t.TimeoutMs, "max_attempts": attempts,
		"backoff_base_ms": t.BackoffBaseMs, "backoff_max_ms": t.BackoffMaxMs,
		"misfire": t.Misfire, "misfire_window_ms": t.MisfireWindowMs, "overlap": t.Overlap,
		"end_at_ms": t.EndAtMs, "max_runs": t.MaxRuns, "http_target": t.HTTPTarget,
	}
}

func sameDefinition(a, b map[string]any) bool {
	for k, av := range a {
		bv := b[k]
		if ap, ok := av.(*string); ok {
			bp := bv.(*string)
			if (ap == nil) != (bp == nil) || (ap != nil && *ap != *bp) {
				return false
			}
			continue
		}
		if av != bv {
			return false
		}
	}
	return true
}

// Tasks returns every task of app, ordered by code.
func (s *Store) Tasks(ctx context.Context, app string) ([]Task, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var tasks []Task
	if err := s.db.WithContext(ctx).Where("app = ?", app).Order("code").Find(&tasks).Error; err != nil {
		return nil, fmt.Errorf("store: list tasks of app %q: %w", app, err)
	}
	return tasks, nil
}

// Task returns one task, or an error wrapping ErrNotFound.
func (s *Store) Task(ctx context.Context, app, code string) (Task, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var t Task
	err := s.db.WithContext(ctx).Where("app = ? AND code = ?", app, code).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Task{}, notFound("task %q of app %q", code, app)
	}
	if err != nil {
		return Task{}, fmt.Errorf("store: read task %q: %w", code, err)
	}
	return t, nil
}

// TaskVersions returns the version of every task of app, by code: the
// narrow query replicas run every second to spot pauses, resumes and
// overrides made anywhere in the fleet.
func (s *Store) TaskVersions(ctx context.Context, app string) (map[string]int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var rows []struct {
		Code    string
		Version int64
	}
	err := s.db.WithContext(ctx).Model(&Task{}).Select("code", "version").Where("app = ?", app).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: read task versions of app %q: %w", app, err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Code] = r.Version
	}
	return out, nil
}

// SetTaskStatus sets a task active or paused and bumps its version.
func (s *Store) SetTaskStatus(ctx context.Context, app, code, status string) error {
	if status != TaskActive && status != TaskPaused {
		return fmt.Errorf("store: task %q status %q: want %q or %q", code, status, TaskActive, TaskPaused)
	}
	return s.updateTask(ctx, "set status of", app, code, map[string]any{"status": status})
}

// SetOverride stores a console edit of a task's schedule; it wins over the
// code-defined values until ResetOverride. It bumps the version.
func (s *Store) SetOverride(ctx context.Context, app, code string, o Override) error {
	if o == (Override{}) {
		return fmt.Errorf("store: override of task %q: every field is empty; use ResetOverride", code)
	}
	if len(o.Spec) > 255 || len(o.Dialect) > 16 || len(o.TimeZone) > 64 {
		return fmt.Errorf("store: override of task %q: spec %q, dialect %q or time zone %q too long", code, o.Spec, o.Dialect, o.TimeZone)
	}
	return s.updateTask(ctx, "override", app, code, map[string]any{
		"spec_override":    nullable(o.Spec),
		"dialect_override": nullable(o.Dialect),
		"tz_override":      nullable(o.TimeZone),
	})
}

// ResetOverride drops a task's console edits, so the code-defined schedule
// applies again. It bumps the version.
func (s *Store) ResetOverride(ctx context.Context, app, code string) error {
	return s.updateTask(ctx, "reset override of", app, code, map[string]any{
		"spec_override": nil, "dialect_override": nil, "tz_override": nil,
	})
}

// updateTask applies set to one task, bumping version and updated_ms.
func (s *Store) updateTask(ctx context.Context, what, app, code string, set map[string]any) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	set["version"] = gorm.Expr("version + 1")
	set["updated_ms"] = s.nowMs()
	res := s.db.WithContext(ctx).Model(&Task{}).Where("app = ? AND code = ?", app, code).Updates(set)
	if res.Error != nil {
		return fmt.Errorf("store: %s task %q: %w", what, code, res.Error)
	}
	if res.RowsAffected == 0 {
		return notFound("%s task %q of app %q", what, code, app)
	}
	return nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
