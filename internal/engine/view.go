package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is this replica's view of the app's tasks: every task as the
// database says (taskState), loaded at Start and kept in step with the
// changes other replicas and the console make (syncTasks).

// view is the registry of the handlers registered here and the view of
// every task of the app, which it keeps in step with the store
// (registerAll at Start, syncTasks every tick, adoptTask after a change
// made here). Its lock guards the fields below mu, and is taken before
// the planner's or the dispatcher's where a section needs two.
type view struct {
	// What it is wired to (init), fixed after.
	store   *store.Store
	app     string
	buckets int
	clock   Clock
	log     *slog.Logger
	slots   slotReopener // the planner

	mu sync.Mutex
	// handlers are the handlers registered in this process, in the order
	// they were registered: a code's list of them is often sorted already,
	// which spares the store a sort of a million (RegisterTasks).
	handlers registry
	// others are the tasks of the app, as stored, not registered here; a
	// registered task's state is in its registration (taskLocked).
	others map[string]*taskState
	// byBucket indexes tasks by bucket, so that planning a slot reads the
	// tasks of its bucket, not every task (setTaskLocked, dropTaskLocked),
	// each with its quiet span (bucketTask).
	byBucket [][]bucketTask
	// defs holds one copy of each task definition in the view, for the
	// tasks defined alike to share (sharedDefLocked).
	defs map[store.Definition]*store.Definition
	// bucketFrom is, per bucket, an instant (Unix ms) before which no task
	// of the bucket has a fire: the earliest firesFrom of the tasks it has
	// had (math.MaxInt64 while it has none). Planning skips the slots
	// before it (catch-up after a first start) without looking at a task.
	bucketFrom []int64
	// bucketQuiet is, per bucket, a span of time in which no task of the
	// bucket has a fire, as the last full walk of its tasks (firesIn)
	// found; a change to a task of the bucket clears it (setTaskLocked).
	bucketQuiet []quietSpan
	// bucketGen counts, per bucket, the changes to its tasks; planned
	// keeps, per bucket, the fires of the last minutes firesIn walked in
	// full, valid while the bucket's generation is the one they were
	// found at. A slot held by another replica is planned again at each
	// recheck of its lock (every second or two), as is the next minute
	// at each tick until its claim: with a million tasks, walking the
	// bucket each time was most of an idle replica's CPU.
	bucketGen []int
	planned   [][2]plannedSlot
	// viewSums sums up tasks, for the minute check against the database's
	// (syncTasks).
	viewSums taskSums
	// codesGen counts the changes to which tasks exist and which of them
	// this replica runs; claimSet caches what claimCodes derived from them.
	codesGen int
	claimSet claimSet
	// placedDuring is not nil while syncAllTasks reads every task's
	// version, and names the tasks new to the view placed meanwhile (an
	// API call's adoption, CreateHTTPTask's): the read may predate their
	// rows, and they are not to be taken for deleted.
	placedDuring map[string]bool
	// handlersGen counts the changes to the handlers registered here, for
	// the heartbeat, which lists them.
	handlersGen int
	// calendars are the app's calendars and the tasks' exclusions
	// (calendar.go).
	calendars calendarBook
	// sharded holds the codes of the sharded and broadcast tasks, and
	// shardGen counts its changes (shard.go).
	sharded  map[string]bool
	shardGen int

	// deferred is set while the rows of a deferred registration are
	// being written (catalog.go): its tasks are in the view before their
	// rows; a full sync drops no task registered here for a missing row,
	// and the minute's sums check, which cannot match meanwhile, waits.
	deferred bool

	// The task generation of the last sync that read every version, and
	// when (syncTasks). The tick loop and Start only.
	synced    bool
	syncedGen int64
	syncedAt  time.Time
	// deferFrom is Config.DeferFrom; write is the deferred registration
	// registerAll began, for Start to hand to the catalog writer. Start
	// only.
	deferFrom int
	write     *deferredWrite
}

// slotReopener is what the view asks of the planner (loop.go): to plan
// again the slots of a task whose fires changed.
type slotReopener interface {
	reopenSlots(t *taskState, now time.Time)
}

// init makes the empty view of s's app; the planner (slots) is wired in
// once it is built.
func (v *view) init(s *Engine) {
	v.store, v.app, v.buckets, v.clock, v.log = s.store, s.opts.App, s.opts.Buckets, s.clock, s.log
	v.deferFrom = s.opts.DeferFrom
	if v.deferFrom == 0 {
		v.deferFrom = DefaultDeferFrom
	}
	buckets := s.opts.Buckets
	v.others = map[string]*taskState{}
	v.byBucket, v.defs = make([][]bucketTask, buckets), map[store.Definition]*store.Definition{}
	v.sharded = map[string]bool{}
	v.bucketFrom, v.bucketQuiet = make([]int64, buckets), make([]quietSpan, buckets)
	v.bucketGen, v.planned = make([]int, buckets), make([][2]plannedSlot, buckets)
	for b := range v.bucketFrom {
		v.bucketFrom[b] = math.MaxInt64
	}
}

