package engine

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file starts recorded fires at their run time and records how each
// attempt ends. The invariant it keeps: a handler starts only for a row
// that exists, and only on the replica that inserted the row or won a
// conditional claim on it.

// Reasons the engine records skipped fires with, besides the store's.
const (
	// ReasonDeleted: the task of an armed fire was deleted before it ran.
	ReasonDeleted = "task deleted"
)

// dispatcher starts the fires this replica owns at their run time. It
// holds them armed until their claim, claims them in one conditional
// update (the fence), holds those claimed ahead until their run time, and
// hands each to start. Its lock guards armed, armedIDs, armedAt,
// backlogIDs, unstarted and running, which the tick loop (arm) and the attempts touch
// too; the fields marked loop only are its goroutine's alone.
type dispatcher struct {
	startstop.Base // the dispatch loop

	// What it is wired to (newDispatcher), fixed after.
	clock        Clock
	log          *slog.Logger
	app, replica string
	workers      int                                               // Options.Workers
	view         fireView                                          // the tasks, as the view has them
	store        fireStore                                         // the fence and the overlap count
	status       fireStatus                                        // the status writer
	pool         fencePool                                         // the Go handlers' pool: how many to claim (fenceRoom)
	start        func(a *attempt, r store.Execution, at time.Time) // runs a claimed fire's attempt in a (nil: a new one)
	noteDB       func(error)                                       // the database's health

	mu       sync.Mutex
	armed    fireHeap
	armedIDs map[int64]bool // executions in armed
	armedAt  map[int64]int  // fires in armed by instant (Unix ms)
	// backlogIDs are the executions in backlog, and dispatching those
	// of the dispatch round under way (popped, being checked and
	// claimed): with armedIDs, the fires the dispatcher holds, which
	// armOwned leaves alone.
	backlogIDs, dispatching map[int64]bool
	// unstarted are the fires claimed ahead and not started when the
	// dispatcher stopped, for Stop to release.
	unstarted []int64
	// running counts the attempts running here of the tasks without a
	// registration here (HTTP callbacks), and the shards running here by
	// fire (a task's run time): the shards of one fire do not overlap
	// each other. A fire that is not sharded is one row, none of whose
	// attempts runs while it is checked (runningBesides), so byFire leaves
	// it out. The attempts of a task registered here count on its
	// registration (noteRunning). The counts are split by task code into
	// stripes, each under a lock of its own apart from mu: an attempt
	// ending waits neither on the dispatcher starting the rest of its
	// instant nor on the other attempts ending with it.
	running [runStripes]runStripe
	// cancellable are the attempts running here of tasks whose overlap
	// policy is cancel_other, by execution ID: what a later fire of the
	// task stops (cancelTask, cancelIDs).
	cancellable map[int64]cancellable
	// backfills are the backfilled fires this replica owns, by task, one
	// of each task's armed at a time (backfill.go).
	backfills map[string]*backfillQueue

	wake chan struct{} // a fire was armed earlier than the dispatcher waits for
	// woken is set by poke and cleared by the loop once it has taken the
	// wake and stopped its timer: a test moving a fake clock reads it
	// (Engine.WakePending). The channel alone was empty already while the
	// loop, woken, had yet to stop its timer and read the clock, and a
	// test moved the clock under it (a fire started a second late).
	woken atomic.Bool
	// lastLead is the lead of the dispatcher's last claim ahead, which the
	// tick loop keeps its chunks of rows clear of (nextChunk).
	lastLead atomic.Int64
	// wantRoom is set while the backlog holds fires that wait for a free
	// worker (fenceNow), and only then does a worker coming free wake the
	// dispatcher (roomFreed). It is set before the room is read, so that
	// a worker that frees up after that reading sees it.
	wantRoom atomic.Bool

	// backlog holds Go-handler fires that are due and checked but wait for
	// a free worker, unclaimed (fenceNow). Loop only.
	backlog []*armedFire
	// claimed holds the Go and HTTP fires claimed ahead of their run time,
	// waiting for it; claimRTT and claimPerFire are what a claim takes, a
	// round trip or a fire of a big one (claimLead). Loop only.
	claimed      fireHeap
	claimRTT     claimCost
	claimPerFire claimCost
}

// fireView is what the dispatcher reads of the view (view.go).
type fireView interface {
	// fireTask returns the task of code (nil once deleted), its
	// registration when it runs as a Go handler registered here (nil for
	// an HTTP callback), and whether this replica runs it.
	fireTask(code string) (t *taskState, reg *registration, runs bool)
}

// fireStore is the part of the store the dispatcher calls.
type fireStore interface {
	StartFires(ctx context.Context, app string, ids []int64, replica string, claimMs int64) ([]int64, error)
	RunningCount(ctx context.Context, app, code string, runTime int64) (int64, error)
	OverlapState(ctx context.Context, app, code string, runTime, self, graceFrom int64) (store.Overlap, error)
	BackfillState(ctx context.Context, app, code string, runTime, self int64) (store.Overlap, error)
	RequestCancel(ctx context.Context, app, code string, self, runTime, now int64) (int64, error)
}

// fireStatus is the part of the status writer (status.go) the dispatcher
// queues on.
type fireStatus interface {
	started(r store.Execution, at time.Time)
	skip(r store.Execution, reason string, at time.Time)
}

// fencePool is what fenceRoom reads of the Go handlers' pool
// (executor.Pool).
type fencePool interface {
	Stats() (running, waiting int)
	MeanRun() (mean time.Duration, ok bool)
	Rate() (perSecond float64, ok bool)
}

// newDispatcher makes the dispatcher of s: the Scheduler wires it to its
// view, store, status writer and pool, and start runs the attempts.
func newDispatcher(s *Engine) *dispatcher {
	return &dispatcher{
		clock: s.clock, log: s.log, app: s.opts.App, replica: s.opts.InstanceID, workers: s.opts.Workers,
		view: &s.view, store: s.store, status: s.updates, pool: s.pool, start: s.startAttemptIn, noteDB: s.noteDB,
		armedIDs: map[int64]bool{}, armedAt: map[int64]int{}, backlogIDs: map[int64]bool{}, dispatching: map[int64]bool{}, wake: make(chan struct{}, 1),
		cancellable: map[int64]cancellable{},
	}
}

