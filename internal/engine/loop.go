package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is the tick loop of docs/architecture.md ("How a fire runs"):
// once a second every replica
// syncs task state, claims the slots of the coming minute, records their
// fires, and keeps the fleet healthy (heartbeats, rescue, retries).

const (
	// slotLockTTL bounds failover: a slot's owner refreshes its lock (and
	// its liveness lock, in the same round trip) every lockRefreshEvery,
	// so two refreshes may fail before the lock runs out; when it dies,
	// freezes or loses its database (lockKeeper.letGo), the replicas that
	// found the slot held look again when its lock runs out (claimSlot,
	// recheck), and one takes the slot over within the TTL and a few
	// hundred milliseconds.
	slotLockTTL      = 1500 * time.Millisecond
	lockRefreshEvery = 500 * time.Millisecond
	// expiryMargin: a replica that found a slot held looks again this long
	// after its lock should have run out, so that Redis has dropped it.
	expiryMargin = 10 * time.Millisecond
	// misfireAfter: a fire overdue by more than this is a misfire, and its
	// task's misfire policy decides whether it runs. Less late is a hand-over
	// (a takeover after a replica died, a brief database hiccup): such fires
	// all run, late, with their lateness recorded. It exceeds the failover
	// bound (lock TTL plus a recheck) with room to spare.
	misfireAfter = 15 * time.Second
	claimBatch   = 200
	// recordAhead: a held slot's fires are recorded as time goes, those
	// of the next recordAhead at each round of plan (a tick, a recheck),
	// not its whole minute at its claim. Five seconds cover a tick held
	// up by a slow database for three, and a shard is read by its
	// replica within shardLookahead of its start.
	recordAhead = 5 * time.Second
	// urgentHorizon: fires this close are recorded (and armed) first.
	urgentHorizon = 3 * time.Second
	// recordChunk bounds the fires recorded in one round trip after those.
	recordChunk = 10_000
	// handlersRewrite: the heartbeat writes this replica's handler codes
	// when they change, and at least this often.
	handlersRewrite = 10 * time.Minute
)

// planner is the tick loop: once a second it syncs the view, heartbeats,
// rescues the runs of lost replicas, claims and records the slots of the
// coming minute, claims the fires nobody runs and starts the due retries.
// Its lock guards slots, live, alive, lastBeat, beatHandlersAt and beatGen,
// which calls from outside the tick loop read (a task adopted reopens its
// slots, the handler publisher writes beatGen); the fields marked tick
// loop only are that goroutine's alone.
type planner struct {
	startstop.Base // the tick loop and the handler publisher

	// What it is wired to (newPlanner), fixed after.
	clock   Clock
	log     *slog.Logger
	opts    Config
	store   *store.Store
	keeper  *lockKeeper    // the slot locks
	view    *view          // the tasks: their fires, who runs them
	fires   fireArmer      // the dispatcher
	pool    *executor.Pool // the Go handlers' pool, seeded with run times (seedRunTime)
	metrics *metrics
	alerts  *alerter
	pauses  *pauser // pause on failure: the runs it rescues may complete a streak
	health  *healthState
	ref     *clockRef   // nil without a clock reference (clockref.go)
	host    plannerHost // the rest of the engine

	mu    sync.Mutex
	slots map[slotKey]*slotState
	// live: the IDs of the replicas that claim (alive and not refusing
	// for their clock, clockref.go) at the last heartbeat, by which slots
	// are shared, shards dealt and dead owners' fires claimed; alive: all
	// that heart-beat, whose running executions are not lost.
	live     []string
	alive    []string
	lastBeat time.Time // last heartbeat attempt
	// beatHandlersAt is when this replica's handler list was last written
	// into its row, as of handlersGen beatGen (heartbeat, publishHandlers).
	beatHandlersAt time.Time
	beatGen        int
	publish        chan struct{} // a big handler list is due (publishHandlers)
	// The replicas that run each sharded task, as of the live list
	// hostsLive, the sharded tasks of generation hostsGen, read at hostsAt
	// (refreshHosts); dead holds, until when, the replicas found gone
	// (ownerDead); shardArmed the shards armed here, by ID, with their
	// planned starts (armShard). shard.go.
	hosts      map[string][]string
	hostsLive  []string
	hostsGen   int
	hostsAt    time.Time
	dead       map[string]time.Time
	shardArmed map[int64]int64

	// replanAt, if set, is when plan wants a tick before the next regular
	// one (startShareWait, liveSettleLook). Tick loop only.
	replanAt time.Time
	// settle is the wait of a starting replica's first claims for the
	// live list to stop changing (settling). Tick loop only.
	settle struct {
		from time.Time // the first plan's clock
		live []string  // the list the last look saw
		done bool
		// dealt: the first claims' slots are open (slotState.atStart).
		dealt bool
	}
	// recordPerFire is a moving average of what recording a fire takes in
	// a chunk planSlots records between instants (nextChunk). Tick loop
	// only.
	recordPerFire time.Duration
	// reseedAt is when the tick loop reads the app's recent run times
	// again if the pool has still run nothing (reseed).
	reseedAt time.Time
	// ownedReadAt is when rearmOwned reads this replica's unstarted fires
	// again while no write is in doubt. Tick loop only.
	ownedReadAt time.Time
	// promoteAt is when rescueLost reads the lost starts again while no
	// replica of promoteAlive, the replicas alive at its last call, has
	// gone (promoteDue). Tick loop only.
	promoteAt    time.Time
	promoteAlive []string
	// writeFailedAt is when, in Unix nanoseconds of the engine's clock, a
	// write that makes this replica a fire's owner outside the tick loop
	// (Trigger, Backfill) last failed; 0 if none did (doubtOwned).
	writeFailedAt atomic.Int64
}

// fireArmer is what the planner asks of the dispatcher (fire.go): arm a
// fire it recorded, claimed or took over, and the lead of the last claim,
// which it keeps its chunks of rows clear of (nextChunk).
type fireArmer interface {
	arm(r store.Execution)
	armOwned(r store.Execution) bool
	lead() time.Duration
}

// plannerHost is what the planner asks of the rest of the engine
// (Scheduler): the attempts of the retries it wins and of the runs it
// rescues, and the health of the database and the lock backend.
type plannerHost interface {
	startAttempt(r store.Execution, at time.Time)
	settle(r store.Execution, at time.Time, err error, timedOut bool, reason string) store.Finish
	noteDB(err error)
	noteRedis(err error)
	pollCancels(ctx context.Context) error
}

// newPlanner makes the planner of s.
func newPlanner(s *Engine) *planner {
	return &planner{
		clock: s.clock, log: s.log, opts: s.opts, store: s.store, keeper: s.keeper, view: &s.view, fires: s.dispatcher,
		pool: s.pool, metrics: s.metrics, alerts: s.alerts, pauses: s.pauses, health: &s.health, ref: s.ref, host: s,
		slots: map[slotKey]*slotState{}, publish: make(chan struct{}, 1),
		hostsGen: -1, dead: map[string]time.Time{}, shardArmed: map[int64]int64{},
	}
}

// heartbeat measures the clock's offset against the database's (clockref.go),
// writes this replica's row with it, and reads the live list again.
func (p *planner) heartbeat(ctx context.Context, now time.Time) error {
	if err := p.ref.measure(ctx); err != nil {
		return err
	}
	est, refused, _ := p.ref.state()
	host, _ := os.Hostname()
	p.mu.Lock()
	p.lastBeat = now
	// The handlers are written when they changed, and every
	// handlersRewrite in case the row was pruned and inserted again; a big
	// list apart from the heartbeat (publishHandlers).
	lastGen, rewrite := p.beatGen, p.beatHandlersAt.IsZero() || now.Sub(p.beatHandlersAt) >= handlersRewrite
	p.mu.Unlock()
	handlers, gen, due, big := p.view.handlerList(lastGen, rewrite)
	held := p.keeper.heldKeys()
	slots := make([]string, len(held))
	for i, k := range held {
		slots[i] = strconv.FormatInt(k.minute, 10) + ":" + strconv.Itoa(k.bucket)
	}
	err := p.store.Heartbeat(ctx, store.Replica{
		App: p.opts.App, ID: p.opts.InstanceID, Host: host, PID: os.Getpid(), Version: p.opts.Version,
		StartedMs: now.UnixMilli(), HeartbeatMs: now.UnixMilli(), Handlers: handlers, Slots: slots,
		ClockOffsetMs: est.offset.Milliseconds(), ClockRefused: refused,
	})
	if err != nil {
		return err
	}
	if handlers != nil {
		p.mu.Lock()
		p.beatGen, p.beatHandlersAt = gen, now
		p.mu.Unlock()
	} else if due && big {
		select {
		case p.publish <- struct{}{}:
		default: // one is under way
		}
	}
	return p.refreshLive(ctx, now)
}

// refreshLive reads the IDs of the live replicas (heartbeat within
// ReplicaTimeout), and of those that claim, by which the slots are shared
// out (sharesLocked) and the shards dealt (refreshHosts).
func (p *planner) refreshLive(ctx context.Context, now time.Time) error {
	alive, ids, err := p.store.LiveAndClaiming(ctx, p.opts.App, now.Add(-p.opts.ReplicaTimeout).UnixMilli())
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.live, p.alive = ids, alive
	p.mu.Unlock()
	return p.refreshHosts(ctx, now, ids)
}

// BigHandlerList is the size past which a replica writes its handlers'
// list apart from its heartbeats (publishHandlers), off Start and off the
// tick loop: a million codes make megabytes of JSON, and sorting, encoding
// and writing them was a visible share of each replica's start-up
// (bench/README.md's performance report has the figures).
const BigHandlerList = 10_000

