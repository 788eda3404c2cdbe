package xtimer

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is changing a Go task's options at runtime (SetTaskOptions),
// as SetSchedule changes its schedule: the overrides are stored on the
// task's row (xtimer_tasks.option_overrides), registration never writes
// them, and every replica applies them when it adopts the row
// (internal/engine/view.go withOptionOverrides).

// TaskOverrides replace some of a task's options from outside its code
// (SetTaskOptions). A nil field keeps the code's value; Params nil keeps
// the code's parameters. Each field follows the rules of its option:
// Timeout is WithTimeout's, MaxAttempts WithRetry's, BackoffBase and
// BackoffMax WithBackoff's (either may be given alone: the other is the
// code's), Misfire and MisfireWindow WithMisfire's and
// WithMisfireWindow's, Overlap WithOverlap's, Jitter WithJitter's
// (checked against the schedule that applies now, overrides included)
// and PauseOnFailure WithPauseOnFailure's, Params WithParams' (JSON, at
// most 64 KiB). Two differ: Jitter 0 turns the jitter off and
// PauseOnFailure 0 turns pause on failure off. Durations are stored in
// whole milliseconds and must be at least 1ms.
type TaskOverrides struct {
	Timeout                 *time.Duration
	MaxAttempts             *int
	BackoffBase, BackoffMax *time.Duration
	Misfire                 *MisfirePolicy
	MisfireWindow           *time.Duration
	Overlap                 *OverlapPolicy
	Jitter                  *time.Duration
	PauseOnFailure          *int
	Params                  json.RawMessage
}

// ErrHTTPTaskOptions is SetTaskOptions' answer for an HTTP callback task:
// its options are data already, changed with UpdateHTTPTask (or the
// console's edit), which would otherwise have two values to show.
var ErrHTTPTaskOptions = errors.New("xtimer: an HTTP callback task's options are changed with UpdateHTTPTask")

// TaskOverridesError says which field of TaskOverrides SetTaskOptions refused,
// and why. Nothing is stored when it returns one.
type TaskOverridesError struct {
	// Task is the task code; Field the field of TaskOverrides
	// ("MaxAttempts"); Value the value as the message shows it.
	Task, Field, Value, Reason string
}

// Error reads like `xtimer: set options of task "report":
// TaskOverrides.MaxAttempts = 0: attempts must be 1-100 (1 means no
// retry)`.
func (e *TaskOverridesError) Error() string {
	return fmt.Sprintf("xtimer: set options of task %q: TaskOverrides.%s = %s: %s", e.Task, e.Field, e.Value, e.Reason)
}

// SetTaskOptions stores o as the task's option overrides, replacing those
// stored before: the fields o sets win over the code's options on every
// replica within a second, for the fires and attempts that start from
// then on (a fire recorded already keeps the attempts it was recorded
// with); the others are the code's. The overrides survive restarts and
// redeploys (registration never writes them) until ResetTaskOptions; a
// TaskOverrides that sets nothing is ResetTaskOptions. A field that breaks
// its option's rules is refused with an *TaskOverridesError naming it, an
// unknown task with ErrTaskNotFound, an HTTP callback task with
// ErrHTTPTaskOptions; nothing is stored then.
func (s *Scheduler) SetTaskOptions(ctx context.Context, code string, o TaskOverrides) error {
	row, err := s.store.Task(ctx, s.opts.App, code)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %q", ErrTaskNotFound, code)
	case err != nil:
		return fmt.Errorf("xtimer: set options of task %q: %w", code, err)
	case row.Kind == store.KindHTTP:
		return fmt.Errorf("%w: %q", ErrHTTPTaskOptions, code)
	}
	so, err := o.check(code, row, s.clock.Now())
	if err != nil {
		return err
	}
	if so.IsZero() {
		return s.ResetTaskOptions(ctx, code)
	}
	return s.eng.ChangeTask(ctx, code, "set options", func(ctx context.Context) error {
		return s.store.SetOptionOverrides(ctx, s.opts.App, code, so)
	})
}

// ResetTaskOptions removes the overrides SetTaskOptions stored: the
// code's options apply again, on every replica within a second.
func (s *Scheduler) ResetTaskOptions(ctx context.Context, code string) error {
	return s.eng.ChangeTask(ctx, code, "reset options", func(ctx context.Context) error {
		return s.store.ResetOptionOverrides(ctx, s.opts.App, code)
	})
}

