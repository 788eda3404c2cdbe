package xtimer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/store"
)

// This file is this replica's view of the app's tasks: every task as the
// database says (taskState), loaded at Start and kept in step with the
// changes other replicas and the console make (syncTasks).

// taskState is a task as the database says, shared by every replica.
type taskState struct {
	row    store.Task
	sched  Schedule // nil when the stored spec does not parse
	bucket int
	// http is the callback of a task of kind http (every replica runs its
	// fires); nil for Go tasks, and for an http task whose stored target
	// does not decode (it does not fire).
	http *httpSpec
	// since is when this replica adopted the task's schedule, if it changed
	// (or the task resumed) while the replica ran: the task has no fires
	// before it, so planning the current minute again never back-fills its
	// past. Zero otherwise: the task's creation is the limit then.
	since time.Time
	// The schedule has no fire after quietFrom and before quietUntil (its
	// next one): firesIn skips the task in the minutes between without
	// computing its schedule, so a daily task costs one Next a day, not
	// one a minute. Read and written under s.mu.
	quietFrom, quietUntil time.Time
}

func (t *taskState) active() bool {
	return t.row.Status == store.TaskActive && t.sched != nil && (t.row.Kind != store.KindHTTP || t.http != nil)
}

// firesAt reports whether at is an instant of the task's current schedule.
// A fire recorded under a schedule an operator has since replaced, and that
// the new one does not have, is not: it does not run (see dispatch).
// Schedules fire on whole seconds, so the millisecond run times stored are
// exact, whatever the zone.
func (t *taskState) firesAt(at time.Time) bool {
	if t.sched == nil {
		return false
	}
	ms := at.UnixMilli()
	if t.sched.Next(at.Add(-time.Nanosecond)).UnixMilli() == ms {
		return true
	}
	// Not found from just before: look from a minute before, so that a fire
	// is never skipped where Next is not monotone. (It is not at a
	// spring-forward gap: from 01:59:59 New York time, Next skips the fire
	// a "30 2 * * *" spec has at 03:00 that day; from 01:59:00 it finds it.)
	for next := t.sched.Next(at.Add(-time.Minute)); !next.IsZero() && next.UnixMilli() <= ms; next = t.sched.Next(next) {
		if next.UnixMilli() == ms {
			return true
		}
	}
	return false
}

// firesFrom is the instant, in Unix ms, before which the task has no
// fire: its creation, or the adoption of its current schedule (since).
func (t *taskState) firesFrom() int64 {
	if !t.since.IsZero() {
		return max(t.row.CreatedMs, t.since.UnixMilli())
	}
	return t.row.CreatedMs
}

func (t *taskState) loc() *time.Location {
	if t.sched != nil {
		return t.sched.Location()
	}
	return time.UTC
}

func (t *taskState) endAt() time.Time {
	if t.row.EndAtMs == 0 {
		return time.Time{}
	}
	return time.UnixMilli(t.row.EndAtMs)
}

// misfireWindowMs is how late a missed fire of the task may still run.
func (t *taskState) misfireWindowMs() int64 {
	if t == nil || t.row.MisfireWindowMs <= 0 {
		return DefaultMisfireWindow.Milliseconds()
	}
	return t.row.MisfireWindowMs
}

func (t *taskState) backoff() executor.Backoff {
	return executor.Backoff{
		Base:   max(time.Duration(t.row.BackoffBaseMs)*time.Millisecond, time.Millisecond),
		Max:    max(time.Duration(t.row.BackoffMaxMs)*time.Millisecond, time.Millisecond),
		Jitter: 0.2,
	}
}

func bucketOf(code string, buckets int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(code))
	return int(h.Sum32() % uint32(buckets))
}