// handlerCodesLocked lists the handlers registered here, in the order
// they were registered (sortCodes sorts them). v.mu is held.
func (v *view) handlerCodesLocked() []string {
	codes := make([]string, 0, v.handlers.len())
	for r := range v.handlers.all() {
		codes = append(codes, r.code)
	}
	return codes
}

// sortCodes sorts codes, unless they are sorted already, as a service's
// list often is. A million codes taken from the handlers' map came in its
// random order, and sorting them under the view's lock held the fires of
// the first seconds after Start for most of a second.
func sortCodes(codes []string) []string {
	if !slices.IsSorted(codes) {
		slices.Sort(codes)
	}
	return codes
}

// handlerList is what the heartbeat writes of the handlers registered
// here, given the generation it last wrote (lastGen): due when they
// changed since, or rewrite; the codes only when due and not big
// (BigHandlerList: publishHandlers writes those); gen, the generation
// they are of.
func (v *view) handlerList(lastGen int, rewrite bool) (codes []string, gen int, due, big bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	due, big = rewrite || lastGen != v.handlersGen, v.handlers.len() > BigHandlerList
	if due && !big {
		codes = sortCodes(v.handlerCodesLocked())
	}
	return codes, v.handlersGen, due, big
}

// publishHandlers writes this replica's list of handlers when a heartbeat
// finds it due and too big to go with it (BigHandlerList); the store keeps
// such a list in chunks (store.SetReplicaHandlers). It is a loop of the
// planner. A failed write is logged as an error, and tried again at a
// heartbeat after a wait that doubles from HeartbeatInterval to
// handlersRewrite: a write that fails for its size fails again, and the
// list is megabytes.
func (p *planner) publishHandlers(ctx context.Context) {
	var failures int
	var retryAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.publish:
		}
		now := p.clock.Now()
		if now.Before(retryAt) {
			continue
		}
		p.view.mu.Lock()
		codes, gen := p.view.handlerCodesLocked(), p.view.handlersGen
		p.view.mu.Unlock()
		codes = sortCodes(codes) // off the lock: a million codes
		ok, err := p.store.SetReplicaHandlers(ctx, p.opts.App, p.opts.InstanceID, codes)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			failures++
			wait := min(p.opts.HeartbeatInterval<<min(failures-1, 16), handlersRewrite)
			retryAt = now.Add(wait)
			p.log.Error("handler list not written: the other replicas do not know which tasks run here",
				"replica", p.opts.InstanceID, "handlers", len(codes), "failures", failures, "retry_in", wait, "err", err)
		case ok:
			if failures > 0 {
				p.log.Info("handler list written", "replica", p.opts.InstanceID, "handlers", len(codes), "failures", failures)
			}
			failures, retryAt = 0, time.Time{}
			p.mu.Lock()
			p.beatGen, p.beatHandlersAt = gen, now
			p.mu.Unlock()
		}
	}
}

// tickLoop wakes once a second, tickPhase after the second boundary of
// the clock, the first time firstTickAfter after Start at the earliest,
// and in between at the instant plan asked for (replanAt), if any, for a
// tick, and at the instant another replica's slot lock runs out
// (nextRecheck), for a look at the slots only (recheck).
func (p *planner) tickLoop(ctx context.Context) {
	// The first tick instant at or after firstTickAfter from now (untilTick
	// of a tick instant is a whole second).
	start := p.clock.Now()
	tickAt := start.Add(firstTickAfter + untilTick(start.Add(firstTickAfter))%time.Second)
	timer := p.clock.NewTimer(tickAt.Sub(start))
	defer timer.Stop()
	woke := start // the clock when the loop last woke
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		now := p.clock.Now()
		if now.Before(woke) {
			// The clock went back (a host clock set back, before the
			// heartbeat's measure corrects it: clockref.go): tick on its
			// new seconds rather than wait for the old tick instant.
			tickAt = now.Add(untilTick(now))
		}
		woke = now
		if !now.Before(tickAt) || !p.replanAt.IsZero() && !now.Before(p.replanAt) {
			p.replanAt = time.Time{}
			p.tick(ctx, now)
			now = p.clock.Now()
			tickAt = now.Add(untilTick(now))
		} else {
			p.recheck(ctx, now)
			now = p.clock.Now()
		}
		next := tickAt
		if !p.replanAt.IsZero() && p.replanAt.Before(next) {
			next = p.replanAt
		}
		if at := p.nextRecheck(now); !at.IsZero() && at.Before(next) {
			next = at
		}
		timer.Reset(max(next.Sub(now), 0))
	}
}

// replanBy asks the tick loop for a tick at the instant at, unless plan
// asked for an earlier one (replanAt).
func (p *planner) replanBy(at time.Time) {
	if p.replanAt.IsZero() || at.Before(p.replanAt) {
		p.replanAt = at
	}
}

// recheck claims, between ticks, the slots found held by another replica
// whose locks should have run out by now (claimSlot learned when): a
// killed, frozen or cut-off owner's slot is recorded or taken over, and
// its fires armed, within a few hundred milliseconds of its lock's expiry
// rather than at the next tick. It is plan, which claims only what is
// due; a slot still held is looked at again when its refreshed lock runs
// out. Only the tick loop calls it.
func (p *planner) recheck(ctx context.Context, now time.Time) {
	if err := p.plan(ctx, now); err != nil && ctx.Err() == nil {
		p.host.noteDB(err) // an answer is noted by the tick, which asks more of the database
	}
}

// nextRecheck is the earliest instant after now at which a slot found held
// by another replica is to be looked at again (slotState.recheck); zero
// if none.
func (p *planner) nextRecheck(now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var next time.Time
	for _, st := range p.slots {
		if (!st.done || st.unlocked) && st.recheck.After(now) && (next.IsZero() || st.recheck.Before(next)) {
			next = st.recheck
		}
	}
	return next
}

// firstTickAfter: a replica's first tick comes at least this long after
// its Start, when the replicas of a fleet started together have written
// their first heartbeats, so that it shares out with them the minute they
// started in (startShareWait).
const firstTickAfter = 500 * time.Millisecond

// tickPhase is how far into each second the tick loop wakes. Fires run at
// whole seconds (cron has no finer unit), so the boundary is when a
// replica starts handlers and writes their starts; a tick there (its
// queries, and then the insert of the next minute's rows) took
// the CPU from them: with 1,000 fires a second on one replica, the fires
// of every second started later, and those of the second of the insert
// latest (bench/README.md's performance report has the lateness before and
// after).
// Half a second in, the tick's work falls between two instants.
const tickPhase = 500 * time.Millisecond

// untilTick is the wait from now to the next tick: the next instant
// tickPhase past a second boundary.
func untilTick(now time.Time) time.Duration {
	next := now.Truncate(time.Second).Add(tickPhase)
	if !next.After(now) {
		next = next.Add(time.Second)
	}
	return next.Sub(now)
}

func (p *planner) tick(ctx context.Context, now time.Time) {
	p.health.tick(now)
	err := p.view.syncTasks(ctx)
	if err == nil {
		p.health.answered(p.clock.Now()) // an outage's end, as the lock keeper needs it, before the claims (obtain)
	}
	// A clock gone back past the last heartbeat (set back, and not
	// corrected yet: clockref.go) heart-beats, and so measures, at once.
	if last := p.lastBeatAt(); err == nil && (now.Sub(last) >= p.opts.HeartbeatInterval || now.Before(last)) {
		if err = p.heartbeat(ctx, now); err == nil {
			now = p.clock.Now() // as the heartbeat's measure corrected it
			err = p.rescueLost(ctx, now)
		}
	}
	// A replica whose clock is beyond MaxClockSkew claims nothing: no
	// slot, no orphan fire, no retry (clockref.go).
	claims := !p.ref.refusing()
	if err == nil && claims {
		err = p.plan(ctx, now)
	}
	if err == nil && claims {
		err = p.claimFires(ctx, now)
	}
	if err == nil && claims {
		err = p.pickRetries(ctx, now)
	}
	if err == nil {
		err = p.host.pollCancels(ctx)
	}
	if err == nil {
		p.reseed(ctx, now)
	}
	p.host.noteDB(err)
}

func (p *planner) lastBeatAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastBeat
}

type slotKey struct {
	minute int64 // Unix minute
	bucket int
}

// start is the instant the slot's minute starts: its first possible fire.
func (k slotKey) start() time.Time { return time.Unix(k.minute*60, 0) }

// end is the instant the slot's minute ends: its fires are before it.
func (k slotKey) end() time.Time { return time.Unix((k.minute+1)*60, 0) }

type slotState struct {
	done    bool
	recheck time.Time // lost to another replica: look again at this instant
	opened  time.Time // when plan first saw the slot
	// atStart: plan first saw the slot in the replica's first claims,
	// where the others' shares wait startShareWait (plan).
	atStart bool
	// upTo: this replica recorded every fire of the slot up to upTo, as
	// its tasks were then, and the slot has stayed this replica's since
	// (held, or recorded while the lock backend did not answer); zero
	// otherwise. A held slot is recorded as time goes (recordAhead): each
	// round records its fires after upTo and up to the round's frontier,
	// and the slot is done once upTo reaches its minute's end.
	upTo time.Time
	// only, when not nil, names the tasks to plan again, up to upTo, in a
	// slot this replica recorded that far: their fires changed
	// (reopenSlots). The slot's other fires up to upTo are recorded
	// already.
	only map[string]bool
	// gen counts the task changes that reopened the slot: a plan that read
	// the tasks before the latest one leaves the slot open for another.
	gen int
	// takeOverDue: won from another replica (or from the replicas that
	// recorded it without the lock), and the unstarted fires they recorded
	// are not all taken over yet: a round that failed halfway takes them
	// over again in the next.
	takeOverDue bool
	// unlocked: recorded while the lock backend did not answer, so without
	// the lock. Once it answers, relockSlots claims the lock, as a live
	// owner holds it, so that the slot's fires are taken over when their
	// recorders die.
	unlocked bool
}