// poke wakes the dispatcher: a fire was armed, or a worker came free.
func (d *dispatcher) poke() {
	d.woken.Store(true)
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// roomFreed is called as a Go handler's worker comes free. It wakes the
// dispatcher only when fires wait in its backlog for that room: woken
// for every attempt that ended, an idle dispatcher went round its loop
// (and reset its timer) for each of an instant's fires, while the rest
// of them, here and on the replicas sharing the cores, were starting.
func (d *dispatcher) roomFreed() {
	if d.wantRoom.Load() {
		d.poke()
	}
}

// wakePending reports whether the dispatcher was woken and has yet to
// stop its timer for the round: a wake queued, or taken and not acted on.
func (d *dispatcher) wakePending() bool { return len(d.wake) > 0 || d.woken.Load() }

// runStripes is how many stripes dispatcher.running has: enough that
// the workers of a pool of 64 seldom meet on one.
const runStripes = 64

// runStripe is one stripe of dispatcher.running: the tasks whose code
// hashes to it. Flat maps: a map per task, made for each fire and
// dropped when it ended, cost two allocations a fire. The padding keeps
// each stripe's lock on a cache line of its own.
type runStripe struct {
	mu     sync.Mutex
	byTask map[string]int
	byFire map[fireRun]int
	_      [40]byte
}

// stripeSeed seeds the hash that picks a task's stripe.
var stripeSeed = maphash.MakeSeed()

// stripe returns the stripe of dispatcher.running that counts task code.
func (d *dispatcher) stripe(code string) *runStripe {
	return &d.running[maphash.String(stripeSeed, code)%runStripes]
}

// noteRunning counts an attempt of r starting here (delta 1) or ending
// (-1), reg being its task's registration here (nil for an HTTP
// callback): a task that forbids overlap checks the count (dispatch).
// Every attempt counts itself, whatever its task's policy, so that a
// policy changed while it runs finds it counted. On its registration
// that is one atomic add: the striped maps, a lock and four hashes of
// the code a fire, were a fifth of the CPU of starting an instant's fires
// (BenchmarkStartInstant).
func (d *dispatcher) noteRunning(r store.Execution, reg *registration, delta int) {
	if reg != nil {
		reg.running.Add(int32(delta)) //nolint:gosec // G115: delta is 1 or -1
		if !r.Sharded() {
			return
		}
	}
	st := d.stripe(r.TaskCode)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byTask == nil {
		st.byTask, st.byFire = map[string]int{}, map[fireRun]int{}
	}
	if reg == nil {
		bump(st.byTask, r.TaskCode, delta)
	}
	if r.Sharded() {
		bump(st.byFire, fireRun{r.TaskCode, r.RunTime}, delta)
	}
}

// bump adds delta to m[k], never below zero, and drops k at zero.
func bump[K comparable](m map[K]int, k K, delta int) {
	if n := m[k] + delta; n > 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// fireRun names a task's fire by its run time, in dispatcher.running.
type fireRun struct {
	code    string
	runTime int64
}

// runningBesides counts the attempts of task code running here for fires
// other than the one at runTime (whose other shards do not overlap it).
// An attempt counts where it began (noteRunning): on the registration
// the code had then, or in the stripes when it had none, so the count is
// the sum of both; reg is the code's registration now (fireTask).
func (d *dispatcher) runningBesides(reg *registration, code string, runTime int64) int {
	st := d.stripe(code)
	st.mu.Lock()
	defer st.mu.Unlock()
	n := st.byTask[code]
	if reg != nil {
		n += int(reg.running.Load())
	}
	return n - st.byFire[fireRun{code, runTime}]
}

// takeUnstarted returns the fires the dispatcher claimed and never
// started, once its loop has stopped (stopClaimed).
func (d *dispatcher) takeUnstarted() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := d.unstarted
	d.unstarted = nil
	return ids
}

// lead is the lead of the dispatcher's last claim ahead of a run time.
func (d *dispatcher) lead() time.Duration { return time.Duration(d.lastLead.Load()) }

// armedFire is a recorded fire waiting for its run time.
type armedFire struct {
	row store.Execution
	due time.Time
	// exact: claimed at its run time, not ahead of it. Its task skips or
	// buffers overlapping fires, and whether an earlier fire still runs
	// is known only then.
	exact bool
	// buffered: it waited for an earlier run of its task (buffer
	// policies), and is checked again at due.
	buffered bool
	// att is the memory of its attempt, allocated when it was claimed
	// ahead of its run time (dispatch); nil until then.
	att *attempt
}

// claimAt is when f is claimed, with lead the claim's lead.
func (f armedFire) claimAt(lead time.Duration) time.Time {
	if f.exact {
		return f.due
	}
	return f.due.Add(-lead)
}

// fireHeap holds pointers: a fire's row is a few hundred bytes, and
// moving it through the heap's swaps and the interface of heap.Pop (an
// allocation a pop) took time for each fire; the thousands of fires of one
// instant are popped at once, and that wait came out of their claim lead,
// so the first fires of a burst started late (bench/README.md's performance
// report has BenchmarkPopInstant before and after).
type fireHeap []*armedFire

func (h fireHeap) Len() int { return len(h) }
func (h fireHeap) Less(i, j int) bool {
	// At one instant, the fires claimed ahead come first: an exact fire at
	// the top would hold them back until the run time.
	if h[i].due.Equal(h[j].due) {
		return !h[i].exact && h[j].exact
	}
	return h[i].due.Before(h[j].due)
}
func (h fireHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *fireHeap) Push(x any)   { *h = append(*h, x.(*armedFire)) }
func (h *fireHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}

// arm queues a row this replica owns to start at its run time (at once
// when that has passed).
func (d *dispatcher) arm(r store.Execution) {
	if r.Source == store.SourceBackfill {
		d.mu.Lock()
		d.armBackfillLocked(r, time.UnixMilli(r.RunTime))
		d.mu.Unlock()
		d.poke()
		return
	}
	d.armUnless(r, func() bool { return d.armedIDs[r.ID] })
}

// armOwned arms a row this replica owns (rearmOwned) unless the
// dispatcher holds it: armed, waiting for a worker (backlog), or in the
// dispatch round under way (a buffered fire's check, a claim). It reports
// whether it armed it. Unlike arm, it never adds a copy of a fire held
// here: a copy of a buffered fire would lose its place in line.
func (d *dispatcher) armOwned(r store.Execution) bool {
	return d.armUnless(r, func() bool { return d.armedIDs[r.ID] || d.backlogIDs[r.ID] || d.dispatching[r.ID] })
}

// armUnless arms r unless held, called with d.mu held, says so.
func (d *dispatcher) armUnless(r store.Execution, held func() bool) bool {
	t, _, _ := d.view.fireTask(r.TaskCode)
	exact := t != nil && checksOverlap(t.def().Overlap)
	d.mu.Lock()
	if held() {
		// Already waiting here: a slot taken over and back again arms its
		// rows a second time, and one row must make one start.
		d.mu.Unlock()
		return false
	}
	d.armedIDs[r.ID] = true
	d.pushArmedLocked(&armedFire{row: r, due: time.UnixMilli(r.Planned()), exact: exact})
	d.mu.Unlock()
	d.poke()
	return true
}

// checksOverlap reports whether a task of overlap policy p checks, as its
// fires start, whether an earlier run still goes.
func checksOverlap(p string) bool {
	return p == OverlapForbid || p == OverlapBufferOne || p == OverlapBufferAll || p == OverlapCancelOther
}

// waitsForOverlap reports whether a fire of a task of overlap policy p
// waits for the earlier runs, rather than start or be skipped (buffer).
func waitsForOverlap(p string) bool {
	return p == OverlapBufferOne || p == OverlapBufferAll || p == OverlapCancelOther
}

// errCancelledByNextFire is the cause of the context of an attempt that a
// later fire of its task stopped (overlap policy cancel_other).
var errCancelledByNextFire = errors.New("xtimer: cancelled by the next fire of the task (overlap policy cancel_other)")

// cancellable is an attempt a later fire may stop.
type cancellable struct {
	code    string
	runTime int64
	cancel  context.CancelCauseFunc
}

// track makes the attempt of execution id, of task code's fire at
// runTime, one a later fire may stop; untrack forgets it once it ended.
func (d *dispatcher) track(id int64, code string, runTime int64, cancel context.CancelCauseFunc) {
	d.mu.Lock()
	d.cancellable[id] = cancellable{code, runTime, cancel}
	d.mu.Unlock()
}

func (d *dispatcher) untrack(id int64) {
	d.mu.Lock()
	delete(d.cancellable, id)
	d.mu.Unlock()
}

// cancelTask stops the attempts of task code running here of fires before
// runTime: the earlier runs, never the other shards of the fire that asks
// or a later run (store.RequestCancel says why).
func (d *dispatcher) cancelTask(code string, runTime int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.cancellable {
		if c.code == code && c.runTime < runTime {
			c.cancel(errCancelledByNextFire)
		}
	}
}

// cancelIDs stops the attempts of the executions ids running here.
func (d *dispatcher) cancelIDs(ids []int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		if c, ok := d.cancellable[id]; ok {
			c.cancel(errCancelledByNextFire)
		}
	}
}