// taskState is a task as the database says, shared by every replica. It
// keeps of the row what the engine reads, and points to its code-defined
// columns, which the tasks defined alike share (view.defs): a replica holds
// a million of these, in slabs (loadTasks), which is why what few tasks
// have is apart (rare) and the small fields are packed at the end.
type taskState struct {
	code                 string
	version              int64
	createdMs, updatedMs int64
	base                 *taskBase // its definition and schedule (def, sched)
	// excl is the days the task's fires skip (calendar.go); nil, for most
	// tasks, when it excludes none.
	excl   *exclusion
	rare   *taskRare // nil for a task that has none of it
	pos    int32     // index in view.byBucket[bucket]
	bucket uint16    // Options.Buckets is at most 4096
	status taskStatus
}

// bucketTask is a task of a bucket (view.byBucket) and its quiet span:
// its schedule has no fire after quietFrom and before quietUntil (its
// next one), both Unix ns. firesIn skips the task in the minutes between
// without computing its schedule, so a daily task costs one Next a day,
// not one a minute; and without reading the task's state, so a walk of a
// bucket reads its entries in a row rather than a million states
// scattered on the heap, a cache miss each (most of a walk's time when
// the span was the state's). A new state of the task is put in with no
// span. Read and written under view.mu. (Instants here are Unix ns, not
// time.Time, which takes three times the room. Schedules end at
// cron.MaxYear, well within int64 ns.)
type bucketTask struct {
	t                     *taskState
	quietFrom, quietUntil int64
}

// taskBase is what a task's fires follow: the definition that applies
// and its schedule. The tasks registered alike share the one of their
// options (Shared.base), while their rows override neither; others have
// their own.
type taskBase struct {
	// def is the code's definition, shared by the tasks defined alike
	// (view.defs), or, for a task with option overrides (SetTaskOptions),
	// a copy of it with the overridden fields replaced, its own
	// (withOptionOverrides).
	def   *store.Definition
	sched cron.Schedule // nil when the stored spec does not parse
}

// def is the definition that applies to the task (taskBase.def).
func (t *taskState) def() *store.Definition {
	if t.base == nil {
		return nil
	}
	return t.base.def
}

// sched is the task's schedule, nil when the stored spec does not parse
// (taskBase.sched).
func (t *taskState) sched() cron.Schedule {
	if t.base == nil {
		return nil
	}
	return t.base.sched
}

// taskStatus is a task's stored status (store.TaskActive, store.TaskPaused)
// in a byte; another text, which no writer of this version stores, is
// statusOther, its text in taskRare.
type taskStatus uint8

const (
	statusOther taskStatus = iota
	statusActive
	statusPaused
)

// statusOf is the taskStatus of a stored status, and the text to keep
// beside it for statusOther ("" for the others).
func statusOf(status string) (taskStatus, string) {
	switch status {
	case store.TaskActive:
		return statusActive, ""
	case store.TaskPaused:
		return statusPaused, ""
	}
	return statusOther, status
}

// taskRare is what few tasks have: a pointer to it, nil for the others,
// where its fields took 40 bytes in each of a million states.
type taskRare struct {
	over *override // the console's schedule overrides; nil when none
	// http is the callback of a task of kind http (every replica runs its
	// fires); nil for Go tasks, and for an http task whose stored target
	// does not decode (it does not fire).
	http *HTTPSpec
	// statusText is the stored status when it is statusOther.
	statusText string
	// sinceNs is when this replica adopted the task's schedule, if it
	// changed (or the task resumed) while the replica ran, in Unix ns: the
	// task has no fires before it, so planning the current minute again
	// never back-fills its past. Zero otherwise: the task's creation is the
	// limit then.
	sinceNs int64
}

// statusText is the task's status as stored.
func (t *taskState) statusText() string {
	switch t.status {
	case statusActive:
		return store.TaskActive
	case statusPaused:
		return store.TaskPaused
	}
	if t.rare == nil {
		return ""
	}
	return t.rare.statusText
}

// over is the console's schedule overrides of the task, nil when none.
func (t *taskState) over() *override {
	if t.rare == nil {
		return nil
	}
	return t.rare.over
}

