package engine

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/xtimer-go/xtimer/internal/startstop"
)

// lockKeeper is the slot-lock keeper. It holds the slot locks this replica
// won (the planner obtains them through it) and its liveness lock
// (keepSelf), refreshes them all every lockRefreshEvery in one call of the
// Locker (refreshAll: one round trip with the Redis locker) until their
// slot's minute is over, and gives up a lock it cannot refresh (it expired
// while the process was frozen, or Redis lost it): another replica may
// then take the slot over, and StartFires keeps this one from starting
// what is no longer its own. The planner learns of the slots lost from
// takeLost, at its next tick, and plans them again.
//
// A replica whose database has not answered for dbCutAfter lets every
// lock go (letGo): it cannot record, start or take over a fire, and the
// slots it held would otherwise stay its own while their fires became
// misfires. It claims again once the database answers. Whether the
// database answers, it learns from every call the engine notes (noteDB)
// and from a probe of its own, one round trip every lockRefreshEvery
// (probe): a call that hangs anywhere in the engine, in the tick or the
// dispatcher, leaves no failure to note until its timeout, but the probe
// goes unanswered too.
//
// It owns held, lost, self, cut and probeOut (mu), and runs one loop and
// the probe.
type lockKeeper struct {
	startstop.Base
	locker  Locker
	clock   Clock
	log     *slog.Logger
	metrics *metrics
	health  *healthState // the database's outage (dbDownFor)
	app     string
	replica string // this replica's ID, whose liveness lock it holds (shard.go)
	// ping is the probe's round trip (store.Ping); nil on SQLite, a file
	// that no link cuts off. noteDB notes its answer (health.go).
	ping   func(context.Context) error
	noteDB func(error)
	// noteRedis notes whether the lock backend answered the keeper's
	// refresh (health.go): the one call to it every lockRefreshEvery,
	// whatever the planner claims.
	noteRedis func(error)
	probes    sync.WaitGroup // the probe's goroutine, waited for at Stop

	mu   sync.Mutex
	held map[slotKey]Lock
	lost map[slotKey]time.Time // given up since the last takeLost, and when
	self Lock                  // the liveness lock (keepSelf); nil while not held
	cut  bool                  // its locks let go for a database outage (letGo)
	// probeOut is closed when the probe out now answers; nil while none
	// is out (probe).
	probeOut chan struct{}
}

// dbCutAfter: a replica whose database has failed every call, or left
// the probe unanswered while answering nothing else (a link that drops
// every packet), for longer lets its locks go (lockKeeper.letGo).
const dbCutAfter = time.Second

// errDatabaseCut is obtain's answer while the keeper has let its locks go
// for a database outage: the slot is left to the replicas that reach it.
var errDatabaseCut = errors.New("xtimer: database unreachable: slot locks let go")

// The probe (lockKeeper.probe) waits up to probeWait, in real time, for
// its answer, so that a database that answers is seen answering before
// the keeper's next round (a test moving a fake clock sees the answer
// before it moves the clock on). It gives up on a round trip after
// probeTimeout: a failure from when it went out.
const (
	probeWait    = 250 * time.Millisecond
	probeTimeout = 5 * time.Second
)

func newLockKeeper(s *Engine) *lockKeeper {
	k := &lockKeeper{locker: s.locker, clock: s.clock, log: s.log, metrics: s.metrics, health: &s.health, app: s.opts.App,
		replica: s.opts.InstanceID, noteDB: s.noteDB, noteRedis: s.noteRedis, held: map[slotKey]Lock{}, lost: map[slotKey]time.Time{}}
	if s.store.Networked() {
		k.ping = s.store.Ping
	}
	return k
}

func (k *lockKeeper) start() error {
	k.keepSelf(context.Background(), nil, nil)
	return k.Base.Start(context.Background(), startstop.Every(k.clock, lockRefreshEvery, k.keep))
}

// Stop stops the keeper's loop and waits for its probe.
func (k *lockKeeper) Stop() {
	k.Base.Stop()
	k.probes.Wait()
}

// probe sends the database one round trip, unless one is out already,
// and waits up to probeWait for it to answer. While it is out, the
// database counts as not answering from when it went out, unless another
// call answers meanwhile (healthState.dbDownFor); a probe that fails, or
// that probeTimeout ends, is a failure from when it went out until an
// answer.
func (k *lockKeeper) probe(ctx context.Context, now time.Time) {
	if k.ping == nil {
		return
	}
	k.mu.Lock()
	out := k.probeOut
	if out == nil {
		out = make(chan struct{})
		k.probeOut = out
		k.health.probeSince.Store(now.UnixNano())
		k.probes.Add(1)
		go k.roundTrip(ctx, now, out)
	}
	k.mu.Unlock()
	wait := time.NewTimer(probeWait)
	defer wait.Stop()
	select {
	case <-out:
	case <-wait.C:
	case <-ctx.Done():
	}
}

