package xtimer

import (
	"context"
	"fmt"

	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is pausing beyond Pause and Resume: notes that say why, and
// pause on failure (WithPauseOnFailure), which the engine enforces from
// the execution rows (internal/engine/pause.go).

// MaxPauseNote is the most bytes PauseOptions.Note may hold.
const MaxPauseNote = store.MaxPauseNote

// MaxPauseOnFailure is the largest n WithPauseOnFailure and
// HTTPTask.PauseOnFailure take.
const MaxPauseOnFailure = 1000

// PauseOptions are the options of PauseWith and ResumeWith.
type PauseOptions struct {
	// Note says why: "db migration until 14:00". It replaces the note
	// stored with the task, which Tasks (Task.PauseNote) and the console
	// show, so the task says why it was last paused or resumed; "" clears
	// it. Valid UTF-8, no NUL byte, at most MaxPauseNote (1024) bytes.
	Note string
}

// PauseWith is Pause with a note: it stops a task's fires on every
// replica within a second and stores o.Note with the task. A note that
// is not valid UTF-8, holds a NUL byte or is longer than MaxPauseNote
// is refused with an error naming PauseOptions.Note; nothing changes.
func (s *Scheduler) PauseWith(ctx context.Context, code string, o PauseOptions) error {
	if err := o.check("pause", code); err != nil {
		return err
	}
	return s.setStatus(ctx, code, store.TaskPaused, o.Note)
}

// ResumeWith is Resume with a note, which replaces the pause's note. A
// task that WithPauseOnFailure paused counts its failures afresh from
// the resume on: fires before it never count again. The note is checked
// as PauseWith checks it.
func (s *Scheduler) ResumeWith(ctx context.Context, code string, o PauseOptions) error {
	if err := o.check("resume", code); err != nil {
		return err
	}
	return s.setStatus(ctx, code, store.TaskActive, o.Note)
}

// check refuses a note the databases cannot all store as given.
func (o PauseOptions) check(what, code string) error {
	if reason := textProblem(o.Note, MaxPauseNote); reason != "" {
		shown := fmt.Sprintf("%q", o.Note)
		if len(o.Note) > MaxPauseNote {
			shown = fmt.Sprintf("%d bytes", len(o.Note))
		}
		return fmt.Errorf("xtimer: %s task %q: PauseOptions.Note = %s: %s", what, code, shown, reason)
	}
	return nil
}

// WithPauseOnFailure pauses the task, on every replica, once n
// consecutive fires of its schedule (sources schedule and catchup) have
// ended failed or timed_out after their last attempt. A success resets
// the count; skipped fires, manual runs and runs stopped by the next
// fire (OverlapCancelOther) neither count nor reset it; a run whose
// replica was lost counts as a failure. The count is read from the
// execution rows in run-time order, so it holds across replicas; it
// starts afresh when the task is resumed (or otherwise changed). The
// pause stores a note ("paused after 3 consecutive failures; last: ...")
// shown by Tasks and the console, and raises EventTaskPaused. n is
// 1-MaxPauseOnFailure; without the option a task is never paused for
// failing.
func WithPauseOnFailure(n int) TaskOption {
	return func(c *taskConfig) error {
		if n < 1 || n > MaxPauseOnFailure {
			return optionError("WithPauseOnFailure", n, fmt.Sprintf("consecutive failures must be 1-%d", MaxPauseOnFailure))
		}
		c.pauseAfter = n
		return nil
	}
}