// httpSpec is the callback of an HTTP task (taskRare.http), nil for the
// others.
func (t *taskState) httpSpec() *HTTPSpec {
	if t.rare == nil {
		return nil
	}
	return t.rare.http
}

// sinceNs is taskRare.sinceNs, zero for a task without it.
func (t *taskState) sinceNs() int64 {
	if t.rare == nil {
		return 0
	}
	return t.rare.sinceNs
}

// setSince sets taskRare.sinceNs. adoptLocked calls it as it puts t in
// the view, under v.mu: no one has read t yet.
func (t *taskState) setSince(ns int64) { t.editRare(func(r *taskRare) { r.sinceNs = ns }) }

// editRare changes what few tasks have (taskRare) by edit, on a copy:
// a state someone reads is never changed in place.
func (t *taskState) editRare(edit func(r *taskRare)) {
	var r taskRare
	if t.rare != nil {
		r = *t.rare
	}
	edit(&r)
	t.setRare(r)
}

// setRare sets what few tasks have, leaving rare nil when it is none.
func (t *taskState) setRare(r taskRare) {
	if r == (taskRare{}) {
		t.rare = nil
		return
	}
	t.rare = new(taskRare) // not &r, which would move every r to the heap
	*t.rare = r
}

// override is what a console edit of a task's schedule stored
// (store.Task's SpecOverride, DialectOverride, TZOverride).
type override struct{ spec, dialect, zone *string }

func overrideOf(spec, dialect, zone *string) *override {
	if spec == nil && dialect == nil && zone == nil {
		return nil
	}
	return &override{spec, dialect, zone}
}

func (t *taskState) kind() string { return t.def().Kind }

// effective is the schedule that applies (store.Task.Effective).
func (t *taskState) effective() (spec, dialect, zone string) {
	row := store.Task{Spec: t.def().Spec, Dialect: t.def().Dialect, TimeZone: t.def().TimeZone}
	if o := t.over(); o != nil {
		row.SpecOverride, row.DialectOverride, row.TZOverride = o.spec, o.dialect, o.zone
	}
	return row.Effective()
}

func (t *taskState) active() bool {
	return t.status == statusActive && t.sched() != nil && (t.def().Kind != store.KindHTTP || t.httpSpec() != nil)
}

// firesAt reports whether at is an instant of the task's current schedule.
// A fire recorded under a schedule an operator has since replaced, and that
// the new one does not have, is not: it does not run (see dispatch).
// Schedules fire on whole seconds, so the millisecond run times stored are
// exact, whatever the zone.
func (t *taskState) firesAt(at time.Time) bool {
	if t.sched() == nil {
		return false
	}
	ms := at.UnixMilli()
	if t.sched().Next(at.Add(-time.Nanosecond)).UnixMilli() == ms {
		return true
	}
	// Not found from just before: look from a minute before, so that a fire
	// is never skipped where Next is not monotone. (It is not at a
	// spring-forward gap: from 01:59:59 New York time, Next skips the fire
	// a "30 2 * * *" spec has at 03:00 that day; from 01:59:00 it finds it.)
	for next := t.sched().Next(at.Add(-time.Minute)); !next.IsZero() && next.UnixMilli() <= ms; next = t.sched().Next(next) {
		if next.UnixMilli() == ms {
			return true
		}
	}
	return false
}

// firesFrom is the instant, in Unix ms, before which the task has no
// fire: its creation, or the adoption of its current schedule (since).
func (t *taskState) firesFrom() int64 {
	if since := t.sinceNs(); since != 0 {
		return max(t.createdMs, since/int64(time.Millisecond))
	}
	return t.createdMs
}

func (t *taskState) loc() *time.Location {
	if t.sched() != nil {
		return t.sched().Location()
	}
	return time.UTC
}

func (t *taskState) endAt() time.Time {
	if t.def().EndAtMs == 0 {
		return time.Time{}
	}
	return time.UnixMilli(t.def().EndAtMs)
}

// misfireWindowMs is how late a missed fire of the task may still run.
func (t *taskState) misfireWindowMs() int64 {
	if t == nil || t.def().MisfireWindowMs <= 0 {
		return DefaultMisfireWindow.Milliseconds()
	}
	return t.def().MisfireWindowMs
}

func (t *taskState) backoff() executor.Backoff {
	return executor.Backoff{
		Base:   max(time.Duration(t.def().BackoffBaseMs)*time.Millisecond, time.Millisecond),
		Max:    max(time.Duration(t.def().BackoffMaxMs)*time.Millisecond, time.Millisecond),
		Jitter: 0.2,
	}
}