// check validates o for the task stored as row, with the rules of the
// options (their own validators), and returns the store's form.
func (o TaskOverrides) check(code string, row store.Task, now time.Time) (store.OptionOverrides, error) {
	var out store.OptionOverrides
	bad := func(field string, value any, reason string) error {
		return &TaskOverridesError{Task: code, Field: field, Value: fmt.Sprint(value), Reason: reason}
	}
	// option runs an option's validator on a scratch task, and names the
	// field in its error.
	option := func(field string, opt TaskOption) error {
		var c taskConfig
		err := opt(&c)
		var oe *taskOptionError
		if errors.As(err, &oe) {
			return bad(field, oe.value, oe.reason)
		}
		return err
	}
	// millis checks a duration's option, then that it has a millisecond.
	millis := func(field string, d *time.Duration, opt func(time.Duration) TaskOption) (*int64, error) {
		if d == nil {
			return nil, nil
		}
		if err := option(field, opt(*d)); err != nil {
			return nil, err
		}
		if *d < time.Millisecond {
			return nil, bad(field, *d, "must be at least 1ms")
		}
		ms := d.Milliseconds()
		return &ms, nil
	}
	var err error
	if out.TimeoutMs, err = millis("Timeout", o.Timeout, WithTimeout); err != nil {
		return out, err
	}
	if o.MaxAttempts != nil {
		if err = option("MaxAttempts", WithRetry(*o.MaxAttempts)); err != nil {
			return out, err
		}
		out.MaxAttempts = o.MaxAttempts
	}
	base := func(d time.Duration) TaskOption { return WithBackoff(d, d) }
	positiveMax := func(d time.Duration) TaskOption {
		return func(*taskConfig) error {
			if d <= 0 {
				return optionError("WithBackoff", d, "max must be positive")
			}
			return nil
		}
	}
	if out.BackoffBaseMs, err = millis("BackoffBase", o.BackoffBase, base); err != nil {
		return out, err
	}
	if out.BackoffMaxMs, err = millis("BackoffMax", o.BackoffMax, positiveMax); err != nil {
		return out, err
	}
	if base, bmax := cmp.Or(out.BackoffBaseMs, &row.BackoffBaseMs), cmp.Or(out.BackoffMaxMs, &row.BackoffMaxMs); *bmax < *base {
		if out.BackoffMaxMs != nil {
			return out, bad("BackoffMax", *o.BackoffMax, fmt.Sprintf("max must be at least base %s", time.Duration(*base)*time.Millisecond))
		}
		return out, bad("BackoffBase", *o.BackoffBase, fmt.Sprintf("base must be at most the code's max %s", time.Duration(*bmax)*time.Millisecond))
	}
	if o.Misfire != nil {
		if err = option("Misfire", WithMisfire(*o.Misfire)); err != nil {
			return out, err
		}
		p := string(*o.Misfire)
		out.Misfire = &p
	}
	if out.MisfireWindowMs, err = millis("MisfireWindow", o.MisfireWindow, WithMisfireWindow); err != nil {
		return out, err
	}
	if o.Overlap != nil {
		if err = option("Overlap", WithOverlap(*o.Overlap)); err != nil {
			return out, err
		}
		p := string(*o.Overlap)
		out.Overlap = &p
	}
	if o.Jitter != nil {
		if j := *o.Jitter; j != 0 {
			if err := option("Jitter", WithJitter(j)); err != nil {
				return out, err
			}
			if sched, schedErr := row.Schedule(); schedErr == nil {
				if reason := jitterTooLong(sched, j, now); reason != "" {
					return out, bad("Jitter", j, reason)
				}
			}
		}
		ms := o.Jitter.Milliseconds()
		out.JitterMs = &ms
	}
	if o.PauseOnFailure != nil {
		if n := *o.PauseOnFailure; n != 0 {
			if err := option("PauseOnFailure", WithPauseOnFailure(n)); err != nil {
				return out, err
			}
		}
		out.PauseAfter = o.PauseOnFailure
	}
	if o.Params != nil {
		p := o.Params
		var buf bytes.Buffer
		switch {
		case len(p) > maxParams:
			return out, bad("Params", fmt.Sprintf("%d bytes", len(p)), fmt.Sprintf("at most %d bytes of JSON", maxParams))
		case !utf8.Valid(p):
			return out, bad("Params", shownText(string(p), maxParams), "not valid UTF-8")
		case json.Compact(&buf, p) != nil:
			var v any
			return out, bad("Params", shownText(string(p), maxParams), fmt.Sprintf("not valid JSON: %v", json.Unmarshal(p, &v)))
		}
		out.Params = json.RawMessage(buf.Bytes())
	}
	return out, nil
}

// overridesOf is the TaskOverrides of the overrides stored on a row.
func overridesOf(o store.OptionOverrides) TaskOverrides {
	dur := func(ms *int64) *time.Duration {
		if ms == nil {
			return nil
		}
		d := time.Duration(*ms) * time.Millisecond
		return &d
	}
	t := TaskOverrides{
		Timeout: dur(o.TimeoutMs), MaxAttempts: o.MaxAttempts, BackoffBase: dur(o.BackoffBaseMs), BackoffMax: dur(o.BackoffMaxMs),
		MisfireWindow: dur(o.MisfireWindowMs), Jitter: dur(o.JitterMs), PauseOnFailure: o.PauseAfter, Params: o.Params,
	}
	if o.Misfire != nil {
		p := MisfirePolicy(*o.Misfire)
		t.Misfire = &p
	}
	if o.Overlap != nil {
		p := OverlapPolicy(*o.Overlap)
		t.Overlap = &p
	}
	return t
}