// trackedIDs lists the attempts running here that a later fire may stop.
func (d *dispatcher) trackedIDs() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cancellable) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(d.cancellable))
	for id := range d.cancellable {
		ids = append(ids, id)
	}
	return ids
}

// pushArmedLocked adds f to the armed heap and counts it at its instant.
// d.mu is held.
func (d *dispatcher) pushArmedLocked(f *armedFire) {
	heap.Push(&d.armed, f)
	d.armedAt[f.due.UnixMilli()]++
}

// popArmedLocked takes the earliest fire off the armed heap. d.mu is held.
func (d *dispatcher) popArmedLocked() *armedFire {
	f := heap.Pop(&d.armed).(*armedFire)
	delete(d.armedIDs, f.row.ID)
	if at := f.due.UnixMilli(); d.armedAt[at] <= 1 {
		delete(d.armedAt, at)
	} else {
		d.armedAt[at]--
	}
	return f
}

// topClaimAtLocked is when the earliest armed fire is claimed, with the
// other fires of its instant: claimLead ahead of it for as many fires as
// the instant has. All of them are popped and checked in that round, also
// those beyond the round's room (fenceNow), which wait in the backlog
// unclaimed; the claim's cost was timed per fire popped (noteClaim). With
// the lead of the room alone, a replica that had not run a handler yet
// (room: one pool's worth) claimed its thousands of fires of a burst with
// the lead of a pool's worth, and they started late. d.mu is
// held.
func (d *dispatcher) topClaimAtLocked() time.Time {
	top := d.armed[0]
	return top.claimAt(d.claimLead(d.armedAt[top.due.UnixMilli()]))
}

// dispatchLoop sleeps on one timer until the earliest armed fire is due
// for its claim (claimLead ahead of its run time, with the fires of its
// instant), or a claimed one for its start.
func (d *dispatcher) loop(ctx context.Context) {
	defer d.stopClaimed()
	timer := d.clock.NewTimer(time.Hour)
	defer timer.Stop()
	realTime := realTime(d.clock) // startEarly applies
	for {
		now, woke := d.clock.Now(), time.Now() // woke: physical, for the claim's timing
		wait := time.Hour
		d.mu.Lock()
		due := d.popDueLocked(now)
		for _, f := range due {
			d.dispatching[f.row.ID] = true
		}
		if d.armed.Len() > 0 {
			wait = d.topClaimAtLocked().Sub(now)
		}
		d.mu.Unlock()
		for d.claimed.Len() > 0 && !d.claimed[0].due.After(now) {
			f := heap.Pop(&d.claimed).(*armedFire)
			d.begin(f.row, f.due, f.att)
		}
		if d.claimed.Len() > 0 {
			until := d.claimed[0].due.Sub(now)
			if realTime {
				if until <= startEarly && wait > until {
					// The fires popped for their claim wait for this
					// start: dropped here, they were neither armed nor
					// claimed any more, and never ran (rows left
					// scheduled, owned by this replica, until it stopped).
					d.unpop(due)
					spinUntil(d.clock, d.claimed[0].due)
					continue
				}
				until -= startEarly
			}
			wait = min(wait, until)
		}
		if len(due) > 0 || (len(d.backlog) > 0 && d.fenceRoom() > 0) {
			d.dispatch(ctx, due, now, woke)
			d.mu.Lock()
			clear(d.dispatching)
			d.mu.Unlock()
			continue // time moved while claiming; look again before sleeping
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
			timer.Stop()
			d.woken.Store(false) // a test waits for the timer armed again
		case <-timer.C():
		}
	}
}