// bucketOf is FNV-1a of the code, modulo buckets: every replica, of any
// version, puts a task in the same bucket.
func bucketOf(code string, buckets int) int {
	h := uint32(2166136261)
	for i := 0; i < len(code); i++ {
		h ^= uint32(code[i])
		h *= 16777619
	}
	return int(h % uint32(buckets)) //nolint:gosec // G115: Options.Buckets is validated to 1..4096
}

// maxSharedDefs bounds view.defs; past it the table starts again empty (the
// tasks keep theirs). Tasks share a few definitions; HTTP tasks one each.
const maxSharedDefs = 100_000

// sharedDefLocked returns the one copy of d this replica keeps. v.mu is
// held.
func (v *view) sharedDefLocked(d store.Definition) *store.Definition {
	if p := v.defs[d]; p != nil {
		return p
	}
	if len(v.defs) >= maxSharedDefs {
		clear(v.defs)
	}
	p := &d
	v.defs[d] = p
	return p
}

// stateOf is the view of a stored task from its row's head; base holds
// its code's definition, shared, which the head's option overrides
// replace fields of (withOptionOverrides), and its schedule.
func (v *view) stateOf(h store.TaskHead, base *taskBase) taskState {
	status, text := statusOf(h.Status)
	if def := v.withOptionOverrides(h.Code, base.def, h.OptionOverrides); def != base.def {
		base = &taskBase{def: def, sched: base.sched}
	}
	t := taskState{
		code: h.Code, version: h.Version, createdMs: h.CreatedMs, updatedMs: h.UpdatedMs,
		status: status, base: base,
		bucket: uint16(bucketOf(h.Code, v.buckets)), //nolint:gosec // G115: Options.Buckets is at most 4096
	}
	t.setRare(taskRare{over: overrideOf(h.SpecOverride, h.DialectOverride, h.TZOverride), statusText: text})
	return t
}

// withOptionOverrides is the definition that applies to a task whose
// code defines def and whose row stores the option overrides j: def
// itself when there are none, so the tasks without overrides keep
// sharing one definition and the fire path reads t.def() as ever; else a
// copy of def, the task's own, with the overridden fields replaced.
// Overrides that do not decode are logged and ignored: the code's
// options apply.
func (v *view) withOptionOverrides(code string, def *store.Definition, j store.OverridesJSON) *store.Definition {
	if j == "" {
		return def
	}
	o, err := j.Decode()
	if err != nil {
		v.log.Error("stored option overrides do not decode; the code's options apply", "task", code, "err", err)
		return def
	}
	d := o.Apply(*def)
	return &d
}

// storedSchedule parses the schedule a stored row names (Task.Schedule);
// nil, logged, when it does not parse: the task does not fire.
func (v *view) storedSchedule(row store.Task) cron.Schedule {
	sched, err := row.Schedule()
	if err != nil {
		v.log.Error("stored schedule does not parse; the task will not fire", "task", row.Code, "err", err)
		return nil
	}
	return sched
}

// adoptTask replaces the local view of one task with its stored row. When
// the row changes which fires the task has from now on (a task new here, a
// schedule edited, reset or redeployed, a resume), the minutes already
// planned are planned again for it (reopenSlots); fires already recorded
// that its schedule no longer has are skipped when due (dispatch).
func (v *view) adoptTask(row store.Task) {
	v.mu.Lock()
	def := v.sharedDefLocked(row.Definition())
	excl := v.calendars.exclusionLocked(def)
	v.mu.Unlock()
	t := new(taskState)
	*t = v.stateOf(row.Head(), &taskBase{def: def, sched: v.storedSchedule(row)})
	t.excl = excl
	if row.Kind == store.KindHTTP {
		spec, err := DecodeHTTPSpec(row)
		if err != nil {
			v.log.Error("stored http target does not decode; the task will not fire", "task", row.Code, "err", err)
		}
		if spec != nil {
			t.editRare(func(r *taskRare) { r.http = spec })
		}
	}
	now := v.clock.Now()
	v.mu.Lock()
	old, rescheduled := v.adoptLocked(t, now)
	v.mu.Unlock()
	v.logAdopted(old, t, rescheduled)
}

// adoptLocked puts t in the view in place of the task's old state, unless
// that is newer; it returns the old state, if any, and whether t changes
// its schedule. v.mu is held.
func (v *view) adoptLocked(t *taskState, now time.Time) (old *taskState, rescheduled bool) {
	old = v.taskLocked(t.code)
	if old != nil && old.createdMs == t.createdMs && t.version < old.version {
		// A read that raced with a newer change (the tick's sync and an
		// operator's call on this replica): keep the newer view.
		return nil, false
	}
	v.setTaskLocked(t, old)
	rescheduled = old != nil && scheduleChanged(old, t)
	resumed := old != nil && old.status != statusActive && t.status == statusActive
	switch {
	case old == nil:
		v.slots.reopenSlots(t, now)
	case rescheduled || resumed:
		t.setSince(now.UnixNano())
		v.slots.reopenSlots(t, now)
	default:
		t.setSince(old.sinceNs())
	}
	return old, rescheduled
}

