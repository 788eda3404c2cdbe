package store

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// OptionOverrides are an operator's replacements for some of a task's
// code-defined options (the root's SetTaskOptions), stored as JSON in
// xtimer_tasks.option_overrides. A nil field keeps the code's value. Like
// the schedule overrides, registration never writes them: they survive
// redeploys until ResetOptionOverrides. The caller validates the values;
// the store stores what it is given.
type OptionOverrides struct {
	TimeoutMs       *int64          `json:"timeout_ms,omitempty"`
	MaxAttempts     *int            `json:"max_attempts,omitempty"`
	BackoffBaseMs   *int64          `json:"backoff_base_ms,omitempty"`
	BackoffMaxMs    *int64          `json:"backoff_max_ms,omitempty"`
	Misfire         *string         `json:"misfire,omitempty"`
	MisfireWindowMs *int64          `json:"misfire_window_ms,omitempty"`
	Overlap         *string         `json:"overlap,omitempty"`
	JitterMs        *int64          `json:"jitter_ms,omitempty"`
	PauseAfter      *int            `json:"pause_on_failure,omitempty"`
	Params          json.RawMessage `json:"params,omitempty"`
}

// IsZero reports whether o overrides nothing.
func (o OptionOverrides) IsZero() bool {
	return o.TimeoutMs == nil && o.MaxAttempts == nil && o.BackoffBaseMs == nil && o.BackoffMaxMs == nil &&
		o.Misfire == nil && o.MisfireWindowMs == nil && o.Overlap == nil && o.JitterMs == nil &&
		o.PauseAfter == nil && o.Params == nil
}

// Apply returns d with the fields o overrides replaced.
func (o OptionOverrides) Apply(d Definition) Definition {
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&d.TimeoutMs, o.TimeoutMs)
	set(&d.BackoffBaseMs, o.BackoffBaseMs)
	set(&d.BackoffMaxMs, o.BackoffMaxMs)
	set(&d.MisfireWindowMs, o.MisfireWindowMs)
	set(&d.JitterMs, o.JitterMs)
	if o.MaxAttempts != nil {
		d.MaxAttempts = *o.MaxAttempts
	}
	if o.Misfire != nil {
		d.Misfire = *o.Misfire
	}
	if o.Overlap != nil {
		d.Overlap = *o.Overlap
	}
	if o.PauseAfter != nil {
		d.PauseAfter = *o.PauseAfter
	}
	if o.Params != nil {
		d.Params = string(o.Params)
	}
	return d
}

// From returns the values t's option columns hold for the fields o sets,
// nil for the others: the code's side of o, shown beside it.
func (o OptionOverrides) From(t Task) OptionOverrides {
	var out OptionOverrides
	d := t.Definition()
	i64 := func(v int64) *int64 { return &v }
	str := func(v string) *string { return &v }
	num := func(v int) *int { return &v }
	if o.TimeoutMs != nil {
		out.TimeoutMs = i64(d.TimeoutMs)
	}
	if o.MaxAttempts != nil {
		out.MaxAttempts = num(d.MaxAttempts)
	}
	if o.BackoffBaseMs != nil {
		out.BackoffBaseMs = i64(d.BackoffBaseMs)
	}
	if o.BackoffMaxMs != nil {
		out.BackoffMaxMs = i64(d.BackoffMaxMs)
	}
	if o.Misfire != nil {
		out.Misfire = str(d.Misfire)
	}
	if o.MisfireWindowMs != nil {
		out.MisfireWindowMs = i64(d.MisfireWindowMs)
	}
	if o.Overlap != nil {
		out.Overlap = str(d.Overlap)
	}
	if o.JitterMs != nil {
		out.JitterMs = i64(d.JitterMs)
	}
	if o.PauseAfter != nil {
		out.PauseAfter = num(d.PauseAfter)
	}
	if o.Params != nil && d.Params != "" {
		out.Params = json.RawMessage(d.Params)
	}
	return out
}

// OverridesJSON is the JSON of a task's OptionOverrides, "" (NULL) for
// none. The column is MEDIUMTEXT on MySQL/MariaDB and TEXT elsewhere, as
// Params', since it may hold 64 KiB of parameters.
type OverridesJSON string

// GormDataType is the column's generic type, for GORM's schema.
func (OverridesJSON) GormDataType() string { return Params("").GormDataType() }

// GormDBDataType gives the column type per dialect.
func (OverridesJSON) GormDBDataType(db *gorm.DB, f *schema.Field) string {
	return Params("").GormDBDataType(db, f)
}

// Value is NULL for none.
func (j OverridesJSON) Value() (driver.Value, error) { return Params(j).Value() }

// Scan reads NULL as none.
func (j *OverridesJSON) Scan(v any) error { return (*Params)(j).Scan(v) }

// Decode reads the overrides; "" is none.
func (j OverridesJSON) Decode() (OptionOverrides, error) {
	var o OptionOverrides
	if j == "" {
		return o, nil
	}
	if err := json.Unmarshal([]byte(j), &o); err != nil {
		return OptionOverrides{}, fmt.Errorf("store: decode option overrides: %w", err)
	}
	return o, nil
}

// EncodeOverrides is the column's value for o: "" when o overrides
// nothing.
func EncodeOverrides(o OptionOverrides) (OverridesJSON, error) {
	if o.IsZero() {
		return "", nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(o); err != nil {
		return "", fmt.Errorf("store: encode option overrides: %w", err)
	}
	return OverridesJSON(bytes.TrimSpace(buf.Bytes())), nil
}

// WithOptionOverrides returns t with its option columns replaced by the
// overrides it stores (WithOptions): the options that apply. Overrides
// that do not decode leave t as it is, with the error.
func (t Task) WithOptionOverrides() (Task, error) {
	o, err := t.OptionOverrides.Decode()
	if err != nil {
		return t, err
	}
	return t.WithOptions(o), nil
}

// WithOptions returns t with the option columns o overrides replaced.
func (t Task) WithOptions(o OptionOverrides) Task {
	if o.IsZero() {
		return t
	}
	d := o.Apply(t.Definition())
	t.TimeoutMs, t.MaxAttempts, t.BackoffBaseMs, t.BackoffMaxMs = d.TimeoutMs, d.MaxAttempts, d.BackoffBaseMs, d.BackoffMaxMs
	t.Misfire, t.MisfireWindowMs, t.Overlap = d.Misfire, d.MisfireWindowMs, d.Overlap
	t.JitterMs, t.PauseAfter, t.Params = d.JitterMs, d.PauseAfter, Params(d.Params)
	return t
}

// SetOptionOverrides stores o as the task's option overrides, replacing
// the ones stored; they win over the code-defined options until
// ResetOptionOverrides. It bumps the version and the app's task
// generation (TaskGen), as SetOverride does.
func (s *Store) SetOptionOverrides(ctx context.Context, app, code string, o OptionOverrides) error {
	if o.IsZero() {
		return fmt.Errorf("store: option overrides of task %q: every field is nil; use ResetOptionOverrides", code)
	}
	j, err := EncodeOverrides(o)
	if err != nil {
		return err
	}
	return s.updateTask(ctx, "override options of", app, code, map[string]any{"option_overrides": j})
}

// ResetOptionOverrides drops a task's option overrides, so the
// code-defined options apply again. It bumps the version and the app's
// task generation (TaskGen).
func (s *Store) ResetOptionOverrides(ctx context.Context, app, code string) error {
	return s.updateTask(ctx, "reset option overrides of", app, code, map[string]any{"option_overrides": nil})
}
