package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is backfill (docs/architecture.md, "How a fire runs", step 15): recording the
// past fires of a task's schedule that never had a row, and running them
// one at a time, in run-time order, beside the task's scheduled fires.

// MaxBackfill is the most fires one Backfill records.
const MaxBackfill = 10_000

// backfillCountCap bounds how far a range too large for a Backfill is
// counted, for its error.
const backfillCountCap = 100 * MaxBackfill

// BackfillError is Backfill's error for a range it refuses, naming the
// bound (Field: "from", "to", or "range" for the fires it holds) and the
// value.
type BackfillError struct {
	Task, Field, Value, Reason string
}

// Error reads like `xtimer: Backfill of "x": to 2026-12-03T00:00:00Z is
// after now 2026-12-02T10:00:00Z`.
func (e *BackfillError) Error() string {
	return fmt.Sprintf("xtimer: Backfill of %q: %s %s %s", e.Task, e.Field, e.Value, e.Reason)
}

// BackfillFires lists the fires of sched in [from, to), before endAt (zero:
// no end), that a Backfill of task code at now may record, with retention
// the app's Options.Retention (negative: kept forever). The range must end
// at or before now, start within retention (older rows may have been
// deleted, and a fire that ran must never run again), start before it
// ends, and hold at most MaxBackfill fires; otherwise it returns a
// *BackfillError naming the bound.
func BackfillFires(code string, sched cron.Schedule, endAt, from, to, now time.Time, retention time.Duration) ([]time.Time, error) {
	bad := func(field string, at time.Time, reason string) error {
		return &BackfillError{Task: code, Field: field, Value: at.UTC().Format(time.RFC3339Nano), Reason: reason}
	}
	switch {
	case from.IsZero():
		return nil, bad("from", from, "is not set: want the start of the range")
	case to.IsZero():
		return nil, bad("to", to, "is not set: want the end of the range")
	case !from.Before(to):
		return nil, bad("from", from, "is not before to "+to.UTC().Format(time.RFC3339Nano))
	case to.After(now):
		return nil, bad("to", to, "is after now "+now.UTC().Format(time.RFC3339Nano))
	case retention >= 0 && from.Before(now.Add(-retention)):
		return nil, bad("from", from, fmt.Sprintf("is before the retention of %s (%s): older rows may have been deleted",
			retention, now.Add(-retention).UTC().Format(time.RFC3339Nano)))
	}
	end := to
	if !endAt.IsZero() && endAt.Before(end) {
		end = endAt
	}
	fires := cron.NextFires(sched, from.Add(-time.Nanosecond), MaxBackfill+1, end)
	if len(fires) <= MaxBackfill {
		return fires, nil
	}
	n, more := MaxBackfill+1, ""
	for at := fires[len(fires)-1]; ; n++ {
		if n == backfillCountCap {
			more = "more than "
			break
		}
		if at = sched.Next(at); at.IsZero() || !at.Before(end) {
			break
		}
	}
	return nil, &BackfillError{Task: code, Field: "range", Value: from.UTC().Format(time.RFC3339Nano) + "/" + to.UTC().Format(time.RFC3339Nano),
		Reason: fmt.Sprintf("holds %s%d fires: want at most %d a call", more, n, MaxBackfill)}
}