// logAdopted logs what an adoption changed that an operator acts on.
func (v *view) logAdopted(old, t *taskState, rescheduled bool) {
	if old != nil && old.statusText() != t.statusText() {
		v.log.Info("task "+t.statusText(), "task", t.code)
	}
	if rescheduled {
		spec, dialect, zone := t.effective()
		v.log.Info("task schedule changed; it applies from now on", "task", t.code, "spec", spec, "dialect", dialect, "zone", zone)
	}
}

// taskLocked returns the view's state of a task, nil when it has none. A
// task registered here keeps its state in its registration, the others in
// view.others: a replica of a million tasks keeps one map of them, not two.
// v.mu is held.
func (v *view) taskLocked(code string) *taskState {
	if r := v.handlers.get(code); r != nil {
		return r.state
	}
	return v.others[code]
}

// runsHereLocked reports whether this replica can run attempts of the
// task: it registered the task's handler, or the task is an HTTP callback
// (httprun.go). v.mu is held.
func (v *view) runsHereLocked(code string) bool {
	if v.handlers.get(code) != nil {
		return true
	}
	t := v.others[code]
	return t != nil && t.httpSpec() != nil
}

// fireTask returns the task of code (nil once deleted), its registration
// when it runs as a Go handler registered here, and whether this replica
// runs it: what the dispatcher checks of a fire (fireView).
func (v *view) fireTask(code string) (t *taskState, reg *registration, runs bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	// One look-up of the registry, not one for each answer: this is on
	// the fire path (taskLocked, runsHereLocked).
	if reg = v.handlers.get(code); reg != nil {
		return reg.state, reg, true
	}
	t = v.others[code]
	return t, nil, t != nil && t.httpSpec() != nil
}

// eachTaskLocked calls f with every task of the view. v.mu is held; f
// must not add or remove tasks.
func (v *view) eachTaskLocked(f func(t *taskState)) {
	for r := range v.handlers.all() {
		if r.state != nil {
			f(r.state)
		}
	}
	for _, t := range v.others {
		f(t)
	}
}

// setTaskLocked puts t in the local view of the tasks, in the place of
// old, the task's state there if it has one. v.mu is held.
func (v *view) setTaskLocked(t, old *taskState) {
	if r := v.handlers.get(t.code); r != nil {
		r.state = t
	} else {
		v.others[t.code] = t
	}
	v.placeLocked(t, old)
}

// placeLocked files t, the task's new state in the view, in the place of
// old: in its bucket, the sums, the generation of codes. v.mu is held.
func (v *view) placeLocked(t, old *taskState) {
	v.bucketFrom[t.bucket] = min(v.bucketFrom[t.bucket], t.firesFrom())
	v.bucketQuiet[t.bucket] = quietSpan{} // t may fire in it
	v.bucketGen[t.bucket]++
	v.noteShardedLocked(t.code, t)
	if old == nil || (old.httpSpec() == nil) != (t.httpSpec() == nil) {
		v.codesGen++
	}
	if old == nil && v.placedDuring != nil {
		v.placedDuring[t.code] = true
	}
	if old != nil {
		v.viewSums.remove(old)
		t.pos = old.pos // same code, same bucket
		v.byBucket[t.bucket][t.pos] = bucketTask{t: t}
	} else {
		t.pos = int32(len(v.byBucket[t.bucket])) //nolint:gosec // G115: a bucket holds far fewer than 2^31 tasks
		v.byBucket[t.bucket] = append(v.byBucket[t.bucket], bucketTask{t: t})
	}
	v.viewSums.add(t)
}

// dropTaskLocked removes a task from the local view. v.mu is held.
func (v *view) dropTaskLocked(code string) {
	t := v.taskLocked(code)
	if t == nil {
		return
	}
	if r := v.handlers.get(code); r != nil {
		r.state = nil
	} else {
		delete(v.others, code)
	}
	in := v.byBucket[t.bucket]
	last := in[len(in)-1]
	in[t.pos], last.t.pos = last, t.pos
	in[len(in)-1] = bucketTask{}
	v.byBucket[t.bucket] = in[:len(in)-1]
	v.viewSums.remove(t)
	v.codesGen++
	v.bucketGen[t.bucket]++
	v.noteShardedLocked(code, nil)
}