// disown forgets what this replica recorded of the slot: it is another
// replica's now, or was since (lost, found held), and the next win plans
// it in full and takes it over afresh.
func (st *slotState) disown() { st.upTo, st.only, st.takeOverDue = time.Time{}, nil, false }

// fire is one planned instant of one task.
type fire struct {
	task *taskState
	at   time.Time
}

// quietSpan is a span of time, [from, until), in which no task of a
// bucket has a fire.
type quietSpan struct{ from, until time.Time }

// plannedSlot is the fires firesIn found in one minute of a bucket, in a
// walk of all its tasks at the bucket's generation gen (view.planned).
type plannedSlot struct {
	minute int64
	gen    int
	fires  []fire // nil: none kept
}

// keepAt is the entry of ps to keep minute's fires in: the one that holds
// that minute, else an empty one, else the earlier minute's (planning goes
// forward, the current minute and the next).
func keepAt(ps *[2]plannedSlot, minute int64) int {
	for i, p := range ps {
		if p.fires != nil && p.minute == minute {
			return i
		}
	}
	for i, p := range ps {
		if p.fires == nil {
			return i
		}
	}
	if ps[1].minute < ps[0].minute {
		return 1
	}
	return 0
}

// firesIn returns the fires of active tasks of a bucket in one minute, in
// time order: of the tasks named in only, when only is not nil. The caller must not
// change the slice: it may be the one kept for the next call
// (view.planned).
//
// A walk of every task of the bucket (only nil) also notes until when the
// bucket has no fire (bucketQuiet): the earliest next fire of its tasks.
// The minutes before it return at once, without looking at a task: with a
// million tasks firing once a day, walking every task of every bucket each
// minute was most of an idle replica's CPU.
func (v *view) firesIn(minute int64, bucket int, only map[string]bool) []fire {
	from := time.Unix(minute*60, 0)
	to := from.Add(time.Minute)
	v.mu.Lock()
	defer v.mu.Unlock()
	if to.UnixMilli() <= v.bucketFrom[bucket] {
		return nil // before every task of the bucket: catch-up after a first start
	}
	if q := v.bucketQuiet[bucket]; !from.Before(q.from) && !to.After(q.until) {
		return nil
	}
	if only == nil {
		for _, p := range v.planned[bucket] {
			if p.fires != nil && p.minute == minute && p.gen == v.bucketGen[bucket] {
				return p.fires
			}
		}
	}
	var out []fire
	if only == nil {
		// As many as the bucket's last minutes had: a steady bucket's
		// fires are one allocation, not a doubling chain.
		hint := 0
		for _, p := range v.planned[bucket] {
			hint = max(hint, len(p.fires))
		}
		out = make([]fire, 0, hint)
	}
	var next int64 // the earliest fire at or after to, Unix ns; zero: none
	noteNext := func(at int64) {
		if at != 0 && (next == 0 || at < next) {
			next = at
		}
	}
	fromNs, toNs := from.UnixNano(), to.UnixNano()
	tasks := v.byBucket[bucket]
	for i := range tasks {
		e := &tasks[i]
		// The quiet span first, from the entry alone (bucketTask): the
		// check below with the task's own start, which is never before
		// fromNs, is the exact one.
		if fromNs-1 >= e.quietFrom && toNs <= e.quietUntil {
			noteNext(e.quietUntil)
			continue
		}
		t := e.t
		if only != nil && !only[t.code] {
			continue
		}
		// A task has no fires before it was first recorded: catch-up must
		// not invent an hour of misfires for a task created a minute ago.
		// Nor before its current schedule was adopted: planning the current
		// minute again after an edit must not back-fill its past.
		startNs := max(fromNs, t.createdMs*int64(time.Millisecond)) - 1
		if since := t.sinceNs(); since != 0 {
			startNs = max(startNs, since-1)
		}
		// The quiet span comes before active, which reads the definition
		// too. An entry has a quiet span only if its state was active when
		// it got one, and a state's activity never changes (a change is a
		// new state, put in with no span).
		if startNs >= e.quietFrom && toNs <= e.quietUntil {
			noteNext(e.quietUntil)
			continue // no fire in the window: known from an earlier minute
		}
		if !t.active() {
			continue
		}
		end := t.endAt()
		start := time.Unix(0, startNs)
		at := t.sched().Next(start)
		for ; !at.IsZero() && at.Before(to); at = t.sched().Next(at) {
			if !end.IsZero() && !at.Before(end) {
				break
			}
			out = append(out, fire{t, at})
			start = at
		}
		if !at.IsZero() && !at.Before(to) {
			e.quietFrom, e.quietUntil = start.UnixNano(), at.UnixNano()
			if end.IsZero() || at.Before(end) {
				noteNext(at.UnixNano())
			}
		}
	}
	slices.SortStableFunc(out, func(a, b fire) int { return a.at.Compare(b.at) }) // a round records a span of them (dueFires)
	if only == nil {
		q := quietSpan{from: to, until: time.Unix(0, next)}
		if len(out) == 0 {
			q.from = from
		}
		if next == 0 {
			q.until = time.Unix(1<<62, 0) // no task of the bucket fires again
		}
		v.bucketQuiet[bucket] = q
		if len(out) > 0 {
			ps := &v.planned[bucket]
			ps[keepAt(ps, minute)] = plannedSlot{minute: minute, gen: v.bucketGen[bucket], fires: slices.Clip(out)}
		}
	}
	return out
}