// unpop puts back on the armed heap the fires popDueLocked took off,
// unless arm armed them again meanwhile.
func (d *dispatcher) unpop(due []*armedFire) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range due {
		delete(d.dispatching, f.row.ID)
		if !d.armedIDs[f.row.ID] {
			d.armedIDs[f.row.ID] = true
			d.pushArmedLocked(f)
		}
	}
}

// popDueLocked takes off the armed heap the fires due for their claim at
// now: the earliest instant's, claimLead ahead of it, and the fires of the
// instant popped last go with it, except those claimed at their run time
// (exact), which wait for it. d.mu is held.
func (d *dispatcher) popDueLocked(now time.Time) []*armedFire {
	var due []*armedFire
	var instant time.Time
	for d.armed.Len() > 0 && (d.armed[0].due.Equal(instant) && !d.armed[0].exact || !d.topClaimAtLocked().After(now)) {
		f := d.popArmedLocked()
		instant = f.due
		due = append(due, f)
	}
	return due
}

// startEarly: on the system clock, the dispatcher's timer wakes this long
// before the run time of the fires it claimed, and waits the rest by
// sleeping and reading the clock (spinUntil). Go's timers wake up to a
// millisecond late on Linux, where epoll's timeout is in whole
// milliseconds, and every fire of the instant waited for it.
const startEarly = 1500 * time.Microsecond

// spinLast is how long before its instant spinUntil stops sleeping and
// reads the clock: more than a kernel sleep wakes late (sleepFor).
const spinLast = 250 * time.Microsecond

// spinUntil returns at t by clock (a real-time one), not before. It sleeps
// in the kernel until spinLast before t where it can (sleepFor), then
// reads the clock, letting other goroutines run. Reading the clock all
// the way would keep a core busy up to startEarly before every instant,
// in every replica of a fleet: those sharing cores would take them from
// each other just as their fires start.
func spinUntil(clock Clock, t time.Time) {
	for {
		left := t.Sub(clock.Now())
		if left <= 0 {
			return
		}
		if left <= spinLast || !sleepFor(left-spinLast) {
			runtime.Gosched()
		}
	}
}

// Fires are claimed ahead of their run time by about twice what their
// claim is expected to take (claimLead), so that their handlers start on
// time, without a database round trip in between: at the run time, the
// row says already that this replica starts the fire. The lead stays
// within these bounds: up to a second for the thousands of fires of a
// burst, whose claim on MariaDB with three replicas claiming at once
// outlasted a lead bounded at 250 ms, and they started late. A kill within
// the lead loses the fires claimed and not started (the retry policy
// settles them); a second's hundreds of fires are claimed only a little
// ahead. (Fires whose task forbids overlap are claimed at their run time;
// the armed heap puts them after the other fires of their instant, which
// go ahead without them.)
const (
	minClaimLead = 2 * time.Millisecond
	maxClaimLead = time.Second
)

// A claim of fewer than bigClaim fires is timed as a round trip
// (claimRTT); a larger one per fire (claimPerFire), checks included. Until
// one is timed, a fire is taken to cost assumedClaimPerFire, about what
// one costs on PostgreSQL with three replicas claiming at once. Without
// it, a replica whose first large claim comes at a minute boundary (a new
// share of the slots, hundreds of fires a second) claimed it with the lead
// of a round trip, and started it late.
const (
	bigClaim            = 32
	assumedClaimPerFire = 50 * time.Microsecond
)

// claimLead is how far ahead of their run time n fires due together are
// claimed: the expected round trip and per-fire work of their claim, and
// as much again or four mean deviations of it if more (a claim's time
// varies with the database's commit flush, whose tail outlasts twice the
// mean), or a quarter more than the slowest of the last claimRecent if
// more still, plus a millisecond for the timer. A round trip is short,
// but the claim of the 3,000 fires of a burst at the top of a minute
// takes many round trips' worth, checks included: with the lead of a
// small claim they started that much late. Only the dispatcher calls it.
func (d *dispatcher) claimLead(n int) time.Duration {
	perFire := d.claimPerFire.avg
	if perFire == 0 {
		perFire = assumedClaimPerFire
	}
	expect := d.claimRTT.avg + time.Duration(n)*perFire
	spread := 4 * (d.claimRTT.dev + time.Duration(n)*d.claimPerFire.dev)
	slowest := d.claimRTT.slowest() + time.Duration(n)*d.claimPerFire.slowest()
	lead := max(expect+max(expect, spread), slowest+slowest/4)
	return min(max(lead+time.Millisecond, minClaimLead), maxClaimLead)
}

// noteClaim folds one dispatch round into claimRTT, or claimPerFire:
// took from the dispatcher's wake (fires popped, checked) to the claim's
// answer, for n fires.
func (d *dispatcher) noteClaim(took time.Duration, n int) {
	if n >= bigClaim {
		d.claimPerFire.note(took / time.Duration(n))
		return
	}
	d.claimRTT.note(took)
}

// claimRecent is how many of the last claims claimCost keeps: a minute's
// worth for a replica that claims once a second.
const claimRecent = 60