// scheduleChanged reports whether two states of a task name different
// schedules (spec, dialect or zone, console overrides included).
func scheduleChanged(a, b *taskState) bool {
	as, ad, az := a.effective()
	bs, bd, bz := b.effective()
	return as != bs || ad != bd || az != bz
}

// syncTasks picks up changes other replicas and the console made. Every
// write to the tasks bumps the app's task generation in its transaction,
// so one single-row read a second tells whether anything changed; only
// then the versions of all tasks are read, and full rows only for what
// changed. Every fullSyncEvery, for writers that do not bump it (replicas
// of an older version during a rolling upgrade), the database sums the
// tasks' creation instants and versions (TaskSums), and the versions are read only if
// the sums differ from this replica's view: reading them every minute
// was most of a replica's idle CPU with a million tasks.
func (v *view) syncTasks(ctx context.Context) error {
	gen, err := v.store.TaskGen(ctx, v.app)
	if err != nil {
		return err
	}
	now := v.clock.Now()
	if err := v.syncCalendars(ctx, gen, now); err != nil {
		return err
	}
	if v.synced && gen == v.syncedGen {
		if now.Sub(v.syncedAt) < fullSyncEvery {
			return nil
		}
		sums, err := v.store.TaskSums(ctx, v.app)
		if err != nil {
			return err
		}
		v.mu.Lock()
		same := sums == store.TaskSums(v.viewSums) || v.deferred
		v.mu.Unlock()
		if same {
			v.syncedAt = now
			return nil
		}
	}
	if err := v.syncAllTasks(ctx); err != nil {
		return err
	}
	v.synced, v.syncedGen, v.syncedAt = true, gen, now
	return nil
}

// taskSums is store.TaskSums of this replica's view of the tasks, kept
// as tasks are set and dropped: summing a million tasks once a minute
// would hold view.mu, which the dispatcher needs, long enough to delay
// the fires starting meanwhile.
type taskSums store.TaskSums

func (v *taskSums) add(t *taskState) {
	v.Count++
	v.Created += store.CreatedTerm(t.createdMs)
	v.Versions += t.version
}

func (v *taskSums) remove(t *taskState) {
	v.Count--
	v.Created -= store.CreatedTerm(t.createdMs)
	v.Versions -= t.version
}

// fullSyncEvery bounds how long a task change that did not bump the task
// generation takes to reach the replicas.
const fullSyncEvery = time.Minute

// syncAllTasks compares the version of every task with the local view.
func (v *view) syncAllTasks(ctx context.Context) error {
	v.beginVersionsRead()
	versions, err := v.store.TaskVersions(ctx, v.app)
	v.mu.Lock()
	placed := v.endVersionsReadLocked()
	if err != nil {
		v.mu.Unlock()
		return err
	}
	changed := v.applyVersionsLocked(versions, placed)
	v.mu.Unlock()
	return v.adoptChanged(ctx, changed)
}

// beginVersionsRead notes that a read of every task's version begins: the
// tasks placed in the view from now until endVersionsReadLocked are not
// dropped for missing from it. Only the tick loop reads versions.
func (v *view) beginVersionsRead() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.placedDuring = map[string]bool{}
}

// endVersionsReadLocked ends the read beginVersionsRead began and returns
// the tasks placed meanwhile. v.mu is held.
func (v *view) endVersionsReadLocked() map[string]bool {
	placed := v.placedDuring
	v.placedDuring = nil
	return placed
}

// applyVersionsLocked drops from the view the tasks that versions, every
// task's version as read, does not have, but for those placed during the
// read (placed): a task created through this replica's API while the tick
// read the versions was dropped, its row not in the read, and a manual run
// triggered right after was skipped as deleted. It returns the codes whose
// version differs from the view's. v.mu is held.
func (v *view) applyVersionsLocked(versions map[string]int64, placed map[string]bool) []string {
	var changed []string
	for code, version := range versions {
		if t := v.taskLocked(code); t == nil || t.version != version {
			changed = append(changed, code)
		}
	}
	var gone []string
	missing := func(t *taskState) {
		if _, ok := versions[t.code]; !ok && !placed[t.code] {
			gone = append(gone, t.code)
		}
	}
	if v.deferred { // the tasks registered here may have no row yet
		for _, t := range v.others {
			missing(t)
		}
	} else {
		v.eachTaskLocked(missing)
	}
	for _, code := range gone {
		v.dropTaskLocked(code)
	}
	return changed
}

// adoptChanged reads again the rows of the tasks whose version changed,
// all of them when there are many, and adopts them.
func (v *view) adoptChanged(ctx context.Context, changed []string) error {
	if len(changed) > 20 {
		rows, err := v.store.Tasks(ctx, v.app)
		if err != nil {
			return err
		}
		for _, r := range rows {
			v.adoptTask(r)
		}
		return nil
	}
	for _, code := range changed {
		row, err := v.store.Task(ctx, v.app, code)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		v.adoptTask(row)
	}
	return nil
}