// findMissedSlots registers, at Start, the slots of the last
// CatchUpHorizon that have fires and that no replica marked done: every
// replica was down, or the database was.
func (p *planner) findMissedSlots(ctx context.Context, now time.Time) error {
	cur := now.Unix() / 60
	from := now.Add(-p.opts.CatchUpHorizon).Unix() / 60
	done, err := p.store.DoneSlots(ctx, p.opts.App, from, cur-1)
	if err != nil {
		return err
	}
	isDone := make(map[slotKey]bool, len(done))
	for _, d := range done {
		isDone[slotKey{d.Minute, d.Bucket}] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for m := from; m < cur; m++ {
		for b := range p.opts.Buckets {
			k := slotKey{m, b}
			if _, seen := p.slots[k]; !seen {
				p.slots[k] = &slotState{done: isDone[k]}
			}
		}
	}
	return nil
}

// reopenSlots has plan record a task's fires again in the minutes already
// planned, from now on (the current minute, and the next one once it is
// claimed), after its fires changed. Without it, fires of a new schedule in
// those minutes, up to where the slots are recorded, would never be
// recorded, catch-up included. It follows the slot's lock, so the fleet
// records them once:
//
//   - a slot this replica recorded some way (upTo: held, or recorded while
//     the lock backend was down) is planned again for this task only up to
//     upTo, the rest of it being recorded there, and goes on as time goes
//     from upTo for every task;
//   - a slot it marked done without a lock and without a fire is planned
//     again in full, from the claim on: of the replicas that do the same,
//     the one that gets the lock records;
//   - a slot lost to another replica is left to its owner, which adopts the
//     same row within a second; this replica watches it already, and plans
//     it in full, with the task's new fires, if the owner dies.
//
// Rows inserted twice collide on the unique key, and only the replica that
// inserted a row arms it, as for any slot. It takes p.mu; the
// view's changes call it with view.mu held (the lock order).
func (p *planner) reopenSlots(t *taskState, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := now.Unix() / 60
	for m := cur; m <= cur+1; m++ { // plan claims no further ahead
		st := p.slots[slotKey{m, int(t.bucket)}]
		if st == nil {
			continue
		}
		st.gen++ // a plan of the slot under way read the task before this
		switch {
		case !st.upTo.IsZero():
			if st.only == nil {
				st.only = map[string]bool{}
			}
			st.done, st.only[t.code] = false, true
		case st.done:
			st.done = false
		}
	}
}

// plan claims and records the slots that are due: the next minute once it
// is ClaimAhead away, the current one, and earlier ones still open (a
// database error, a lost owner, catch-up after Start).
func (p *planner) plan(ctx context.Context, now time.Time) error {
	cur := now.Unix() / 60
	last := cur
	if now.Add(p.opts.ClaimAhead).Unix()/60 > cur {
		last = cur + 1
	}
	p.mu.Lock()
	_, seen := p.slots[slotKey{cur, 0}]
	_, seenLast := p.slots[slotKey{last, 0}]
	p.mu.Unlock()
	if !seen || !seenLast {
		// The minute is new here: this replica just started (or its tick
		// loop was held up past ClaimAhead), or the next minute comes due.
		// The live list it shares the minute out by, and deals its shards
		// over (refreshHosts), is read again, with the heartbeats of the
		// replicas that started since the last heartbeat here.
		before := p.liveList()
		if err := p.refreshLive(ctx, now); err != nil {
			return err
		}
		if p.settling(now, before) {
			return nil
		}
	}
	lost := p.keeper.takeLost()
	p.mu.Lock()
	for k, at := range lost {
		if st := p.slots[k]; st != nil {
			st.done, st.recheck = false, at
			st.disown()
		}
	}
	for m := cur; m <= last; m++ {
		for b := range p.opts.Buckets {
			if _, ok := p.slots[slotKey{m, b}]; !ok {
				p.slots[slotKey{m, b}] = &slotState{opened: now, atStart: !p.settle.dealt}
			}
		}
	}
	p.settle.dealt = true
	var keys, relock, watched []slotKey
	lookAt := false // a slot held elsewhere is due for a look
	horizon := now.Add(-p.opts.CatchUpHorizon).Unix() / 60
	others := now.Add(p.opts.ClaimAhead-p.shareWait()).Unix()/60 > cur // the next minute's other slots are due too
	for k, st := range p.slots {
		switch {
		case k.minute < horizon-1:
			delete(p.slots, k) // beyond catch-up: forget
		case !st.done && !st.recheck.IsZero() && k.minute < cur-1:
			st.done = true // watched long enough; ClaimFires covers what is left
		case !st.done && k.minute > cur && !others && !p.keeper.holds(k) && !p.sharesLocked(k):
			// Another replica's share of the next minute: left to it for now.
		case !st.done && st.atStart && !p.keeper.holds(k) && now.Sub(st.opened) < startShareWait && !p.sharesLocked(k):
			// Another replica's share of the minute this one started in,
			// or of the next one when it started within shareWait of it:
			// left to it for startShareWait, then claimed if still free,
			// even where that wait reaches into the minute.
			p.replanBy(st.opened.Add(startShareWait))
		case !st.done && k.minute <= last && !now.Before(st.recheck):
			keys = append(keys, k)
			lookAt = lookAt || !st.recheck.IsZero()
		case !st.done && k.minute <= last:
			watched = append(watched, k) // held elsewhere, its recheck to come
		case st.done && st.unlocked && k.minute < cur-1:
			st.unlocked = false // its fires are due: ClaimFires covers what is left
		case st.done && st.unlocked && !now.Before(st.recheck):
			relock = append(relock, k)
		}
	}
	p.mu.Unlock()
	bySlot := func(keys []slotKey) {
		slices.SortFunc(keys, func(a, b slotKey) int {
			return cmp.Or(cmp.Compare(a.minute, b.minute), cmp.Compare(a.bucket, b.bucket))
		})
	}
	// The slots held elsewhere whose rechecks are still to come are looked
	// at with the one due, in the same peek (planSlots): their locks, found
	// at claims a startShareWait apart, would otherwise run out at two
	// phases, and each be looked at in a call of its own.
	var early map[slotKey]bool
	if lookAt && len(watched) > 0 {
		early = make(map[slotKey]bool, len(watched))
		for _, k := range watched {
			early[k] = true
		}
		keys = append(keys, watched...)
	}
	bySlot(keys)
	bySlot(relock)
	lockDown := false // after one unavailable answer this tick, do not wait on the lock again
	if err := p.relockSlots(ctx, now, relock, &lockDown); err != nil {
		return err
	}
	return p.planSlots(ctx, now, keys, early, &lockDown)
}

// relockSlots claims the locks of slots recorded without them, while the
// lock backend did not answer (slotState.unlocked), once it answers again.
// Until then the fleet's replicas may each have recorded some of such a
// slot's fires, and nobody holds its lock: a recorder killed after the
// backend came back would leave its fires to the orphan claims
// (claimFires), seconds after its heartbeat stops, where a held slot is
// taken over at its lock's expiry. Each replica that recorded the slot
// tries: the one that wins takes over its unstarted fires (takeOver, the
// same fencing as a dead owner's), and the others watch the lock as for a
// slot lost to another replica (recheck), so that they take the slot over
// within moments of the winner's death. down is planSlots' flag: one
// unavailable answer ends the tick's tries.
func (p *planner) relockSlots(ctx context.Context, now time.Time, keys []slotKey, down *bool) error {
	for _, k := range keys {
		p.mu.Lock()
		st := p.slots[k]
		p.mu.Unlock()
		if !p.claimSlot(ctx, now, k, st, down, nil) {
			continue // held by another replica: watched from st.recheck on
		}
		if *down {
			return nil // still unavailable: tried again next tick
		}
		// Every task of the slot: the other replicas recorded its fires
		// by their own views, without the lock.
		if err := p.takeOver(ctx, k, k.minute*60_000, (k.minute+1)*60_000, nil); err != nil {
			return err
		}
		p.mu.Lock()
		st.unlocked = false
		p.mu.Unlock()
	}
	return nil
}

// The next minute's slots are shared out among the live replicas: each
// claims its share at ClaimAhead, and the others' shareWait later, if they
// are still free (their replica died, or the replicas' lists of the live
// ones differ for a heartbeat). Without it, the replica whose tick reaches
// Redis first takes every slot of the minute, and alone inserts, claims and
// runs all its fires while the others idle: a burst of 10,000 fires at the
// top of a minute waited for one replica's claims, where three replicas
// claim theirs side by side. The lock still decides who owns a slot; the
// share only says who tries first.
//
// The minute a fleet starts in is shared out too: a replica claims its
// share of it at its first tick, and the others' startShareWait later, in
// a tick of its own (replanAt), if they are still free. So is the next
// minute when the fleet starts within shareWait of it, even where the wait
// reaches into that minute: its other shares were otherwise due at once,
// and the replica that ticked first took them (in a fleet started 2 s
// before a minute, at 10,000 fires a second, one replica ran none of that
// minute's fires and another four fifths, seconds late; and where the
// wait reached into the minute, the first of two replicas settling at one
// tick took the other's share). Replicas started
// together tick a second apart when their Starts straddle a tick instant;
// without it, the first to tick took every slot of the minute it could:
// the minute's fires went to the replicas unevenly, or all to one, and the
// heaviest share started late (bench/README.md's performance report has the
// shares measured). A share whose replica never claims it (listed live,
// but dead) has the fires of its first second or so recorded that much
// late, at a fleet's start only (slotState.atStart): in a running fleet the
// current minute's slots were claimed at ClaimAhead, and the next minute's
// others' shares come due shareWait after it, whatever ClaimAhead is.
//
// shareWait is half the claim-ahead time, in whole ticks (the loop ticks
// once a second), so that the other replicas still have half of it to
// record a dead replica's share: none with ClaimAhead at its minimum, 1s.
func (p *planner) shareWait() time.Duration {
	return min(p.opts.ClaimAhead/2, p.opts.ClaimAhead-time.Second).Truncate(time.Second)
}

// startShareWait: see above. A second and three quarters, so that a
// replica whose first tick comes a second after this one's, and whose
// list changed there (a second look liveSettleLook later, settling),
// claims its share first, and the tick for the rest falls between two
// instants.
const startShareWait = 1750 * time.Millisecond

// liveSettleMax bounds the wait of a starting replica's first claims for
// the live list to stop changing (settling): a fleet whose replicas keep
// starting, or a list changing for another reason, does not hold them back
// longer.
const liveSettleMax = 3 * time.Second

// liveSettleLook is how soon after a look at the live list that found it
// changed the next look comes (settling). A tick later, as it was, the
// replicas that saw their siblings' first heartbeats come in after their
// Starts claimed a second after the one whose Start had seen them all, and
// their first fires started seconds after its (bench/README.md, the start
// of a 10,000 step traced).
const liveSettleLook = 250 * time.Millisecond

// settling tells whether plan, in the replica's first rounds, should claim
// nothing yet: the live list it has just read (p.live) differs from the
// one it read before (before, at Start's heartbeat, for the first round;
// the last round's after), so replicas started with this one are still
// writing their first heartbeats. A replica that claimed its share by a
// list lacking a sibling took part of that sibling's share, which the
// sibling then found held: at a fleet's start one replica ran half the
// minute's fires, the others a quarter each (bench/README.md's
// performance report, the uneven deal at the fleet's start). So the first
// claims wait, liveSettleLook at a time (a tick of its own, replanAt),
// until two looks agree or liveSettleMax has passed since the first; a
// replica started alone, or into a running fleet whose list does not
// change, claims at its first tick. Tick loop only.
func (p *planner) settling(now time.Time, before []string) bool {
	if p.settle.done {
		return false
	}
	if p.settle.from.IsZero() {
		p.settle.from, p.settle.live = now, before
	}
	live := p.liveList()
	if slices.Equal(p.settle.live, live) || now.Sub(p.settle.from) >= liveSettleMax {
		p.settle.done = true
		return false
	}
	p.settle.live = live
	p.replanBy(now.Add(liveSettleLook))
	return true
}

// liveList is the live list, which a read replaces and nothing changes in
// place.
func (p *planner) liveList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

// sharesLocked tells whether slot k is this replica's share: slots go
// round the live replicas (sorted by ID) by bucket, starting one further
// each minute. A replica not in the list (its first heartbeat is not in)
// or alone has every slot. p.mu is held.
func (p *planner) sharesLocked(k slotKey) bool {
	i := slices.Index(p.live, p.opts.InstanceID)
	if i < 0 || len(p.live) < 2 {
		return true
	}
	return (int(k.minute%int64(len(p.live)))+k.bucket)%len(p.live) == i
}

// planSlots claims open slots and records their fires due by the round's
// frontier (recordAhead from now): a held slot is recorded as time
// goes, a few seconds ahead, one round (a tick, a recheck) after another,
// so that the rows of a minute reach the database as its fires do and not
// all at its claim. Of a round's fires, those of the next few seconds go
// first, so that a replica starting mid-minute, a slot taken over, or a
// slow database does not make the imminent fires wait behind the rest.
// All missed fires of a task in a round are recorded together, so its
// misfire policy sees them all.
func (p *planner) planSlots(ctx context.Context, now time.Time, keys []slotKey, early map[slotKey]bool, lockDown *bool) error {
	frontier := now.Add(recordAhead)
	var fires []fire
	var won, takeOver []slotKey
	// The codes of the tasks with fires in each slot to take over (nil:
	// every task of its bucket): the fires a dead owner recorded there are
	// theirs.
	firing := map[slotKey][]string{}
	gens := make(map[slotKey]int, len(keys))
	unlocked := map[slotKey]bool{}
	// The slots with fires, and what the round read of each before its claim.
	type openSlot struct {
		k                 slotKey
		st                *slotState
		held, wasUnlocked bool
		due               bool // st.takeOverDue
		gen               int
		only              map[string]bool
		upTo              time.Time
		f                 []fire
	}
	var opens []openSlot
	var others []slotKey // of those, the slots this replica does not hold
	for _, k := range keys {
		p.mu.Lock()
		st := p.slots[k]
		held := p.keeper.holds(k)
		if !held && !st.unlocked {
			// Not this replica's since it recorded it: planned again in
			// full, from the claim on.
			st.disown()
		}
		o := openSlot{k: k, st: st, held: held, gen: st.gen, only: maps.Clone(st.only), upTo: st.upTo,
			wasUnlocked: st.unlocked, due: st.takeOverDue}
		p.mu.Unlock()
		if o.only != nil && !o.upTo.Before(k.end()) {
			o.f = p.view.firesIn(k.minute, k.bucket, o.only) // the rest of the slot is recorded
		} else {
			o.f = p.view.firesIn(k.minute, k.bucket, nil)
		}
		if len(o.f) == 0 {
			p.mu.Lock()
			if st.gen == o.gen {
				st.done, st.only = true, nil // nothing to claim: no lock, no row
			}
			p.mu.Unlock()
			continue
		}
		opens = append(opens, o)
		if !held {
			others = append(others, k)
		}
	}
	var peeked map[slotKey]time.Duration
	if len(others) > 1 && !*lockDown {
		// Mostly slots other replicas hold, looked at again as their locks
		// should run out: one round trip for them all.
		var err error
		peeked, err = p.keeper.peek(ctx, others)
		if err != nil && ctx.Err() == nil {
			// The backend did not answer: as for a claim (claimSlot), the
			// round goes on without the lock, and the fallback is noted.
			// Left to the claims that follow, the outage went unseen when
			// the backend answered them again (a Sentinel promotion).
			*lockDown = true
			p.host.noteRedis(err)
		}
	}
	for _, o := range opens {
		if _, seen := peeked[o.k]; early[o.k] && (!seen || *lockDown) {
			continue // not due, and the peek did not see it: left to its recheck
		}
		if !p.claimSlot(ctx, now, o.k, o.st, lockDown, peeked) {
			continue
		}
		fires = append(fires, dueFires(o.f, o.upTo, frontier, o.only)...)
		won = append(won, o.k)
		gens[o.k] = o.gen
		switch {
		case *lockDown:
			unlocked[o.k] = true
		case !o.held || o.due:
			// Won just now: no live owner refreshes the lock, so any
			// unstarted fire of the slot recorded by another replica is
			// ours to run (its recorder died, froze, or restarted under a
			// new ID). A slot this replica recorded while the lock backend
			// did not answer was recorded by the others too, each by its
			// own view: every task of its bucket is taken over.
			takeOver = append(takeOver, o.k)
			if !o.wasUnlocked {
				firing[o.k] = firingCodes(o.f)
			}
			p.mu.Lock()
			o.st.takeOverDue = true
			p.mu.Unlock()
		}
	}
	if len(won) == 0 {
		return nil
	}
	// The round records in time order: the urgent fires (those before
	// soon) an instant a call (see urgentCall), the rest in chunks
	// between instants (nextChunk), each armed as soon as it is
	// committed, so that a slow database delays the end of the round, not
	// its start. (Missed fires are all in urgent, so splitting later never
	// separates the missed fires of one task.) The sort is stable: at each
	// instant, a slot's fires stay together (fires is made slot by slot),
	// as the chunks' ends need (slotInstantEnd).
	slices.SortStableFunc(fires, func(a, b fire) int { return a.at.Compare(b.at) })
	soon := now.Add(urgentHorizon)
	split := slices.IndexFunc(fires, func(f fire) bool { return !f.at.Before(soon) })
	if split < 0 {
		split = len(fires)
	}
	urgent, later := fires[:split], fires[split:]
	// A dead owner's fires due soon are taken over first: they are late
	// already (its lock ran out seconds after it died). One replica often
	// wins every slot of the dead one: taken over whole, one after the
	// other, the last slot's fires waited for every row of the slots
	// before it to be taken over. The rest of its slots follow the urgent
	// fires recorded here, and precede the later ones: those are recorded
	// in chunks between instants, and a dead owner's fires taken over only
	// after them started seconds late (5.4 s in a chaos run), where one
	// update per slot takes tens of milliseconds.
	urgentMs := soon.UnixMilli()
	for _, k := range takeOver {
		if err := p.takeOver(ctx, k, k.minute*60_000, min((k.minute+1)*60_000, urgentMs), firing[k]); err != nil {
			return err
		}
	}
	for len(urgent) > 0 {
		n := urgentCall(urgent, now)
		found, err := p.record(ctx, now, urgent[:n])
		if err == nil {
			err = p.takeOverFound(ctx, found, unlocked)
		}
		if err != nil {
			return err // upTo stays: the round is tried again under the lock
		}
		urgent = urgent[n:]
	}
	for _, k := range takeOver {
		if err := p.takeOver(ctx, k, max(k.minute*60_000, urgentMs), (k.minute+1)*60_000, firing[k]); err != nil {
			return err
		}
		p.mu.Lock()
		p.slots[k].takeOverDue = false
		p.mu.Unlock()
	}
	// The chunks end by the round's next tick instant: what does not fit
	// before it is left to that tick, which records from the slots' new
	// upTo to its own frontier (recordAhead from then), at once if the
	// round ran past it (replanAt). A round that went on with its own
	// frontier ended with its last fires due within a second, and the
	// next round's urgent fires were late before it recorded them.
	tickAt := now.Add(untilTick(now))
	for len(later) > 0 {
		n, ok := p.nextChunk(ctx, len(later), tickAt)
		if !ok {
			return ctx.Err() // stopping; the slots stay open
		}
		if n == 0 {
			p.replanBy(tickAt)
			break
		}
		n = slotInstantEnd(later, n)
		began := time.Now()
		found, err := p.record(ctx, now, later[:n])
		if err != nil {
			return err
		}
		p.noteRecord(time.Since(began), n)
		if err := p.takeOverFound(ctx, found, unlocked); err != nil {
			return err
		}
		later = later[n:]
	}
	upTo := recordedUpTo(won, frontier, later)
	var slots []store.Slot
	p.mu.Lock()
	for _, k := range won {
		if p.slots[k].gen == gens[k] && !upTo[k].Before(k.end()) {
			slots = append(slots, store.Slot{App: p.opts.App, Minute: k.minute, Bucket: k.bucket, Done: true,
				Owner: p.opts.InstanceID, DoneMs: now.UnixMilli()})
		}
	}
	p.mu.Unlock()
	if len(slots) > 0 {
		if err := p.store.MarkSlotsDone(ctx, p.opts.App, slots); err != nil {
			return err // fires are recorded; the round and the mark are tried again
		}
	}
	p.mu.Lock()
	for _, k := range won {
		st := p.slots[k]
		st.unlocked = unlocked[k]
		if st.gen != gens[k] {
			continue // a task changed while this ran: its round is recorded again
		}
		// A slot with fires left is recorded up to just before them, even
		// where that is before its upTo: a task in only may have some.
		if upTo[k].After(st.upTo) || upTo[k].Before(frontier) {
			st.upTo = upTo[k]
		}
		st.only = nil
		st.done = !st.upTo.Before(k.end())
	}
	p.mu.Unlock()
	if len(fires) > 0 || len(slots) > 0 {
		p.log.Debug("slots recorded", "slots", len(won), "fires", len(fires), "done", len(slots))
	}
	return nil
}

// slotInstantEnd moves n, the end of a chunk of fires (in time order, a
// slot's fires together at each instant), on to the end of the fires of
// later[n-1]'s slot at its instant: a chunk records all of a slot's fires
// at an instant or none, so a round that stops after it knows up to where
// each slot is recorded (recordedUpTo) and records no fire twice. It adds
// at most one slot's fires at one instant.
func slotInstantEnd(later []fire, n int) int {
	for n > 0 && n < len(later) && later[n].at.Equal(later[n-1].at) && later[n].task.bucket == later[n-1].task.bucket {
		n++
	}
	return n
}

// urgentCall is how many of urgent (in time order) one call records:
// every fire due by now (so that all missed fires of a task are recorded
// together, as its misfire policy needs), or else those of the first
// instant, and the instants after them while that is fewer than
// minRecordChunk fires. One call, not one for all: MariaDB's bulk insert
// holds the table's AUTO-INC lock to its end, so replicas starting
// together recorded one after the other, and a replica's first instant
// waited for the others' three seconds of fires.
func urgentCall(urgent []fire, now time.Time) int {
	n := 0
	for n < len(urgent) && n < minRecordChunk {
		upTo := urgent[n].at
		if upTo.Before(now) {
			upTo = now
		}
		for n < len(urgent) && !urgent[n].at.After(upTo) {
			n++
		}
	}
	return n
}

// recordedUpTo is, for each slot won, the instant up to which a round
// recorded its fires: frontier, or just before the earliest of its fires
// left (the fires the round did not record). Fires are recorded in time
// order, a slot's at an instant all in one chunk (slotInstantEnd), so all
// of a slot's fires before that instant are recorded and none at it.
func recordedUpTo(won []slotKey, frontier time.Time, left []fire) map[slotKey]time.Time {
	upTo := make(map[slotKey]time.Time, len(won))
	for _, k := range won {
		upTo[k] = frontier
	}
	for _, f := range left {
		k := slotKey{f.at.Unix() / 60, int(f.task.bucket)}
		if at := f.at.Add(-time.Nanosecond); at.Before(upTo[k]) {
			upTo[k] = at
		}
	}
	return upTo
}

// dueFires picks, of a slot's fires f in time order (firesIn), those a
// round records: those at or before frontier, and after upTo or of a task
// named in only (its fires changed after they were recorded).
func dueFires(f []fire, upTo, frontier time.Time, only map[string]bool) []fire {
	at := func(t time.Time) int {
		i, _ := slices.BinarySearchFunc(f, t, func(f fire, t time.Time) int { return cmp.Or(f.at.Compare(t), -1) }) // the first after t
		return i
	}
	lo, hi := at(upTo), at(frontier)
	var out []fire
	for _, f := range f[:min(lo, hi)] {
		if only[f.task.code] {
			out = append(out, f)
		}
	}
	if lo < hi {
		out = append(out, f[lo:hi]...)
	}
	return out
}

// Fires run at whole seconds, and a chunk of rows recorded across one
// takes the CPU and the database from the fires starting there (on one
// replica of 1,000 fires a second, the seconds that the chunks of the next
// minute's rows crossed started later than the others). So the fires
// after the urgent ones are recorded between instants, in chunks sized to
// end quietGap before the claim of the next whole second's fires (the
// dispatcher's last claim lead before it: a claim that ran against a chunk
// started its second's fires late), started quietGap after one at the
// earliest (nextChunk), by the moving average of the cost of a recorded
// fire (recordPerFire; assumedRecordPerFire before one was timed). A chunk
// is at most recordChunk fires, and at least minRecordChunk: a database
// slower than that overlaps the boundary anyway. (Chunks of a fixed 5,000
// fires, each waiting for a second that had room for it, recorded one
// chunk a second on a database slowed by a burst, and a replica of 4,400
// fires a second fell behind.)
const (
	quietGap             = 20 * time.Millisecond
	maxQuietLead         = 250 * time.Millisecond // a longer lead leaves a burst's second no room for rows
	assumedRecordPerFire = 40 * time.Microsecond
	minRecordChunk       = 200
)

// nextChunk waits, if need be, until a chunk of fires can be recorded
// between instants (see quietGap), and returns how many of left it may
// hold: as many as the clock says end by the instant by, and at least
// minRecordChunk (as chunkAt's); none (n zero) once the clock is past by.
// It measures real time, as the fires' lateness does: under an injected
// clock it delays a chunk by at most a second. ok is false if ctx ended
// first.
func (p *planner) nextChunk(ctx context.Context, left int, by time.Time) (n int, ok bool) {
	if !p.clock.Now().Before(by) {
		return 0, true
	}
	wall := time.Now()
	lead := min(p.fires.lead(), maxQuietLead)
	perFire := cmp.Or(p.recordPerFire, assumedRecordPerFire)
	wait, n := chunkAt(wall.Sub(wall.Truncate(time.Second)), perFire, lead)
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return 0, false
		case <-t.C:
		}
	}
	room := by.Sub(p.clock.Now())
	if room <= 0 {
		return 0, true
	}
	return min(n, max(int(min(room/perFire, recordChunk)), minRecordChunk), left), true
}

