package xtimer

import (
	"context"
	"time"

	"github.com/xtimer-go/xtimer/internal/engine"
)

// BackfillError is Backfill's error for a range it refuses: Field names
// the bound ("from", "to", or "range" for a range of more than
// 10,000 fires), Value its value, Reason what is wanted. It reads
// like `xtimer: Backfill of "x": to 2026-12-03T00:00:00Z is after now
// 2026-12-02T10:00:00Z`.
type BackfillError = engine.BackfillError

// Backfill records every fire of a task's schedule in [from, to) that has
// no execution yet, with source SourceBackfill, and returns how many it
// recorded: a second call over the same range records none. The schedule
// is the task's stored one (console overrides included), and it ends at
// WithEndAt.
//
// The range must end at or before now (the scheduler's Clock), start
// within Options.Retention (older executions may have been deleted, and a
// fire that ran must never run again; a negative Retention sets no lower
// bound), start before it ends, and hold at most 10,000 fires;
// otherwise Backfill records nothing and returns a *BackfillError. A task
// nobody registered or created is an error wrapping ErrTaskNotFound.
//
// The fires run on the replicas that run the task, started or not here,
// one at a time and in run-time order, whatever the task's overlap and
// misfire policies, beside its scheduled fires, which neither wait for
// them nor make them wait. Each is retried by the task's retry policy;
// they wait while the task is paused; they raise no lateness alert and do
// not count toward WithMaxRuns. Like every recorded fire, they outlive the
// replica that recorded them.
func (s *Scheduler) Backfill(ctx context.Context, code string, from, to time.Time) (int, error) {
	return s.eng.Backfill(ctx, code, from, to)
}