// registerAll records, at Start, the tasks registered in this process
// (store.RegisterTasks: the first replica of a fleet to start writes the
// rows, the others find them written) and loads every task of the app
// into the view (loadTasks).
//
// On an app without tasks, with many to register, the rows' write is
// deferred (store.BeginRegistration): the view is filled from the
// registrations (adoptRegistered), and Start hands the write (v.write)
// to the catalog writer (catalog.go).
func (v *view) registerAll(ctx context.Context) error {
	v.mu.Lock()
	v.handlers.index() // now rather than at the first fire's look-up
	defs := make([]store.TaskDef, 0, v.handlers.len())
	regs := make([]*registration, 0, v.handlers.len())
	for r := range v.handlers.all() {
		defs = append(defs, store.TaskDef{Code: r.code, Name: r.name(), Def: r.opts.Def})
		regs = append(regs, r)
	}
	v.mu.Unlock()
	reg, err := v.store.BeginRegistration(ctx, v.app, defs, v.deferFrom)
	if err != nil {
		return fmt.Errorf("xtimer: record %d tasks: %w", len(defs), err)
	}
	if reg.Deferred {
		v.write = &deferredWrite{reg: reg, regs: regs}
		v.adoptRegistered(v.write)
		return nil
	}
	gen := reg.Gen
	missing, err := v.loadTasks(ctx, gen, regs, reg.UniformMs)
	if err != nil || missing == 0 {
		return err
	}
	// The last registration left the rows, and no task write was recorded
	// since, yet some are gone: deleted by hand. Write them again.
	v.log.Warn("registered tasks missing from the database; recording them again", "tasks", missing)
	if gen, err = v.store.ReregisterTasks(ctx, v.app, defs); err != nil {
		return fmt.Errorf("xtimer: record %d tasks: %w", len(defs), err)
	}
	if missing, err = v.loadTasks(ctx, gen, regs, 0); err == nil && missing > 0 {
		err = fmt.Errorf("xtimer: %d registered tasks missing from the database right after they were recorded", missing)
	}
	return err
}

// loadBatch is how many rows loadTasks adopts per hold of v.mu.
const loadBatch = 512