// chunkAt is how long a chunk waits, since the time since the last whole
// second, and how many fires it may hold, each expected to take perFire,
// when the fires of a second are claimed lead before it: as many as end
// quietGap before that claim, if at least minRecordChunk do, from
// quietGap after the last whole second; otherwise from quietGap after the
// next one.
func chunkAt(since, perFire, lead time.Duration) (wait time.Duration, n int) {
	if since < quietGap {
		wait, since = quietGap-since, quietGap
	}
	fits := func(room time.Duration) int { return int(min(max(room, 0)/max(perFire, 1), recordChunk)) }
	if n = fits(time.Second - since - quietGap - lead); n >= minRecordChunk {
		return wait, n
	}
	return time.Second - since + quietGap + wait, max(fits(time.Second-2*quietGap-lead), minRecordChunk)
}

// noteRecord folds the time a chunk of n fires took to record into
// recordPerFire.
func (p *planner) noteRecord(d time.Duration, n int) {
	fold(&p.recordPerFire, d/time.Duration(max(n, 1)))
}

// claimSlot takes the slot's lock. Found held, the slot is looked at again
// when the holder's lock runs out (recheck). peeked is lockKeeper.peek's answer
// for the round's slots (nil: none): a slot found held there costs no
// call of its own, and one found free is obtained without another look
// at its holder. With the lock's backend unreachable it
// goes on without: the unique key of the executions table is the guard
// then (more load on the database, the same promise). *down carries that
// state across the slots of one tick, so a dead Redis costs one timeout
// per tick, not one per slot.
func (p *planner) claimSlot(ctx context.Context, now time.Time, k slotKey, st *slotState, down *bool,
	peeked map[slotKey]time.Duration) bool {
	if p.keeper.holds(k) {
		return true // ours, kept alive by the lock keeper
	}
	if *down {
		return true
	}
	left, seen := peeked[k]
	var err error
	if !seen || left == lockFree {
		left, err = p.keeper.obtain(ctx, k, seen)
	} else {
		err = ErrLockHeld // the peek found its holder: no call of its own
	}
	switch {
	case err == nil:
		p.host.noteRedis(nil)
		p.metrics.slotClaim(claimWon)
		p.mu.Lock()
		st.recheck = time.Time{}
		p.mu.Unlock()
		return true
	case errors.Is(err, ErrLockHeld):
		p.host.noteRedis(nil)
		p.metrics.slotClaim(claimLost)
		// Looked at again when the owner's lock runs out, if the Locker
		// tells when (recheck), at the next tick otherwise.
		at := now.Add(time.Second)
		if left > 0 {
			at = now.Add(left + expiryMargin)
		}
		p.mu.Lock()
		st.recheck = at
		st.disown() // another replica's: what it records from now on is its own
		p.mu.Unlock()
		return false
	case errors.Is(err, errDatabaseCut), ctx.Err() != nil:
		// Cut off from the database (lockKeeper.letGo), or stopping: the
		// lock backend is not at fault, and nothing is claimed.
		return false
	default:
		*down = true
		p.host.noteRedis(err)
		return true
	}
}