// claimCost estimates what a claim costs, a round trip or a fire: a
// moving average, its mean deviation, and the last claimRecent samples.
type claimCost struct {
	avg, dev time.Duration
	recent   [claimRecent]time.Duration // a ring; next is where the next sample goes
	next     int
}

// note adds a sample. The first sets the average, and half of it the
// deviation (as TCP's retransmission timer starts); each later one moves
// both a quarter of the way, the deviation to the sample's distance from
// the average before it.
func (c *claimCost) note(sample time.Duration) {
	if c.avg == 0 {
		c.avg, c.dev = sample, sample/2
	} else {
		c.dev += ((sample - c.avg).Abs() - c.dev) / 4
		c.avg += (sample - c.avg) / 4
	}
	c.recent[c.next] = sample
	c.next = (c.next + 1) % claimRecent
}

// slowest is the largest of the last claimRecent samples, 0 before any.
func (c *claimCost) slowest() time.Duration { return slices.Max(c.recent[:]) }

// fold moves the moving average *avg a quarter of the way to sample (to
// sample itself when nothing was measured yet).
func fold(avg *time.Duration, sample time.Duration) {
	if *avg == 0 {
		*avg = sample
		return
	}
	*avg += (sample - *avg) / 4
}

// begin starts the first attempt of a fire this replica claimed, recorded
// as started at startAt, in a (nil: a new attempt).
func (d *dispatcher) begin(r store.Execution, startAt time.Time, a *attempt) {
	r.Attempt = 1
	d.status.started(r, startAt)
	d.start(a, r, startAt)
}

// stopClaimed runs as the dispatcher stops: fires it claimed ahead of a
// run time not reached yet did not start, and are handed to Stop, which
// releases them with the fires this replica recorded and did not claim.
func (d *dispatcher) stopClaimed() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.claimed {
		d.unstarted = append(d.unstarted, f.row.ID)
	}
	d.claimed = nil
}

// startClaimTimeout bounds the one database round trip before fires
// start, so that a database outage delays the dispatcher, not blocks it.
const startClaimTimeout = 2 * time.Second

// dispatch runs the last checks on fires that are due (paused? still a
// fire of the task's schedule? overlapping? overdue?), then marks those
// that go ahead running for this replica in one conditional update, and
// starts the handlers of the rows it won. That update is the fence: a fire
// another replica took over while this one slept is not ours any more, and
// does not start here. woke is when the dispatcher woke for them (real
// time): the claim is timed from then, so that its lead covers the popping
// and the checks too.
func (d *dispatcher) dispatch(ctx context.Context, due []*armedFire, now, woke time.Time) {
	// The popped fires themselves, not copies of their rows: a fire
	// claimed ahead waits in the claimed heap in the same entry.
	start := make([]*armedFire, 0, len(due))
	goHandlers := make([]bool, 0, len(due)) // start[i] runs a Go handler registered here (else an HTTP callback)
	overdue := map[string][]int{}           // task → indices in start of fires overdue by the schedule
	for _, f := range due {
		r := f.row
		t, reg, runs := d.view.fireTask(r.TaskCode)
		goHandler := reg != nil
		if r.Source == store.SourceBackfill { // its own order, whatever the task's policies
			if !d.holdBackfill(ctx, f, t, runs, now) {
				start, goHandlers = append(start, f), append(goHandlers, goHandler)
			}
			continue
		}
		late := now.Sub(time.UnixMilli(r.Planned()))
		window := time.Duration(t.misfireWindowMs()) * time.Millisecond
		switch {
		case t == nil || !runs:
			d.status.skip(r, ReasonDeleted, now)
			continue
		case r.Source != store.SourceManual && t.status != statusActive:
			d.status.skip(r, store.ReasonPaused, now)
			continue
		case (r.Source == store.SourceSchedule || r.Source == store.SourceCatchup) && !t.firesAt(time.UnixMilli(r.RunTime)):
			// Recorded ahead under the schedule the task had then. An
			// operator's own runs (manual, retry) are never rescheduled.
			d.status.skip(r, store.ReasonRescheduled, now)
			continue
		case t.excl != nil && (r.Source == store.SourceSchedule || r.Source == store.SourceCatchup) && t.excluded(time.UnixMilli(r.RunTime)):
			// Recorded before its day was excluded (a calendar edited since).
			d.status.skip(r, store.ReasonExcluded, now)
			continue
		case r.Source == store.SourceSchedule && late > misfireAfter && late > window:
			d.status.skip(r, store.ReasonMisfire, now)
			continue
		case r.Source == store.SourceSchedule && late > misfireAfter && t.def().Misfire == MisfireSkip && !f.buffered:
			d.status.skip(r, store.ReasonMisfire, now)
			continue
		}
		if t.def().Overlap == OverlapForbid {
			running := d.runningBesides(reg, r.TaskCode, r.RunTime)
			n, err := d.store.RunningCount(ctx, d.app, r.TaskCode, r.RunTime)
			if err != nil || n > 0 || running > 0 {
				// Unknown counts as overlapping: forbid means never two at once.
				d.status.skip(r, store.ReasonOverlap, now)
				continue
			}
		}
		if waitsForOverlap(t.def().Overlap) {
			if d.buffer(ctx, f, reg, t.def().Overlap, now) {
				continue
			}
		}
		if r.Source == store.SourceSchedule && late > misfireAfter && t.def().Misfire != MisfireRunAll && !f.buffered {
			overdue[r.TaskCode] = append(overdue[r.TaskCode], len(start))
		}
		start, goHandlers = append(start, f), append(goHandlers, goHandler)
	}
	// Run once: of several overdue fires of a task (the database or this
	// replica was away), only the latest runs.
	drop := map[int]bool{}
	for _, idx := range overdue {
		for _, i := range idx[:len(idx)-1] {
			drop[i] = true
			d.status.skip(start[i].row, store.ReasonMisfire, now)
		}
	}
	var callbacks []*armedFire
	goFires := make([]*armedFire, 0, len(start))
	for i, f := range start {
		switch {
		case drop[i]:
		case goHandlers[i]:
			goFires = append(goFires, f)
		default:
			callbacks = append(callbacks, f)
		}
	}
	fence := d.fenceNow(callbacks, goFires)
	if len(fence) == 0 {
		return
	}
	if last := slices.MaxFunc(fence, func(a, b *armedFire) int { return cmp.Compare(a.row.Planned(), b.row.Planned()) }); last.row.Planned() > now.UnixMilli() {
		d.lastLead.Store(int64(time.UnixMilli(last.row.Planned()).Sub(now)))
	}
	ids := make([]int64, len(fence))
	for i, f := range fence {
		ids[i] = f.row.ID
	}
	// Not the loop's context: a Stop arriving now must not cut the claim
	// off after the database committed it (the fires would be claimed and
	// never run); Stop waits for this round and its handlers instead.
	claimCtx, cancel := context.WithTimeout(context.Background(), startClaimTimeout)
	started, err := d.store.StartFires(claimCtx, d.app, ids, d.replica, now.UnixMilli())
	cancel()
	if err == nil {
		d.noteClaim(time.Since(woke), max(len(due), len(fence)))
	}
	if err != nil {
		// Nothing starts without its row saying so. The fires stay armed and
		// are tried again; when the database is back, they run late or go
		// through the misfire policy.
		d.noteDB(err)
		retry := append(fence, d.backlog...)
		d.backlog = nil
		d.wantRoom.Store(false)
		d.mu.Lock()
		clear(d.backlogIDs)
		for _, f := range retry {
			r := f.row
			if r.Source == store.SourceBackfill {
				d.armBackfillLocked(r, now.Add(time.Second))
			} else if !d.armedIDs[r.ID] {
				d.armedIDs[r.ID] = true
				d.pushArmedLocked(&armedFire{row: r, due: now.Add(time.Second)})
			}
		}
		d.mu.Unlock()
		return
	}
	won := make(map[int64]bool, len(started))
	for _, id := range started {
		won[id] = true
	}
	for _, f := range fence {
		r := &f.row
		if !won[r.ID] {
			d.log.Info("fire not started here: another replica took it over, or it started already", "task", r.TaskCode, "execution", r.ID)
			continue
		}
		// One claim, one start, even if the row came twice (armed again by
		// rearmOwned while this replica held it).
		delete(won, r.ID)
		// StartFires recorded the start at the planned start, or now if later.
		if at := time.UnixMilli(max(r.Planned(), now.UnixMilli())); at.After(now) {
			// Its attempt's memory now, not at its run time: what the
			// fires of an instant allocated as they started together was
			// what most often brought the heap to the collector's goal,
			// and the collector's start and mark then took CPU from the
			// fires still starting.
			f.due, f.exact, f.buffered, f.att = at, false, false, new(attempt)
			heap.Push(&d.claimed, f)
		} else {
			d.begin(*r, at, nil)
		}
	}
}