// Backfill records every fire of a task's schedule in [from, to) that has
// no row, with source backfill, and returns how many it recorded. The
// schedule is the stored one (console overrides included), or the one
// registered here for a task not recorded yet. The rows are this
// replica's, and armed, when it runs and has the handler; otherwise they
// have no owner, and a replica that runs the task claims them (step 12).
func (s *Engine) Backfill(ctx context.Context, code string, from, to time.Time) (int, error) {
	sched, endAt, maxAttempts, err := s.backfillSchedule(ctx, code)
	if err != nil {
		return 0, err
	}
	fires, err := BackfillFires(code, sched, endAt, from, to, s.clock.Now(), s.opts.Retention)
	if err != nil || len(fires) == 0 {
		return 0, err
	}
	s.mu.Lock()
	running := s.state == stateRunning
	s.mu.Unlock()
	owner := ""
	if running && s.view.runsHere(code) {
		owner = s.opts.InstanceID
	}
	rows := make([]store.Execution, len(fires))
	for i, at := range fires {
		rows[i] = store.Execution{App: s.opts.App, TaskCode: code, RunTime: at.UnixMilli(), Status: store.StatusScheduled,
			Source: store.SourceBackfill, MaxAttempts: maxAttempts, Replica: owner}
	}
	s.view.mu.Lock()
	t := s.view.taskLocked(code)
	s.view.mu.Unlock()
	if t != nil && isSharded(t.def()) { // every shard of each fire, dealt as the schedule's are
		rows = s.planner.shardRows(t, rows, s.clock.Now())
		for i := range rows {
			if !running {
				rows[i].Replica = "" // no live list before Start: a replica that runs it claims them
			}
		}
	}
	inserted, err := s.store.InsertFires(ctx, rows)
	if err != nil {
		if owner != "" {
			s.planner.doubtOwned() // the rows may be there, ours and not armed
		}
		return 0, fmt.Errorf("xtimer: Backfill of %q: %w", code, err)
	}
	recorded := 0 // fires, not shards
	for _, r := range inserted {
		if r.Shard == 0 {
			recorded++
		}
		if running && r.Replica == s.opts.InstanceID {
			s.dispatcher.arm(r)
		}
	}
	s.log.Info("backfill recorded", "task", code, "from", from.UTC(), "to", to.UTC(), "fires", len(fires), "recorded", recorded, "rows", len(inserted))
	return recorded, nil
}

// backfillSchedule returns the schedule, end and attempts of a task as
// stored, or as registered here when it has no row yet.
func (s *Engine) backfillSchedule(ctx context.Context, code string) (sched cron.Schedule, endAt time.Time, maxAttempts int, err error) {
	row, err := s.store.Task(ctx, s.opts.App, code)
	switch {
	case err == nil:
		if sched, err = row.Schedule(); err != nil {
			return nil, time.Time{}, 0, fmt.Errorf("xtimer: Backfill of %q: stored schedule: %w", code, err)
		}
		if row.EndAtMs != 0 {
			endAt = time.UnixMilli(row.EndAtMs)
		}
		// The days the task excludes have no fires to backfill: they were
		// skipped, or would have been (a missing calendar excludes nothing).
		var calendar []string
		if row.Calendar != "" {
			c, calErr := s.store.Calendar(ctx, s.opts.App, row.Calendar)
			switch {
			case calErr == nil:
				calendar = c.Days
			case !errors.Is(calErr, store.ErrNotFound):
				return nil, time.Time{}, 0, fmt.Errorf("xtimer: Backfill of %q: read calendar %q: %w", code, row.Calendar, calErr)
			}
		}
		if excludes := DaysExcluder(store.SplitDays(row.ExcludeDays), calendar); excludes != nil {
			sched = Excluding(sched, excludes)
		}
		maxAttempts = row.MaxAttempts
		if eff, oErr := row.WithOptionOverrides(); oErr == nil { // SetTaskOptions' MaxAttempts
			maxAttempts = eff.MaxAttempts
		}
		return sched, endAt, max(maxAttempts, 1), nil
	case !errors.Is(err, store.ErrNotFound):
		return nil, time.Time{}, 0, fmt.Errorf("xtimer: Backfill of %q: read task: %w", code, err)
	}
	s.view.mu.Lock()
	reg := s.view.handlers.get(code)
	s.view.mu.Unlock()
	if reg == nil {
		return nil, time.Time{}, 0, fmt.Errorf("%w: %q", ErrTaskNotFound, code)
	}
	return reg.opts.Sched, reg.opts.EndAt, max(reg.opts.Def.MaxAttempts, 1), nil
}