// takeOver gives this replica the recorded, unstarted fires of a slot whose
// lock it holds but which another replica recorded (its owner stopped
// refreshing the lock: killed, frozen, cut off, or restarted under a new
// ID), those with run times in [fromMs, toMs) of the tasks codes names
// (nil: every task of the slot's bucket). Fires of tasks this replica has
// no handler for are set unowned instead, for a replica that has it to
// claim.
//
// A slot planned here names the tasks its plan found fires for: a bucket
// of a million tasks firing once a day each has tens of thousands of
// tasks and a few hundred fires a minute, and naming every task sent the
// database every code of the app once a minute. A fire the dead owner
// recorded for another task (its view of a schedule differed from this
// replica's) is not lost: the orphan claims (claimFires) pick it up once
// the owner's heartbeat stops.
func (p *planner) takeOver(ctx context.Context, k slotKey, fromMs, toMs int64, codes []string) error {
	if fromMs >= toMs {
		return nil
	}
	p.view.mu.Lock()
	var mine, others []string
	note := func(code string) {
		if p.view.runsHereLocked(code) {
			mine = append(mine, code)
		} else {
			others = append(others, code)
		}
	}
	if codes == nil {
		for _, e := range p.view.byBucket[k.bucket] {
			note(e.t.code)
		}
	} else {
		for _, code := range codes {
			note(code)
		}
	}
	p.view.mu.Unlock()
	if _, _, err := p.store.TakeOverFires(ctx, p.opts.App, others, fromMs, toMs, ""); err != nil {
		return err
	}
	rows, owners, err := p.store.TakeOverFires(ctx, p.opts.App, mine, fromMs, toMs, p.opts.InstanceID)
	if err != nil {
		return err
	}
	if len(rows) > 0 {
		p.log.Info("took over the fires of a slot whose owner stopped refreshing its lock", "minute", k.start().UTC(),
			"bucket", k.bucket, "fires", len(rows), "previous_owners", strings.Join(owners, ","))
	}
	for _, r := range rows {
		r.Replica = p.opts.InstanceID
		p.fires.arm(r)
	}
	return nil
}

// firingCodes lists the codes of the tasks of fires, each once, never nil.
func firingCodes(fires []fire) []string {
	codes := make([]string, 0, len(fires))
	for _, f := range fires {
		codes = append(codes, f.task.code)
	}
	slices.Sort(codes)
	return slices.Compact(codes)
}