const (
	// bufferPoll is how often a buffered fire checks whether the run it
	// waits for has ended: it starts within this, and a claim, of that
	// run's final status.
	bufferPoll = 500 * time.Millisecond
	// cancelWait bounds how long a fire of a cancel_other task waits for
	// the runs it asked to stop on replicas that still run: past it, a
	// run still going is one whose handler ignores its context, and the
	// fire starts anyway. It stops counting them a poll earlier
	// (cancelGrace), so that it starts by cancelWait. A run whose replica
	// has not heart-beaten since the request is waited for until its row
	// is settled (store.OverlapState).
	cancelWait  = 5 * time.Second
	cancelGrace = cancelWait - bufferPoll
)

// buffer applies a policy that waits (waitsForOverlap) to fire f, due
// now: it reports false when f may start (nothing of its task goes, and
// no earlier fire waits), and otherwise either arms f again for
// bufferPoll later (it waits its turn) or, under OverlapBufferOne with
// another fire waiting already, records it skipped. Under
// OverlapCancelOther, the first fire in line asks the runs that go to
// stop, here at once and elsewhere through their rows, and waits for
// them at most cancelGrace, but for those whose replica has not
// heart-beaten since, which it waits for until they are settled. A count
// it cannot read keeps f waiting: never two runs at once, and nothing
// dropped for a database hiccup.
func (d *dispatcher) buffer(ctx context.Context, f *armedFire, reg *registration, policy string, now time.Time) bool {
	r := f.row
	here := d.runningBesides(reg, r.TaskCode, r.RunTime)
	graceFrom := int64(-1)
	if policy == OverlapCancelOther {
		// The attempts it stopped here are the rows' to count: one whose
		// handler ignores its context runs on until its timeout.
		graceFrom, here = now.Add(-cancelGrace).UnixMilli(), 0
	}
	o, err := d.store.OverlapState(ctx, d.app, r.TaskCode, r.RunTime, r.ID, graceFrom)
	switch {
	case err == nil && o.Waiting == 0 && o.Going == 0 && here == 0:
		return false
	case err == nil && policy == OverlapBufferOne && o.Waiting > 0:
		d.status.skip(r, store.ReasonOverlap, now)
		return true
	case err == nil && policy == OverlapCancelOther && o.Waiting == 0:
		// The rows first, then the attempts running here: cancelled first,
		// a quick handler's result could be written before the request,
		// which then found its row final and left it without cancel_ms.
		if _, err = d.store.RequestCancel(ctx, d.app, r.TaskCode, r.ID, r.RunTime, now.UnixMilli()); err == nil && !f.buffered {
			d.log.Info("fire asks the runs of its task to stop (overlap policy cancel_other)", "task", r.TaskCode, "execution", r.ID)
		}
		d.cancelTask(r.TaskCode, r.RunTime) // also when the request failed: the runs here stop all the same
	}
	if err != nil {
		d.noteDB(err)
	}
	d.mu.Lock()
	if !d.armedIDs[r.ID] {
		d.armedIDs[r.ID] = true
		d.pushArmedLocked(&armedFire{row: r, due: now.Add(bufferPoll), exact: true, buffered: true})
	}
	d.mu.Unlock()
	return true
}