// backfillQueue holds the backfilled fires of one task that this
// dispatcher owns, in run-time order: only one of them (armed) is in the
// armed heap at a time, and the rest wait here, so that a backfill of
// thousands of fires costs one check of the store per poll, not one per
// fire. Guarded by dispatcher.mu.
type backfillQueue struct {
	waiting []store.Execution // by run time; the armed one not among them
	armed   int64             // the ID of the one in the armed heap; 0: none
}

// armBackfillLocked queues a backfilled fire of this replica's, and arms
// the earliest of its task's at due if none is armed. d.mu is held.
func (d *dispatcher) armBackfillLocked(r store.Execution, due time.Time) {
	if d.backfills == nil {
		d.backfills = map[string]*backfillQueue{}
	}
	q := d.backfills[r.TaskCode]
	if q == nil {
		q = &backfillQueue{}
		d.backfills[r.TaskCode] = q
	}
	i, found := slices.BinarySearchFunc(q.waiting, r, func(a, b store.Execution) int {
		return cmp.Or(cmp.Compare(a.RunTime, b.RunTime), cmp.Compare(a.Shard, b.Shard))
	})
	if q.armed == r.ID || found {
		return // armed or queued already: one row, one start
	}
	q.waiting = slices.Insert(q.waiting, i, r)
	d.armNextBackfillLocked(r.TaskCode, due)
}

// armNextBackfillLocked arms the earliest queued backfilled fire of task
// code at due, unless one is armed. d.mu is held.
func (d *dispatcher) armNextBackfillLocked(code string, due time.Time) {
	q := d.backfills[code]
	switch {
	case q == nil || q.armed != 0:
		return
	case len(q.waiting) == 0:
		delete(d.backfills, code)
		return
	}
	r := q.waiting[0]
	q.waiting = q.waiting[1:]
	q.armed = r.ID
	d.armedIDs[r.ID] = true
	d.pushArmedLocked(&armedFire{row: r, due: due, exact: true})
}

// holdBackfill is dispatch's check of a backfilled fire f, due now, in
// place of the task's overlap and misfire policies: it reports false when
// f may start, that is when no other backfilled fire of its task goes
// anywhere and none due earlier waits (store.BackfillState); otherwise f
// waits in its task's queue and the earliest queued is checked again
// bufferPoll later. A fire of a paused task waits too, until it resumes;
// one of a task deleted, or that this replica no longer runs, is skipped.
// A state it cannot read keeps f waiting.
func (d *dispatcher) holdBackfill(ctx context.Context, f *armedFire, t *taskState, runs bool, now time.Time) bool {
	r := f.row
	if t == nil || !runs {
		d.status.skip(r, ReasonDeleted, now)
		d.backfillLeft(r, now)
		return true
	}
	if t.status == statusActive {
		o, err := d.store.BackfillState(ctx, d.app, r.TaskCode, r.RunTime, r.ID)
		if err != nil {
			d.noteDB(err)
		}
		if err == nil && o.Going == 0 && o.Waiting == 0 {
			// The next one's check finds this one going until its final
			// status: it needs no look before a poll. Unless it is another
			// shard of the same fire, which runs beside this one.
			next := now.Add(bufferPoll)
			d.mu.Lock()
			if q := d.backfills[r.TaskCode]; q != nil && len(q.waiting) > 0 && q.waiting[0].RunTime == r.RunTime {
				next = now
			}
			d.mu.Unlock()
			d.backfillLeft(r, next)
			return false
		}
	}
	d.mu.Lock()
	if q := d.backfills[r.TaskCode]; q != nil && q.armed == r.ID {
		q.armed = 0
	}
	d.armBackfillLocked(r, now.Add(bufferPoll))
	d.mu.Unlock()
	return true
}

// backfillLeft notes that the backfilled fire r left its task's queue
// (it starts, or was skipped), and arms the next one at due.
func (d *dispatcher) backfillLeft(r store.Execution, due time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if q := d.backfills[r.TaskCode]; q != nil && q.armed == r.ID {
		q.armed = 0
		d.armNextBackfillLocked(r.TaskCode, due)
	}
}