// record writes the rows of fires (record-then-run) and arms those this
// replica inserted and can run. Fires already past go through their
// task's misfire policy. It returns the fires it meant to own (scheduled,
// not sharded: alreadyThere) whose rows were there already.
func (p *planner) record(ctx context.Context, now time.Time, fires []fire) ([]fire, error) {
	// Each task's fires in time order, one run of the sorted copy. A
	// task's fires in one round come from one view of it: the fires of a
	// task defined again between two slots' plans are in two runs, and
	// those are in time order, as the slots are.
	byTask := slices.Clone(fires)
	slices.SortFunc(byTask, func(a, b fire) int {
		return cmp.Or(cmp.Compare(a.task.code, b.task.code), a.at.Compare(b.at))
	})
	rows := make([]store.Execution, 0, len(fires))
	for i := 0; i < len(byTask); {
		j := i + 1
		for j < len(byTask) && byTask[j].task == byTask[i].task {
			j++
		}
		var err error
		if rows, err = p.appendRows(ctx, rows, now, byTask[i].task, byTask[i:j]); err != nil {
			return nil, err
		}
		i = j
	}
	inserted, err := p.store.InsertFires(ctx, rows)
	if err != nil {
		return nil, err
	}
	var found []fire
	if len(inserted) < len(rows) {
		found = p.alreadyThere(rows, inserted, byTask)
	}
	skipped := map[[2]string]int{} // task code and reason → fires
	for _, r := range inserted {
		if r.Status == store.StatusScheduled && r.Replica == p.opts.InstanceID {
			if r.Sharded() {
				p.armShard(r)
			} else {
				p.fires.arm(r)
			}
		} else if r.Status == store.StatusSkipped {
			skipped[[2]string{r.TaskCode, r.Reason}]++
		}
	}
	for k, n := range skipped { // one line per task, not one per fire of a long outage
		p.metrics.firesSkipped(k[0], n)
		if k[1] == store.ReasonExcluded {
			p.log.Debug("fires on excluded days recorded skipped", "task", k[0], "fires", n, "reason", k[1])
			continue
		}
		p.log.Info("missed fires recorded skipped", "task", k[0], "fires", n, "reason", k[1])
	}
	return found, nil
}

// alreadyThere lists the fires of rows that this replica meant to own
// (scheduled, not sharded: a shard is its dealt replica's) and that
// InsertFires did not insert, as inserted tells: their rows were there.
func (p *planner) alreadyThere(rows, inserted []store.Execution, fires []fire) []fire {
	type key struct {
		code string
		at   int64
	}
	got := make(map[key]bool, len(inserted))
	for _, r := range inserted {
		got[key{r.TaskCode, r.RunTime}] = true
	}
	tasks := make(map[string]*taskState)
	for _, f := range fires {
		tasks[f.task.code] = f.task
	}
	var found []fire
	for _, r := range rows {
		if r.Status == store.StatusScheduled && r.Replica == p.opts.InstanceID && !r.Sharded() && !got[key{r.TaskCode, r.RunTime}] {
			found = append(found, fire{tasks[r.TaskCode], time.UnixMilli(r.RunTime)})
		}
	}
	return found
}

// takeOverFound takes over the fires a round meant to record and found
// recorded (record's found) in the slots it holds the lock of. Another
// replica recorded them as its own after it lost the slot's lock (Redis
// forgot it: a FLUSHALL, a failover) and before its keeper learned of
// the loss, and after this replica won the slot and took it over. That
// replica would start them if it lives, but if it dies nothing else takes
// them over before the orphan claims, once its heartbeat times out.
// Slots recorded without the lock (unlocked) are every replica's alike.
func (p *planner) takeOverFound(ctx context.Context, found []fire, unlocked map[slotKey]bool) error {
	bySlot := map[slotKey][]fire{}
	for _, f := range found {
		if k := (slotKey{f.at.Unix() / 60, int(f.task.bucket)}); !unlocked[k] {
			bySlot[k] = append(bySlot[k], f)
		}
	}
	for k, fs := range bySlot {
		from, to := fs[0].at.UnixMilli(), fs[0].at.UnixMilli()
		for _, f := range fs[1:] {
			from, to = min(from, f.at.UnixMilli()), max(to, f.at.UnixMilli())
		}
		if err := p.takeOver(ctx, k, from, to+1, firingCodes(fs)); err != nil {
			return err
		}
	}
	return nil
}

// appendRows appends to rows those of fires, one task's in time order:
// those on days the task excludes skipped (calendar.go), then the
// misfire policy applied to those already past, and WithMaxRuns.
func (p *planner) appendRows(ctx context.Context, rows []store.Execution, now time.Time, t *taskState, fires []fire) ([]store.Execution, error) {
	owner := ""
	if p.view.runsHere(t.code) {
		owner = p.opts.InstanceID
	}
	row := func(at time.Time, planned int64, status, source, reason string) store.Execution {
		return store.Execution{App: p.opts.App, TaskCode: t.code, RunTime: at.UnixMilli(), Status: status,
			Source: source, Reason: reason, MaxAttempts: max(t.def().MaxAttempts, 1), Replica: owner,
			PlannedMs: planned}
	}
	skip := func(at time.Time, planned int64, reason string) store.Execution {
		r := row(at, planned, store.StatusSkipped, store.SourceSchedule, reason)
		r.Replica = p.opts.InstanceID
		return r
	}
	if t.excl != nil && len(fires) > 0 {
		p.noteMissingCalendar(t, fires[0].at)
	}
	// The rows go in time order. A missed (overdue) fire within the
	// task's misfire window runs as a catch-up under MisfireRunAll; under
	// MisfireRunOnce only the last missed fire may, and which one that is
	// is known at the end (lastMissed: its row, -1 for none). The others
	// are recorded skipped.
	start, lastMissed := len(rows), -1
	window := time.Duration(t.misfireWindowMs()) * time.Millisecond
	for _, f := range fires {
		// A fire's planned start is computed once (a jittered task's costs
		// a Next of its schedule): the row carries it, and overdue counts
		// from it.
		planned := t.plannedStart(p.opts.App, f.at)
		switch {
		case t.excluded(f.at):
			rows = append(rows, skip(f.at, planned, store.ReasonExcluded))
		case now.Sub(time.UnixMilli(max(planned, f.at.UnixMilli()))) > misfireAfter:
			// Overdue counts from the planned start: a jittered fire is
			// not late before it (WithJitter).
			if t.def().Misfire == MisfireRunAll && now.Sub(f.at) <= window {
				rows = append(rows, row(f.at, planned, store.StatusScheduled, store.SourceCatchup, ""))
				continue
			}
			lastMissed = len(rows)
			rows = append(rows, skip(f.at, planned, store.ReasonMisfire))
		default:
			rows = append(rows, row(f.at, planned, store.StatusScheduled, store.SourceSchedule, ""))
		}
	}
	if m := t.def().Misfire; lastMissed >= 0 && m != MisfireRunAll && m != MisfireSkip &&
		now.Sub(time.UnixMilli(rows[lastMissed].RunTime)) <= window {
		r := &rows[lastMissed] // MisfireRunOnce: the last missed fire runs
		*r = row(time.UnixMilli(r.RunTime), r.PlannedMs, store.StatusScheduled, store.SourceCatchup, "")
	}
	if t.def().MaxRuns > 0 {
		done, err := p.store.ScheduledRuns(ctx, p.opts.App, t.code)
		if err != nil {
			return nil, err
		}
		left := t.def().MaxRuns - done
		kept := rows[:start]
		for _, r := range rows[start:] {
			if r.Status == store.StatusSkipped {
				kept = append(kept, r)
			} else if left > 0 {
				kept = append(kept, r)
				left--
			}
		}
		rows = kept
	}
	if isSharded(t.def()) {
		rows = append(rows[:start], p.shardRows(t, rows[start:], now)...)
	}
	return rows, nil
}

// claimFires takes over scheduled fires nobody runs: manual runs and fires
// recorded by replicas without the handler (no owner), and fires whose
// owner died before starting them.
func (p *planner) claimFires(ctx context.Context, now time.Time) error {
	codes := p.view.claimCodes()
	p.mu.Lock()
	live := p.live
	p.mu.Unlock()
	// Unowned fires due in the next two seconds are claimed now and armed, so
	// they start on time, not at the next tick.
	claimed, err := p.store.ClaimFires(ctx, p.opts.App, p.opts.InstanceID, codes, p.view.runsHere, live,
		now.Add(2*time.Second).UnixMilli(), now.Add(-p.opts.ReplicaTimeout).UnixMilli(), claimBatch)
	for _, r := range claimed {
		p.log.Info("claimed a fire nobody was running", "task", r.TaskCode, "execution", r.ID, "run_time", time.UnixMilli(r.RunTime).UTC())
		p.fires.arm(r)
	}
	if err != nil {
		return err
	}
	return p.rearmOwned(ctx, now)
}

// ownedGrace is how long after its planned start a fire this replica owns
// may stay unstarted before rearmOwned arms it again: the dispatcher
// claims a fire within its claim lead of the planned start, or retries
// the claim a second after a database error, so a fire still unstarted
// this long after is one it no longer holds, or one that waits for a
// worker or for an earlier run of its task (which arm and fenceNow
// recognise). Well within misfireAfter, so that a fire armed again still
// runs rather than being skipped as missed.
const ownedGrace = 5 * time.Second

// ownedEvery is how often rearmOwned reads this replica's unstarted fires
// while no write is in doubt. Only a write that failed leaves a fire this
// replica owns and does not hold, so the read every tick is for the
// minutes after one; this read catches anything else, well within a
// misfire window, at a fraction of the cost: on a table whose statistics
// are older than its rows, the read is a scan of the whole table.
const ownedEvery = 15 * time.Second