// adoptTask replaces the local view of one task with its stored row. When
// the row changes which fires the task has from now on (a task new here, a
// schedule edited, reset or redeployed, a resume), the minutes already
// planned are planned again for it (reopenSlots); fires already recorded
// that its schedule no longer has are skipped when due (dispatch).
func (s *Scheduler) adoptTask(row store.Task) {
	t := &taskState{row: row, bucket: bucketOf(row.Code, s.opts.Buckets)}
	sched, err := ScheduleOf(row)
	if err != nil {
		s.log.Error("stored schedule does not parse; the task will not fire", "task", row.Code, "err", err)
	} else {
		t.sched = sched
	}
	if row.Kind == store.KindHTTP {
		if t.http, err = decodeHTTPSpec(row); err != nil {
			s.log.Error("stored http target does not decode; the task will not fire", "task", row.Code, "err", err)
		}
	}
	now := s.clock.Now()
	s.mu.Lock()
	old := s.tasks[row.Code]
	if old != nil && old.row.ID == row.ID && row.Version < old.row.Version {
		// A read that raced with a newer change (the tick's sync and an
		// operator's call on this replica): keep the newer view.
		s.mu.Unlock()
		return
	}
	s.setTaskLocked(t)
	rescheduled := old != nil && scheduleChanged(old.row, row)
	resumed := old != nil && old.row.Status != store.TaskActive && row.Status == store.TaskActive
	switch {
	case old == nil:
		s.reopenSlots(t, now)
	case rescheduled || resumed:
		t.since = now
		s.reopenSlots(t, now)
	default:
		t.since = old.since
	}
	s.mu.Unlock()
	if old != nil && old.row.Status != row.Status {
		s.log.Info("task "+row.Status, "task", row.Code)
	}
	if rescheduled {
		spec, dialect, zone := row.Effective()
		s.log.Info("task schedule changed; it applies from now on", "task", row.Code, "spec", spec, "dialect", dialect, "zone", zone)
	}
}

// setTaskLocked puts t in the local view of the tasks. s.mu is held.
func (s *Scheduler) setTaskLocked(t *taskState) {
	old := s.tasks[t.row.Code]
	if old != nil && old.bucket != t.bucket {
		delete(s.byBucket[old.bucket], t.row.Code)
	}
	s.bucketFrom[t.bucket] = min(s.bucketFrom[t.bucket], t.firesFrom())
	s.bucketQuiet[t.bucket] = quietSpan{} // t may fire in it
	if old == nil || (old.http == nil) != (t.http == nil) {
		s.codesGen++
	}
	if old != nil {
		s.viewSums.remove(old.row)
	}
	s.viewSums.add(t.row)
	s.tasks[t.row.Code] = t
	s.byBucket[t.bucket][t.row.Code] = t
}

// dropTaskLocked removes a task from the local view. s.mu is held.
func (s *Scheduler) dropTaskLocked(code string) {
	if t := s.tasks[code]; t != nil {
		delete(s.byBucket[t.bucket], code)
		delete(s.tasks, code)
		s.viewSums.remove(t.row)
		s.codesGen++
	}
}

// scheduleChanged reports whether two rows of a task name different
// schedules (spec, dialect or zone, console overrides included).
func scheduleChanged(a, b store.Task) bool {
	as, ad, az := a.Effective()
	bs, bd, bz := b.Effective()
	return as != bs || ad != bd || az != bz
}

// syncTasks picks up changes other replicas and the console made. Every
// write to the tasks bumps the app's task generation in its transaction,
// so one single-row read a second tells whether anything changed; only
// then the versions of all tasks are read, and full rows only for what
// changed. Every fullSyncEvery, for writers that do not bump it (replicas
// of an older version during a rolling upgrade), the database sums the
// tasks' ids and versions (TaskSums), and the versions are read only if
// the sums differ from this replica's view: reading them every minute
// was most of a replica's idle CPU with a million tasks.
func (s *Scheduler) syncTasks(ctx context.Context) error {
	gen, err := s.store.TaskGen(ctx, s.opts.App)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	if s.synced && gen == s.syncedGen {
		if now.Sub(s.syncedAt) < fullSyncEvery {
			return nil
		}
		sums, err := s.store.TaskSums(ctx, s.opts.App)
		if err != nil {
			return err
		}
		s.mu.Lock()
		same := sums == store.TaskSums(s.viewSums)
		s.mu.Unlock()
		if same {
			s.syncedAt = now
			return nil
		}
	}
	if err := s.syncAllTasks(ctx); err != nil {
		return err
	}
	s.synced, s.syncedGen, s.syncedAt = true, gen, now
	return nil
}

// taskSums is store.TaskSums of this replica's view of the tasks, kept
// as tasks are set and dropped: summing a million tasks once a minute
// would hold s.mu, which the dispatcher needs, for tens of milliseconds.
type taskSums store.TaskSums

func (v *taskSums) add(r store.Task) {
	v.Count++
	v.IDs += r.ID
	v.Versions += r.Version
}

func (v *taskSums) remove(r store.Task) {
	v.Count--
	v.IDs -= r.ID
	v.Versions -= r.Version
}

// fullSyncEvery bounds how long a task change that did not bump the task
// generation takes to reach the replicas.
const fullSyncEvery = time.Minute