// fenceNow returns the fires to claim for a start now: every HTTP
// callback (they wait in their own queues), and as many Go-handler fires
// as fenceRoom allows, oldest first. The other Go fires wait in d.backlog,
// their rows unclaimed: if this replica dies, another takes them over and
// runs them, where a fire claimed and waiting in the pool would be lost
// with the replica (its row says it started). Each attempt that ends
// wakes the dispatcher, which claims the next ones.
//
// fenceRoom is how many more Go fires may be claimed now: enough to fill
// the free workers, and behind them as many as the pool is expected to
// start within maxClaimWait: by the rate at which it drained its queue in
// its busy spells (executor.Pool.Rate), or by the moving average of its
// run times, whichever lets more (one pool's worth at least, and until a
// first handler returned, unless the app's recent run times seeded it at
// Start: seedRunTime). So a burst of quick handlers is claimed in one
// round trip, and slow ones are claimed a pool's worth at a time. (By run
// times alone, which on shared cores measure mostly the wait for a CPU, a
// replica of 3,000 fires a second claimed a few hundred of them ahead and
// the rest after their run time.) Fires claimed ahead of their run time
// count as waiting. At most that many claimed fires are lost if the
// replica dies.
func (d *dispatcher) fenceRoom() int {
	running, waiting := d.pool.Stats()
	behind := d.workers
	if mean, ok := d.pool.MeanRun(); ok && mean < maxClaimWait {
		behind = int(min(int64(d.workers)*int64(maxClaimWait/mean), maxClaimRound))
	}
	if rate, ok := d.pool.Rate(); ok {
		behind = max(behind, int(min(rate*maxClaimWait.Seconds(), maxClaimRound)))
	}
	return max(d.workers-running+behind-waiting-d.claimed.Len(), 0)
}

// maxClaimWait bounds the time a claimed fire is expected to wait for a
// worker; maxClaimRound bounds the fires claimed in one round.
const (
	maxClaimWait  = 100 * time.Millisecond
	maxClaimRound = 5000
)

func (d *dispatcher) fenceNow(callbacks, goFires []*armedFire) []*armedFire {
	// A fire armed again while it waited here (its slot taken over and
	// back) is one fire: one claim, one start.
	if len(d.backlog) > 0 {
		goFires = append(d.backlog, goFires...)
	}
	seen := make(map[int64]bool, len(goFires))
	goFires = slices.DeleteFunc(goFires, func(f *armedFire) bool {
		dup := seen[f.row.ID]
		seen[f.row.ID] = true
		return dup
	})
	d.wantRoom.Store(true) // before the room is read (roomFreed)
	n := min(d.fenceRoom(), len(goFires))
	d.backlog = slices.Clone(goFires[n:])
	d.wantRoom.Store(len(d.backlog) > 0)
	d.mu.Lock()
	clear(d.backlogIDs)
	for _, f := range d.backlog {
		d.backlogIDs[f.row.ID] = true
	}
	d.mu.Unlock()
	if len(callbacks) == 0 {
		return goFires[:n]
	}
	return append(callbacks, goFires[:n]...)
}

// startAttempt runs one attempt of r (r.Attempt), recorded as started at
// now: a Go handler on the pool, an HTTP callback behind its task's queue
// on the HTTP pool. Time spent waiting there is lateness: the result
// records when the attempt really started.
func (s *Engine) startAttempt(r store.Execution, now time.Time) { s.startAttemptIn(nil, r, now) }

// startAttemptIn is startAttempt in a, an attempt allocated and not used
// yet (nil: a new one).
func (s *Engine) startAttemptIn(a *attempt, r store.Execution, now time.Time) {
	s.view.mu.Lock()
	loc := time.UTC
	t, cfg := s.view.taskLocked(r.TaskCode), s.view.handlers.get(r.TaskCode)
	if t != nil {
		loc = t.loc()
	}
	s.view.mu.Unlock()
	// A backfilled fire runs beside the task's others: their overlap
	// checks leave it out.
	backfill := r.Source == store.SourceBackfill
	if !backfill {
		s.dispatcher.noteRunning(r, cfg, 1)
	}
	s.attempts.Add(1)
	if a == nil {
		a = new(attempt)
	}
	a.s, a.r, a.reg, a.now, a.backfill = s, r, cfg, now, backfill
	a.out.max = s.opts.MaxOutput
	a.run = Attempt{
		ID: RunID(s.opts.App, r), ExecutionID: r.ID, Code: r.TaskCode, Shard: r.Shard, Shards: r.Shards,
		ScheduledAt: time.UnixMilli(r.RunTime).In(loc), Attempt: r.Attempt, MaxAttempts: r.MaxAttempts,
		Source: r.Source, Replica: s.opts.InstanceID, Out: &a.out, Params: paramsOf(r, t),
	}
	var submit func(func())
	a.work, submit, a.pool, a.timeout = s.attemptWork(r, t, cfg, &a.run, &a.status)
	a.cancellable = t != nil && t.def().Overlap == OverlapCancelOther && !backfill
	submit(a.begin)
}

// handlerCtxShards is how many contexts the handlers run under
// (Engine.handlerCtxs).
const handlerCtxShards = 16

// setHandlerCtxs makes the contexts the handlers run under, children of
// parent, all cancelled by cancelHandler.
func (s *Engine) setHandlerCtxs(parent context.Context) {
	var cancels [handlerCtxShards]context.CancelFunc
	for i := range s.handlerCtxs {
		s.handlerCtxs[i], cancels[i] = context.WithCancel(parent)
	}
	s.cancelHandler = func() {
		for _, cancel := range cancels {
			cancel()
		}
	}
}

// handlerCtx is the context the attempt of execution id runs under.
func (s *Engine) handlerCtx(id int64) context.Context {
	return s.handlerCtxs[uint64(id)%handlerCtxShards] //nolint:gosec // G115: any bits pick a shard
}

// attempt is one attempt of a fire on its way through this replica, from
// startAttempt to its end, in one allocation.
type attempt struct {
	s                     *Engine
	r                     store.Execution
	reg                   *registration // nil for an HTTP callback
	now                   time.Time     // recorded as started at
	run                   Attempt
	out                   Output       // run.Out
	status                atomic.Int64 // an HTTP callback's response status
	work                  func(context.Context) error
	pool                  *executor.Pool // the pool it runs on
	timeout               time.Duration
	backfill, cancellable bool
	// Set by begin.
	ctx     context.Context
	cancel  context.CancelCauseFunc // nil unless cancellable
	endSpan endSpan
}