// roundTrip is the probe sent at sent: it notes the answer, or the
// failure from sent, and then closes out.
func (k *lockKeeper) roundTrip(ctx context.Context, sent time.Time, out chan struct{}) {
	defer k.probes.Done()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	err := k.ping(pctx)
	cancel()
	if ctx.Err() == nil {
		if err != nil {
			k.health.dbDownSince.CompareAndSwap(0, sent.UnixNano())
		}
		k.noteDB(err)
	}
	k.health.probeSince.Store(0)
	k.mu.Lock()
	k.probeOut = nil
	k.mu.Unlock()
	close(out)
}

// appKey is the key name of one of the app's locks: "xtimer:{app}:"
// and rest. The hash tag "{app}" places every lock of an app on one Redis
// Cluster slot, so that one script refreshes them all (RefreshAll).
func (k *lockKeeper) appKey(rest string) string { return "xtimer:{" + k.app + "}:" + rest }

func (k *lockKeeper) lockKey(s slotKey) string {
	return k.appKey("slot:" + strconv.FormatInt(s.minute, 10) + ":" + strconv.Itoa(s.bucket))
}

// obtain takes the slot's lock for slotLockTTL and keeps it. Its errors
// are the Locker's (ErrLockHeld when another replica holds it, with how
// long its lock has left when the Locker tells: obtainOrTTL), and
// errDatabaseCut while the keeper has let its locks go. A slot peek
// found free (free) is asked for at once, without ObtainOrTTL's look at
// its holder first; taken in between, it is ErrLockHeld with left
// unknown (zero).
func (k *lockKeeper) obtain(ctx context.Context, s slotKey, free bool) (left time.Duration, err error) {
	if k.cutOff(k.clock.Now()) {
		return 0, errDatabaseCut
	}
	var lock Lock
	if free {
		lock, err = k.locker.Obtain(ctx, k.lockKey(s), slotLockTTL)
	} else {
		lock, left, err = obtainOrTTL(ctx, k.locker, k.lockKey(s), slotLockTTL)
	}
	if err != nil {
		return left, err
	}
	k.mu.Lock()
	k.held[s] = lock
	delete(k.lost, s)
	k.mu.Unlock()
	return 0, nil
}

// peek asks, in one round trip, how long the holders of slots have left,
// when the Locker can tell (lockPeeker): heldFor's answer for each slot,
// lockFree when nobody holds it. It answers nothing (nil) when the Locker
// cannot tell or the keeper has let its locks go: each slot is then
// claimed on its own (obtain). A backend that does not answer is its
// error (ErrLockUnavailable), which the planner takes as a claim's.
func (k *lockKeeper) peek(ctx context.Context, slots []slotKey) (map[slotKey]time.Duration, error) {
	p, ok := k.locker.(lockPeeker)
	if !ok || len(slots) == 0 || k.cutOff(k.clock.Now()) {
		return nil, nil
	}
	keys := make([]string, len(slots))
	for i, s := range slots {
		keys[i] = k.lockKey(s)
	}
	left, err := p.heldFor(ctx, keys)
	if err != nil {
		return nil, err
	}
	if len(left) != len(slots) {
		return nil, nil
	}
	out := make(map[slotKey]time.Duration, len(slots))
	for i, s := range slots {
		out[s] = left[i]
	}
	return out, nil
}

// holds reports whether this replica holds the slot's lock.
func (k *lockKeeper) holds(s slotKey) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.held[s]
	return ok
}

// heldKeys lists the slots whose locks this replica holds, oldest first.
func (k *lockKeeper) heldKeys() []slotKey {
	k.mu.Lock()
	keys := slices.Collect(maps.Keys(k.held))
	k.mu.Unlock()
	slices.SortFunc(keys, func(a, b slotKey) int {
		return cmp.Or(cmp.Compare(a.minute, b.minute), cmp.Compare(a.bucket, b.bucket))
	})
	return keys
}

// takeLost returns the slots whose locks were given up since the last
// call, with when, and forgets them.
func (k *lockKeeper) takeLost() map[slotKey]time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.lost) == 0 {
		return nil
	}
	lost := k.lost
	k.lost = map[slotKey]time.Time{}
	return lost
}