// ownedDoubt is how long after a failed call to the database (noteDB) or
// a failed write of Trigger or Backfill (doubtOwned) rearmOwned reads
// every tick: until every fire such a write can have recorded, up to the
// end of a slot's minute (a take-over) and ownedGrace after, has been
// read.
const ownedDoubt = 2 * time.Minute

// doubtOwned notes that a write which would have made this replica the
// owner of fires failed outside the tick loop: it may have committed.
func (p *planner) doubtOwned() { p.writeFailedAt.Store(p.clock.Now().UnixNano()) }

// ownedReadDue reports whether rearmOwned reads at now: every tick within
// ownedDoubt of a failed call or write, every ownedEvery otherwise.
func (p *planner) ownedReadDue(now time.Time) bool {
	back, _ := p.health.lastOutage(now)
	if failed := time.Unix(0, p.writeFailedAt.Load()); failed.After(back) {
		back = failed
	}
	return now.Sub(back) < ownedDoubt || readDue(now, p.ownedReadAt, ownedEvery)
}

// readDue reports whether a read made every interval and due next at is
// due at now: at or after at, or before the last read (at less interval),
// the clock having gone back, so that a clock set back does not put the
// read off by as much.
func readDue(now, at time.Time, interval time.Duration) bool {
	return !now.Before(at) || now.Before(at.Add(-interval))
}

// rearmOwned arms again the fires this replica owns, has not started, and
// planned to start ownedGrace ago or more. Nothing else would ever run
// them: ClaimFires takes only fires nobody owns or whose owner is gone,
// and a slot's new owner takes over only another replica's fires. A fire
// gets there when a write that made this replica its owner (InsertFires,
// TakeOverFires, ClaimFires) committed but answered with an error (a
// connection cut by a database failover), so that the rows were never
// armed, and the write tried again found them there already; it would be
// left scheduled, unstarted, until this replica stopped. A fire the
// dispatcher still holds (armed, waiting for a worker or for an earlier
// run of its task, being claimed) is left where it is (armOwned); one it
// lets go of between the read and the arm (started, skipped) is claimed
// once (StartFires, SkipFire) and started once (dispatch). It reads every
// tick for ownedDoubt after a failed call or write, and every ownedEvery
// otherwise (ownedReadDue).
func (p *planner) rearmOwned(ctx context.Context, now time.Time) error {
	if !p.ownedReadDue(now) {
		return nil
	}
	rows, err := p.store.OwnedFires(ctx, p.opts.App, p.opts.InstanceID, now.Add(-ownedGrace).UnixMilli(), claimBatch)
	if err != nil {
		return err
	}
	p.ownedReadAt = now.Add(ownedEvery)
	// One line a round, naming the earliest: after a database outage a
	// replica may find thousands (a chunk of fires whose insert committed
	// as the connection dropped), and a line each drowned the log.
	var armed int
	var first store.Execution
	for _, r := range rows {
		if p.fires.armOwned(r) {
			if armed == 0 || r.RunTime < first.RunTime {
				first = r
			}
			armed++
		}
	}
	if armed > 0 {
		p.log.Warn("fires this replica owns were not armed here: armed again", "fires", armed, "task", first.TaskCode,
			"execution", first.ID, "run_time", time.UnixMilli(first.RunTime).UTC())
	}
	return nil
}

// pickRetries starts the retries that are due, of tasks this replica can
// run, whichever replica ran the failed attempt.
func (p *planner) pickRetries(ctx context.Context, now time.Time) error {
	due, err := p.store.DueRetries(ctx, p.opts.App, now.UnixMilli(), claimBatch)
	if err != nil {
		return err
	}
	for _, r := range due {
		if !p.view.runsHere(r.TaskCode) {
			continue
		}
		ok, err := p.store.StartAttempt(ctx, r.ID, r.Attempt+1, p.opts.InstanceID, now.UnixMilli())
		if err != nil {
			return err
		}
		if ok {
			r.Attempt++
			p.host.startAttempt(r, now)
		}
	}
	return nil
}

// rescueLost settles running executions whose replica stopped
// heart-beating, by their retry policy. The others could not heart-beat
// while the database was away either: right after an outage long enough
// that a live replica's last heartbeat, a heartbeat interval before it
// began, is older than ReplicaTimeout at its end, every live replica would
// look lost, its runs settled under it and retried beside them. So after
// an outage of ReplicaTimeout less two heartbeat intervals or more, it
// waits two intervals from the database's return (outageRescueWait); a
// shorter outage holds nothing back.
func (p *planner) rescueLost(ctx context.Context, now time.Time) error {
	wait := outageRescueWait * p.opts.HeartbeatInterval
	if back, length := p.health.lastOutage(now); length >= max(p.opts.ReplicaTimeout-wait, p.opts.HeartbeatInterval) && now.Sub(back) < wait {
		return nil
	}
	p.mu.Lock()
	live := p.alive // a replica refusing for its clock still runs what it started
	p.mu.Unlock()
	if len(live) == 0 {
		return nil // not even ourselves: our own heartbeat has not landed
	}
	var promoted []store.Execution
	if p.promoteDue(now, live) {
		var err error
		if promoted, err = p.store.PromoteLostStarts(ctx, p.opts.App, live, now.Add(-staleClaim).UnixMilli()); err != nil {
			return err // the replicas gone since promoteAlive still are at the next call
		}
		p.promoteAt = now.Add(promoteEvery)
	}
	p.promoteAlive = live
	lost, err := p.store.LostExecutions(ctx, p.opts.App, live, claimBatch)
	if err != nil {
		return err
	}
	lost = append(lost, promoted...) // LostExecutions may list them too: FinishAttempts settles each once
	if len(lost) == 0 {
		return nil
	}
	finishes := make([]store.Finish, len(lost))
	for i, r := range lost {
		reason := store.ReasonReplicaLost
		if r.CancelMs > 0 { // a later fire asked it to stop: it ends as it would have
			reason = store.ReasonCancelled
		}
		finishes[i] = p.host.settle(r, now, fmt.Errorf("replica %s lost while running attempt %d", r.Replica, r.Attempt), false, reason)
	}
	oks, err := p.store.FinishAttempts(ctx, finishes)
	for i, ok := range oks {
		if ok {
			p.metrics.rescue(1)
			p.metrics.fireEnded(lost[i].TaskCode, finishes[i].Status)
			p.alerts.settled(lost[i], finishes[i])
			p.pauses.failed(lost[i], finishes[i])
			p.log.Warn("execution rescued from a lost replica", "task", lost[i].TaskCode, "execution", lost[i].ID,
				"replica", lost[i].Replica, "status", finishes[i].Status)
		}
	}
	return err
}

// outageRescueWait is how many heartbeat intervals rescueLost waits after
// the database came back from a long outage.
const outageRescueWait = 2

// staleClaim is how old a claim (StartFires) of a replica still alive
// must be for PromoteLostStarts to take it for lost: its replica never
// learned that it committed, or it would have been marked running.
const staleClaim = time.Minute

// promoteEvery is how often rescueLost reads the lost starts while every
// replica alive at the last read still is. A start is lost when its
// replica died after the claim, which that replica's leaving the alive
// list tells (promoteDue reads at the first heartbeat after), or when
// the claim is staleClaim old, which this read finds within promoteEvery
// after. The read walks every scheduled row due within a few seconds, on
// every replica.
const promoteEvery = 30 * time.Second

// promoteDue reports whether rescueLost reads the lost starts at now,
// alive being the replicas that heart-beat: at its first call, when a
// replica alive at its last call is not any more, and every
// promoteEvery.
func (p *planner) promoteDue(now time.Time, alive []string) bool {
	if readDue(now, p.promoteAt, promoteEvery) {
		return true
	}
	for _, id := range p.promoteAlive {
		if !slices.Contains(alive, id) {
			return true
		}
	}
	return false
}

// recentRuns is how many of the app's last attempts seed the pool's mean
// run time at Start.
const recentRuns = 1000

// reseedEvery is how often a replica whose pool has run nothing reads the
// app's recent run times again (reseed).
const reseedEvery = 10 * time.Second

// reseed refreshes the pool's seed (seedRunTime) while the pool has run
// nothing of its own: a replica that joins a running fleet, or that owns
// no slot of the minute its fleet started in, runs its first fires at
// the next minute, and without a seed it claimed that minute's first
// instant one pool's worth at a time, the rest after a first handler had
// returned, late. Only the tick loop calls it.
func (p *planner) reseed(ctx context.Context, now time.Time) {
	if now.Before(p.reseedAt) || p.pool.Measured() {
		return
	}
	if err := p.seedRunTime(ctx); err != nil {
		p.log.Debug("recent run times not read; next tick tries again", "err", err)
	}
}

// seedRunTime gives the worker pool the mean run time of the app's last
// attempts (recentRuns), so that a replica that has not run a handler
// since it started claims a burst of quick fires ahead in one round, as
// one that has would, instead of a pool's worth (fenceRoom): a fleet
// deployed in the afternoon whose 10,000 tasks all fire at midnight. The
// rows' durations are whole milliseconds: under one counts as one, an
// upper bound. An app with no attempts yet keeps the pool's worth.
func (p *planner) seedRunTime(ctx context.Context) error {
	p.reseedAt = p.clock.Now().Add(reseedEvery)
	mean, n, err := p.store.RecentRunTime(ctx, p.opts.App, recentRuns)
	if err != nil || n == 0 {
		return err
	}
	p.pool.Seed(max(mean, time.Millisecond))
	return nil
}