// begin runs the attempt on its pool's worker. It ends (end) as the
// handler returns, or, if that runs on past its timeout, at the timeout
// on the timer's goroutine, the worker left to the handler and another
// started for the pool (executor.Run).
func (a *attempt) begin() {
	s, r := a.s, &a.r
	began := s.clock.Now()
	s.attemptBegins(*r, began)
	s.alerts.attemptBegan(*r, began)
	a.ctx, a.endSpan = s.startSpan(*r)
	if a.cancellable {
		a.ctx, a.cancel = context.WithCancelCause(a.ctx)
		s.dispatcher.track(r.ID, r.TaskCode, r.RunTime, a.cancel)
	}
	executor.Run(a.ctx, s.clock, a.timeout, a.work, a.end, a.pool.Overrun, a.late)
}

// late logs the result of a handler that returned after its timeout.
func (a *attempt) late(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		a.s.log.Debug("handler stopped at its timeout", "task", a.r.TaskCode, "execution", a.r.ID)
		return
	}
	a.s.log.Warn("handler returned after its timeout; result ignored", "task", a.r.TaskCode, "execution", a.r.ID, "err", err)
}

// end settles the attempt: its result is queued to be written, and its
// ending counted, traced, alerted on and logged.
func (a *attempt) end(out executor.Outcome) {
	s, r := a.s, a.r
	defer s.attempts.Done()
	if !a.backfill {
		s.dispatcher.noteRunning(r, a.reg, -1)
	}
	reason := ""
	if a.cancellable {
		a.cancel(nil)
		s.dispatcher.untrack(r.ID)
		if errors.Is(context.Cause(a.ctx), errCancelledByNextFire) {
			reason = store.ReasonCancelled
		}
	}
	fin := s.settle(r, out.Finished, out.Err, out.TimedOut(), reason)
	fin.Output = a.out.String()
	fin.HTTPStatus = int(a.status.Load())
	if started := out.Started.UnixMilli(); started > a.now.UnixMilli() {
		// It waited in this replica's queues after its start was recorded.
		fin.StartedMs, fin.LatenessMs = started, started-attemptDue(r)
		fin.FinishedMs = max(fin.FinishedMs, started)
	}
	s.updates.finished(fin)
	s.pauses.failed(r, fin)
	s.attemptEnds(r, out, fin)
	a.endSpan(out, fin)
	s.alerts.settled(r, fin)
	level, msg := slog.LevelDebug, "attempt succeeded"
	switch {
	case fin.Reason == store.ReasonCancelled:
		level, msg = slog.LevelInfo, "attempt stopped by the next fire of its task (overlap policy cancel_other)"
	case out.Err != nil && fin.Status == store.StatusRetrying:
		level, msg = slog.LevelInfo, "attempt failed; will retry"
	case out.Err != nil:
		level, msg = slog.LevelWarn, "execution failed"
	}
	if !s.log.Enabled(context.Background(), level) {
		return // the attributes below cost more than starting the fire did
	}
	attrs := []any{"task", r.TaskCode, "execution", r.ID, "attempt", r.Attempt, "status", fin.Status,
		"duration", out.Finished.Sub(out.Started), "lateness", out.Started.Sub(time.UnixMilli(attemptDue(r)))}
	if level == slog.LevelInfo {
		attrs = append(attrs, "next_attempt", time.UnixMilli(fin.NextAttemptMs))
	}
	if out.Err != nil {
		attrs = append(attrs, "err", out.Err)
	}
	s.log.Log(context.Background(), level, msg, attrs...)
}

// paramsOf is what a handler gets as its attempt's parameters: the row's
// own (a manual run's override, so a retry of it gets the same), else its
// task's (WithParams); nil for none. Rows of scheduled fires carry none:
// recording them writes no parameters, and reading the task's costs no
// query.
func paramsOf(r store.Execution, t *taskState) json.RawMessage {
	switch {
	case r.Params != "":
		return json.RawMessage(r.Params)
	case t != nil && t.def().Params != "":
		return json.RawMessage(t.def().Params)
	}
	return nil
}

// settle decides how an attempt ends: success, a retry by the task's
// policy, or failure.
func (s *Engine) settle(r store.Execution, at time.Time, err error, timedOut bool, reason string) store.Finish {
	f := store.Finish{ID: r.ID, Attempt: r.Attempt, Result: store.Result{Status: store.StatusSucceeded, Reason: reason, FinishedMs: at.UnixMilli()},
		Retried: r.Reason == store.ReasonRetried}
	if f.Retried && reason == "" {
		f.Reason = store.ReasonRetried // retried by hand (Retry): the row keeps saying so
	}
	if reason == store.ReasonCancelled {
		// Stopped by a later fire: failed, whatever the handler returned,
		// and never retried (the later fire runs instead).
		f.Status, f.Error = store.StatusFailed, errCancelledByNextFire.Error()
		if err != nil {
			f.Error = err.Error()
		}
		return f
	}
	if err == nil {
		return f
	}
	f.Error = err.Error()
	if errors.As(err, new(*secretError)) {
		// Nothing was sent: the task's secrets do not decrypt on this
		// replica, and would not on the next attempt either.
		f.Status, f.Reason = store.StatusFailed, ReasonSecretUndecryptable
		return f
	}
	s.view.mu.Lock()
	t := s.view.taskLocked(r.TaskCode)
	s.view.mu.Unlock()
	switch {
	case r.Attempt < r.MaxAttempts && t != nil:
		f.Status, f.TimedOut = store.StatusRetrying, timedOut
		f.NextAttemptMs = at.Add(t.backoff().Delay(r.Attempt, rand.Float64)).UnixMilli()
	case timedOut:
		f.Status = store.StatusTimedOut
	default:
		f.Status = store.StatusFailed
	}
	return f
}