// loadTasks fills the view with every task of the app, as of task
// generation gen, at which the rows of the tasks registered here hold
// their definitions (registerAll). For those it reads only the rows'
// heads (store.TaskHeads) and takes the rest from the registration, its
// parsed schedule included unless the console overrides it; the tasks of
// other kinds and of other replicas' code it reads whole. If the
// generation moved meanwhile, someone wrote tasks, and every row is read
// whole instead. It returns how many of the registered tasks registerAll
// recorded (regs) have no row.
//
// With uniformMs (store.Registration.UniformMs), into an empty view, it
// reads only the heads of the rows that are not as the app's deferred
// registration of these tasks wrote them (store.TaskHeadsBut), and takes
// the others as written (adoptAsWritten); the rows' count
// (store.CountTasks) less the heads read must be that of the registered
// tasks no head was read for. A count that differs (a row deleted by
// hand) reads every head, as without uniformMs.
func (v *view) loadTasks(ctx context.Context, gen int64, regs []*registration, uniformMs int64) (missing int, err error) {
	registered := len(regs)
	found := 0
	var others []string
	type head struct {
		store.TaskHead
		reg *registration // nil: not registered here
	}
	v.mu.Lock()
	// Into an empty view (Start), every head is a task new here, once:
	// no old state to look up, a million times.
	fresh := v.viewSums.Count == 0
	if fresh {
		v.sizeViewLocked(registered)
	}
	v.mu.Unlock()
	uniform := fresh && uniformMs != 0
	adopt := func(heads []head) {
		now := v.clock.Now()
		slab := make([]taskState, len(heads)) // one allocation per batch, not per task
		v.mu.Lock()
		defer v.mu.Unlock()
		for i := range heads {
			h, r := &heads[i].TaskHead, heads[i].reg
			if r == nil || h.Kind != store.KindFunc {
				others = append(others, h.Code)
				continue
			}
			found++
			t := &slab[i]
			*t = v.stateOf(*h, &r.opts.base) // h.Code is r.code (intern)
			t.excl = v.calendars.exclusionLocked(r.opts.Def)
			if t.over() != nil { // the console's schedule, not the code's
				t.base = &taskBase{def: t.def(), sched: v.storedSchedule(store.TaskFrom(v.app, store.TaskDef{Code: r.code, Def: r.opts.Def}, *h))}
			}
			if fresh {
				r.state = t // r has no state: nothing to look up, a million times
				v.placeLocked(t, nil)
				v.slots.reopenSlots(t, now)
			} else if old, rescheduled := v.adoptLocked(t, now); old != nil {
				v.logAdopted(old, t, rescheduled)
			}
		}
	}
	// The rows are read (and their codes found among the registrations)
	// while the batch before is adopted, on another CPU: a restart of a
	// million tasks spends about as long on each. Three batches go round
	// between the two (free, full).
	free, full := make(chan []head, 3), make(chan []head, 3)
	for range 3 {
		free <- make([]head, 0, loadBatch)
	}
	adopted := make(chan struct{})
	go func() {
		defer close(adopted)
		for heads := range full {
			adopt(heads)
			free <- heads[:0]
		}
	}()
	var reg *registration
	intern := v.interner(&reg)
	heads := <-free
	headsRead := int64(0)
	read := func(h store.TaskHead) error {
		headsRead++
		if heads = append(heads, head{h, reg}); len(heads) == loadBatch {
			full <- heads
			heads = <-free
		}
		return nil
	}
	// The rows are counted by the database while the changed ones' heads
	// are read and adopted, and the tasks are adopted as written before
	// the count is in: both are scans of the whole table there.
	type count struct {
		n   int64
		err error
	}
	counted := make(chan count, 1)
	if uniform {
		go func() {
			n, countErr := v.store.CountTasks(ctx, v.app)
			counted <- count{n, countErr}
		}()
		err = v.store.TaskHeadsBut(ctx, v.app, uniformMs, intern, read)
	} else {
		err = v.store.TaskHeads(ctx, v.app, intern, read)
	}
	full <- heads
	close(full)
	<-adopted
	if err != nil {
		if uniform {
			<-counted
		}
		return 0, err
	}
	if uniform {
		unread := v.unadopted(regs)
		v.adoptAsWritten(unread, uniformMs)
		c := <-counted
		if c.err != nil {
			return 0, c.err // Start tries again, into a view that is not empty: every head is read
		}
		if asWritten := c.n - headsRead; asWritten != int64(len(unread)) {
			// A row deleted by hand: the view has a task without a row. Every
			// head is read into it, and registerAll records the missing rows.
			v.log.Warn("the app's rows are not the registration's: reading every task", "unread", len(unread), "as written", asWritten)
			return v.loadTasks(ctx, gen, regs, 0)
		}
		v.log.Debug("xtimer read the heads of the changed tasks only", "read", headsRead, "as written", len(unread))
		found += len(unread)
	}
	rows, err := v.store.TasksByCode(ctx, v.app, others)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		v.adoptTask(r)
	}
	now := v.clock.Now()
	last, err := v.store.TaskGen(ctx, v.app)
	if err != nil {
		return 0, err
	}
	if last != gen {
		all, err := v.store.Tasks(ctx, v.app)
		if err != nil {
			return 0, err
		}
		for _, r := range all {
			v.adoptTask(r)
		}
	}
	v.synced, v.syncedGen, v.syncedAt = true, last, now
	return max(registered-found, 0), nil
}

// unadopted lists the registrations of regs that have no state in the
// view.
func (v *view) unadopted(regs []*registration) []*registration {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []*registration
	for _, r := range regs {
		if r.state == nil {
			out = append(out, r)
		}
	}
	return out
}

// sizeViewLocked makes room in the empty view for n tasks, so that loading
// a million does not grow the maps and slices step by step. v.mu is held.
func (v *view) sizeViewLocked(n int) {
	for b := range v.byBucket {
		v.byBucket[b] = make([]bucketTask, 0, n/len(v.byBucket)+n/(4*len(v.byBucket))+8)
	}
}

// taskCodes lists the codes of the tasks in the view, in no order.
func (v *view) taskCodes() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	codes := make([]string, 0, v.viewSums.Count)
	v.eachTaskLocked(func(t *taskState) { codes = append(codes, t.code) })
	return codes
}

// interner returns the intern function of a read of task rows
// (store.TaskHeads): a row's code is the string of its registration, found
// once per row and left in *reg (nil: not registered here), or a copy.
// Rows come in code order, so each look-up starts where the last one
// found its registration (registry.lookup).
func (v *view) interner(reg **registration) func(code []byte) string {
	next := 0
	return func(code []byte) string {
		v.mu.Lock()
		*reg = v.handlers.lookup(code, &next)
		v.mu.Unlock()
		if *reg != nil {
			return (*reg).code
		}
		return string(code)
	}
}