// keep refreshes every lock held, the liveness lock with the slot locks,
// in one call (refreshAll), and releases those of minutes over; while the
// database is cut off, it lets them all go instead (letGo).
func (k *lockKeeper) keep(ctx context.Context, now time.Time) {
	k.probe(ctx, now)
	now = k.clock.Now() // after the probe's wait
	if k.cutOff(now) {
		k.letGo(ctx, now)
		return
	}
	cur := now.Unix() / 60
	k.mu.Lock()
	held, self, wasCut := maps.Clone(k.held), k.self, k.cut
	k.cut = false
	k.mu.Unlock()
	if wasCut {
		k.log.Info("database answers again: slots are claimed again")
	}
	keys := make([]slotKey, 0, len(held))
	locks := make([]Lock, 0, len(held)+1)
	for s, lock := range held {
		if s.minute < cur-1 {
			_ = lock.Release(ctx)
			k.drop(s, lock, time.Time{})
			continue
		}
		keys, locks = append(keys, s), append(locks, lock)
	}
	ttl := k.refreshTTL(now)
	if self != nil && ttl == slotLockTTL {
		locks = append(locks, self)
	}
	var errs []error
	if len(locks) > 0 {
		errs = refreshAll(ctx, k.locker, locks, ttl)
	}
	if self != nil && ttl != slotLockTTL {
		// The liveness lock keeps its TTL: shortened, a slow database
		// would make the others deal this replica's shards away and back
		// (shard.go). letGo releases it with the rest.
		errs = append(errs, refreshAll(ctx, k.locker, []Lock{self}, slotLockTTL)...)
	}
	if len(errs) > 0 {
		k.noteAnswer(ctx, errs...)
	}
	for i, s := range keys {
		err := errs[i]
		if err == nil {
			k.metrics.slotClaim(claimRefreshed)
		}
		if err == nil || errors.Is(err, ErrLockUnavailable) {
			continue // unavailable: the database's unique key guards meanwhile
		}
		k.metrics.slotClaim(claimLostWhileHeld)
		k.log.Info("slot lock lost; another replica may take the slot over", "minute", time.Unix(s.minute*60, 0).UTC(),
			"bucket", s.bucket, "err", err)
		k.drop(s, held[s], now)
	}
	var selfErr error
	if self != nil {
		selfErr = errs[len(keys)]
	}
	k.keepSelf(ctx, self, selfErr)
}

// noteAnswer notes the lock backend down if it left one of errs
// unanswered (ErrLockUnavailable), up otherwise: a lock found lost was
// an answer. A call cut short by Stop says nothing of the backend.
func (k *lockKeeper) noteAnswer(ctx context.Context, errs ...error) {
	if ctx.Err() != nil {
		return
	}
	for _, err := range errs {
		if errors.Is(err, ErrLockUnavailable) {
			k.noteRedis(err)
			return
		}
	}
	k.noteRedis(nil)
}

// refreshTTL is the TTL the slot locks are refreshed to at now:
// slotLockTTL while the database answers. While it has not answered (dbDownFor), only
// until the instant letGo would release them, dbCutAfter into the outage
// (minDoubtTTL at least, a TTL being positive): a replica watching one of
// them looks again when it runs out (claimSlot's recheck), so it takes the
// slot over then, rather than up to a full TTL after the release, which
// it does not see.
func (k *lockKeeper) refreshTTL(now time.Time) time.Duration {
	if down := k.health.dbDownFor(now); down > 0 {
		return min(slotLockTTL, max(dbCutAfter-down, minDoubtTTL))
	}
	return slotLockTTL
}

// minDoubtTTL is refreshTTL's least TTL.
const minDoubtTTL = 50 * time.Millisecond

// cutOff reports whether the database has failed every call noted, or
// left the probe unanswered, for longer than dbCutAfter
// (healthState.dbDownFor).
func (k *lockKeeper) cutOff(now time.Time) bool {
	return k.health.dbDownFor(now) > dbCutAfter
}

// letGo releases every lock held, the liveness lock too, for a database
// outage, and reports the slots lost at now: the replicas that reach the
// database take them over within the failover gap, where this one could
// only let their fires become misfires. It logs once per outage.
func (k *lockKeeper) letGo(ctx context.Context, now time.Time) {
	k.mu.Lock()
	held, self, wasCut := k.held, k.self, k.cut
	k.held, k.self, k.cut = map[slotKey]Lock{}, nil, true
	for s := range held {
		k.lost[s] = now
	}
	k.mu.Unlock()
	if !wasCut {
		k.log.Warn("database unreachable: slot locks and the liveness lock released for the other replicas to take over",
			"slots", len(held), "after", dbCutAfter)
	}
	for _, lock := range held {
		_ = lock.Release(ctx)
		k.metrics.slotClaim(claimLostWhileHeld)
	}
	if self != nil {
		_ = self.Release(ctx)
	}
}

// drop forgets a lock, if it is still the one held for the slot, and
// reports the slot lost at lostAt unless that is zero.
func (k *lockKeeper) drop(s slotKey, lock Lock, lostAt time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[s] != lock {
		return
	}
	delete(k.held, s)
	if !lostAt.IsZero() {
		k.lost[s] = lostAt
	}
}

// releaseAll releases every lock held, at Stop.
func (k *lockKeeper) releaseAll(ctx context.Context) {
	k.mu.Lock()
	held, self := k.held, k.self
	k.held, k.self = map[slotKey]Lock{}, nil
	k.mu.Unlock()
	for _, l := range held {
		_ = l.Release(ctx)
	}
	if self != nil {
		_ = self.Release(ctx)
	}
}
