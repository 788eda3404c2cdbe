package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is the console's side of xtimer.SetTaskOptions: a Go task's
// options overridden at runtime, PUT and DELETE api/tasks/{code}/options.

// OptionsEdit is the body of PUT api/tasks/{code}/options: the overrides
// of a Go task's options (xtimer.TaskOverrides), durations in
// milliseconds. The body replaces the overrides stored before: a field
// absent or null is the code's value, and {} resets them all (as DELETE
// does). params is JSON, the task's parameters.
//
//	{"timeout_ms": 120000, "max_attempts": 3, "backoff_base_ms": 1000, "backoff_max_ms": 60000,
//	 "misfire": "skip", "misfire_window_ms": 600000, "overlap": "skip", "jitter_ms": 0,
//	 "pause_on_failure": 0, "params": {"region": "eu"}}
type OptionsEdit struct {
	TimeoutMs       *int64          `json:"timeout_ms"`
	MaxAttempts     *int            `json:"max_attempts"`
	BackoffBaseMs   *int64          `json:"backoff_base_ms"`
	BackoffMaxMs    *int64          `json:"backoff_max_ms"`
	Misfire         *string         `json:"misfire"`
	MisfireWindowMs *int64          `json:"misfire_window_ms"`
	Overlap         *string         `json:"overlap"`
	JitterMs        *int64          `json:"jitter_ms"`
	PauseOnFailure  *int            `json:"pause_on_failure"`
	Params          json.RawMessage `json:"params"`
}

// overrides converts the body to the scheduler's overrides; the
// scheduler checks the values, and errors name the body's fields
// (optionsField).
func (e *OptionsEdit) overrides() (xtimer.TaskOverrides, error) {
	var o xtimer.TaskOverrides
	dur := func(field string, ms *int64, into **time.Duration) error {
		if ms == nil {
			return nil
		}
		if *ms > math.MaxInt64/int64(time.Millisecond) || *ms < math.MinInt64/int64(time.Millisecond) {
			return fieldError(field, strconv.FormatInt(*ms, 10), "out of range")
		}
		d := time.Duration(*ms) * time.Millisecond
		*into = &d
		return nil
	}
	for _, f := range []struct {
		field string
		ms    *int64
		into  **time.Duration
	}{
		{"timeout_ms", e.TimeoutMs, &o.Timeout},
		{"backoff_base_ms", e.BackoffBaseMs, &o.BackoffBase},
		{"backoff_max_ms", e.BackoffMaxMs, &o.BackoffMax},
		{"misfire_window_ms", e.MisfireWindowMs, &o.MisfireWindow},
		{"jitter_ms", e.JitterMs, &o.Jitter},
	} {
		if err := dur(f.field, f.ms, f.into); err != nil {
			return o, err
		}
	}
	o.MaxAttempts, o.PauseOnFailure = e.MaxAttempts, e.PauseOnFailure
	if e.Misfire != nil {
		p := xtimer.MisfirePolicy(*e.Misfire)
		o.Misfire = &p
	}
	if e.Overlap != nil {
		p := xtimer.OverlapPolicy(*e.Overlap)
		o.Overlap = &p
	}
	if len(e.Params) > 0 && string(e.Params) != "null" {
		o.Params = e.Params
	}
	return o, nil
}

// optionsField is the body's field of a TaskOverrides field, in the
// form bodyField reads.
var optionsField = map[string]string{
	"Timeout": "timeout", "MaxAttempts": "max_attempts", "BackoffBase": "backoff_base", "BackoffMax": "backoff_max",
	"Misfire": "misfire", "MisfireWindow": "misfire_window", "Overlap": "overlap", "Jitter": "jitter",
	"PauseOnFailure": "pause_on_failure", "Params": "params",
}

func (c *console) apiSetOptions(w http.ResponseWriter, r *http.Request) {
	var edit OptionsEdit
	c.act(w, r, store.ActionSetOptions, &edit, func(ctx context.Context, code string) (outcome, error) {
		o, err := edit.overrides()
		if err != nil {
			return outcome{}, err
		}
		before := c.optionsNow(ctx, code)
		if err := c.s.SetTaskOptions(ctx, code, o); err != nil {
			return outcome{}, err
		}
		return outcome{detail: before + " → " + c.optionsNow(ctx, code)}, nil
	})
}

func (c *console) apiResetOptions(w http.ResponseWriter, r *http.Request) {
	c.act(w, r, store.ActionResetOptions, &emptyBody{}, func(ctx context.Context, code string) (outcome, error) {
		before := c.optionsNow(ctx, code)
		if err := c.s.ResetTaskOptions(ctx, code); err != nil {
			return outcome{}, err
		}
		return outcome{detail: before + " → " + c.optionsNow(ctx, code)}, nil
	})
}

// optionsNow describes a task's option overrides, for the history line of
// a change: their JSON (the body's field names), {} when none.
func (c *console) optionsNow(ctx context.Context, code string) string {
	t, err := c.st.Task(ctx, c.sopts.App, code)
	if err != nil {
		return "?"
	}
	if t.OptionOverrides == "" {
		return "{}"
	}
	return string(t.OptionOverrides)
}

// optionsView is a task's option overrides and the code's values of the
// same fields, as JSON of OptionsEdit's fields; nil when there are none
// (or they do not decode, as the engine ignores them then).
func optionsView(t store.Task) (overrides, code json.RawMessage) {
	o, err := t.OptionOverrides.Decode()
	if err != nil || o.IsZero() {
		return nil, nil
	}
	overrides, err = json.Marshal(o)
	if err != nil {
		return nil, nil
	}
	code, err = json.Marshal(o.From(t))
	if err != nil {
		return nil, nil
	}
	return overrides, code
}

// OptionChange is one overridden option, for the task page: the body's
// field name, the code's value and the override, as JSON text.
type OptionChange struct {
	Field, Code, Override string
}

// OverriddenOptions lists the task's option overrides beside the code's
// values, by field name; none when it has none.
func (v TaskView) OverriddenOptions() []OptionChange {
	var over, code map[string]json.RawMessage
	if json.Unmarshal(v.OptionOverrides, &over) != nil {
		return nil
	}
	_ = json.Unmarshal(v.CodeOptions, &code) // absent: the code has no value (params)
	out := make([]OptionChange, 0, len(over))
	for field, value := range over {
		was := "none"
		if c, ok := code[field]; ok {
			was = string(c)
		}
		out = append(out, OptionChange{Field: field, Code: was, Override: string(value)})
	}
	slices.SortFunc(out, func(a, b OptionChange) int { return cmp.Compare(a.Field, b.Field) })
	return out
}