// syncAllTasks compares the version of every task with the local view.
func (s *Scheduler) syncAllTasks(ctx context.Context) error {
	versions, err := s.store.TaskVersions(ctx, s.opts.App)
	if err != nil {
		return err
	}
	s.mu.Lock()
	var changed []string
	for code, v := range versions {
		if t := s.tasks[code]; t == nil || t.row.Version != v {
			changed = append(changed, code)
		}
	}
	for code := range s.tasks {
		if _, ok := versions[code]; !ok {
			s.dropTaskLocked(code)
		}
	}
	s.mu.Unlock()
	if len(changed) > 20 {
		rows, err := s.store.Tasks(ctx, s.opts.App)
		if err != nil {
			return err
		}
		for _, r := range rows {
			s.adoptTask(r)
		}
		return nil
	}
	for _, code := range changed {
		row, err := s.store.Task(ctx, s.opts.App, code)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		s.adoptTask(row)
	}
	return nil
}

// registerAll records, at Start, the tasks registered in this process
// (store.RegisterTasks: the first replica of a fleet to start writes the
// rows, the others find them written) and loads every task of the app
// into the view (loadTasks).
func (s *Scheduler) registerAll(ctx context.Context) error {
	cfgs := s.registered()
	defs := make([]store.TaskDef, len(cfgs))
	shared := map[store.Definition]*store.Definition{} // a million tasks, a few option sets
	for i, c := range cfgs {
		d := c.definition()
		p := shared[d]
		if p == nil {
			p = &d
			shared[d] = p
		}
		defs[i] = store.TaskDef{Code: c.code, Name: c.name, Def: p}
	}
	gen, err := s.store.RegisterTasks(ctx, s.opts.App, defs)
	if err != nil {
		return fmt.Errorf("xtimer: record %d tasks: %w", len(defs), err)
	}
	missing, err := s.loadTasks(ctx, gen, len(cfgs), shared)
	if err != nil || missing == 0 {
		return err
	}
	// The last registration left the rows, and no task write was recorded
	// since, yet some are gone: deleted by hand. Write them again.
	s.log.Warn("registered tasks missing from the database; recording them again", "tasks", missing)
	if gen, err = s.store.ReregisterTasks(ctx, s.opts.App, defs); err != nil {
		return fmt.Errorf("xtimer: record %d tasks: %w", len(defs), err)
	}
	if missing, err = s.loadTasks(ctx, gen, len(cfgs), shared); err == nil && missing > 0 {
		err = fmt.Errorf("xtimer: %d registered tasks missing from the database right after they were recorded", missing)
	}
	return err
}

// loadTasks fills the view with every task of the app, as of task
// generation gen, at which the rows of the tasks registered here hold
// their definitions (registerAll). For those it reads only the rows'
// heads (store.TaskHeads) and takes the rest from the registration; the
// tasks of other kinds and of other replicas' code it reads whole. If the
// generation moved meanwhile, someone wrote tasks, and every row is read
// whole instead. It returns how many of the registered tasks registerAll
// recorded have no row. shared holds the definitions it recorded, for the
// tasks' rows to share.
func (s *Scheduler) loadTasks(ctx context.Context, gen int64, registered int, shared map[store.Definition]*store.Definition) (missing int, err error) {
	found := 0
	var others []string
	err = s.store.TaskHeads(ctx, s.opts.App, func(h store.TaskHead) error {
		s.mu.Lock()
		c := s.handlers[h.Code]
		s.mu.Unlock()
		if c == nil || h.Kind != store.KindFunc {
			others = append(others, h.Code)
			return nil
		}
		found++
		def := c.definition()
		p := shared[def]
		if p == nil { // registered after registerAll listed the handlers
			p = &def
		}
		s.adoptTask(store.TaskFrom(s.opts.App, store.TaskDef{Code: c.code, Name: c.name, Def: p}, h))
		return nil
	})
	if err != nil {
		return 0, err
	}
	rows, err := s.store.TasksByCode(ctx, s.opts.App, others)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		s.adoptTask(r)
	}
	now := s.clock.Now()
	last, err := s.store.TaskGen(ctx, s.opts.App)
	if err != nil {
		return 0, err
	}
	if last != gen {
		all, err := s.store.Tasks(ctx, s.opts.App)
		if err != nil {
			return 0, err
		}
		for _, r := range all {
			s.adoptTask(r)
		}
	}
	s.synced, s.syncedGen, s.syncedAt = true, last, now
	return max(registered-found, 0), nil
}
