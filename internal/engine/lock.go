package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// This file holds the two lockers xtimer ships, the Redis one and the
// in-process one; the root's NewRedisLocker and NewLocalLocker return them
// and document their contracts (lock.go there).

// ErrLockLost is the root's ErrLockLost: the lock expired or was taken over.
var ErrLockLost = errors.New("xtimer: lock lost: expired or taken over")

// LockRefresher is the root's LockRefresher: a Locker that refreshes many
// of its locks in one round trip. The lock keeper refreshes every lock it
// holds with it each round; a Locker without it gets one Refresh per lock
// (refreshAll).
type LockRefresher interface {
	RefreshAll(ctx context.Context, locks []Lock, ttl time.Duration) []error
}

// LockProber is the root's LockProber: a Locker whose Obtain of a held key
// also says how long the holder's lock has left, so that the planner looks
// again when it runs out rather than at its next tick (claimSlot).
type LockProber interface {
	ObtainOrTTL(ctx context.Context, key string, ttl time.Duration) (lock Lock, left time.Duration, err error)
}

// lockPeeker is a Locker that tells in one round trip, for many keys,
// whether each is held and how long its holder's lock has left: the
// planner looks with it at every slot of a round that other replicas
// hold (lockKeeper.peek), where ObtainOrTTL costs a round trip each.
// Both lockers xtimer ships have it; the answers are heldFor's.
type lockPeeker interface {
	heldFor(ctx context.Context, keys []string) ([]time.Duration, error)
}

// What heldFor answers for a key: how long its holder's lock has left
// (more than zero), or one of these.
const (
	lockFree        time.Duration = -1 // nobody holds the key
	lockHeldUnknown time.Duration = 0  // held, for how long nobody can tell
)

// refreshAll refreshes locks to ttl through locker's RefreshAll, if it has
// one, or one Refresh per lock, and returns one error per lock.
func refreshAll(ctx context.Context, locker Locker, locks []Lock, ttl time.Duration) []error {
	if r, ok := locker.(LockRefresher); ok {
		if errs := r.RefreshAll(ctx, locks, ttl); len(errs) == len(locks) {
			return errs
		}
		// A custom Locker that answered out of contract: each on its own.
	}
	errs := make([]error, len(locks))
	for i, l := range locks {
		errs[i] = l.Refresh(ctx, ttl)
	}
	return errs
}

// obtainOrTTL obtains key through locker's ObtainOrTTL, if it has one, or
// its Obtain; left is zero when the Locker does not tell.
func obtainOrTTL(ctx context.Context, locker Locker, key string, ttl time.Duration) (Lock, time.Duration, error) {
	if p, ok := locker.(LockProber); ok {
		return p.ObtainOrTTL(ctx, key, ttl)
	}
	lock, err := locker.Obtain(ctx, key, ttl)
	return lock, 0, err
}

// lockUnavailableError reports a lock operation the backend did not answer.
type lockUnavailableError struct {
	op, key string
	err     error
}

func (e *lockUnavailableError) Error() string {
	return fmt.Sprintf("xtimer: lock backend unavailable: %s %q: %v", e.op, e.key, e.err)
}

func (e *lockUnavailableError) Unwrap() error { return e.err }

func (e *lockUnavailableError) Is(target error) bool { return target == ErrLockUnavailable }

func unavailable(op, key string, err error) error {
	return &lockUnavailableError{op: op, key: key, err: err}
}

func validateLock(key string, ttl time.Duration) error {
	if key == "" {
		return errors.New("xtimer: lock key is empty")
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("xtimer: lock %q: ttl must be at least 1ms, got %v", key, ttl)
	}
	return nil
}

// redisCallTimeout bounds each Redis call of the Redis Locker, on top of the
// caller's ctx: the tick loop wakes every second, and an answer later than
// that is no better than none.
const redisCallTimeout = time.Second

// NewRedisLocker is the root's NewRedisLocker (documented there).
func NewRedisLocker(client redis.UniversalClient) Locker {
	if client == nil {
		panic("xtimer: NewRedisLocker: nil Redis client")
	}
	return &redisLocker{rdb: client, client: redislock.New(client)}
}

type redisLocker struct {
	rdb    redis.UniversalClient
	client *redislock.Client
}

func (l *redisLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (Lock, error) {
	if err := validateLock(key, ttl); err != nil {
		return nil, err
	}
	var lk *redislock.Lock
	err := redisCall(ctx, func(ctx context.Context) (err error) {
		lk, err = l.client.Obtain(ctx, key, ttl, &redislock.Options{RetryStrategy: redislock.NoRetry()})
		return err
	})
	switch {
	case err == nil:
		return &redisLock{lock: lk}, nil
	case errors.Is(err, redislock.ErrNotObtained):
		return nil, ErrLockHeld
	default:
		return nil, unavailable("obtain", key, err)
	}
}

// ObtainOrTTL asks the key's PTTL first: a held key (what the planner
// mostly finds when it looks again at another replica's slot) costs that
// one command, where a script that tried SET NX first would cost three
// (EVALSHA, SET, PTTL: INFO commandstats counts the script's calls). A
// free key is then obtained as Obtain does; one taken in between reports
// ErrLockHeld with left zero (unknown).
func (l *redisLocker) ObtainOrTTL(ctx context.Context, key string, ttl time.Duration) (Lock, time.Duration, error) {
	if err := validateLock(key, ttl); err != nil {
		return nil, 0, err
	}
	var pttl time.Duration
	err := redisCall(ctx, func(ctx context.Context) (err error) {
		pttl, err = l.rdb.PTTL(ctx, key).Result()
		return err
	})
	if err != nil {
		return nil, 0, unavailable("obtain", key, err)
	}
	if left := holdLeft(pttl); left != lockFree {
		return nil, left, ErrLockHeld
	}
	lock, err := l.Obtain(ctx, key, ttl)
	return lock, 0, err
}

// heldFor asks every key's PTTL in one pipeline, the command ObtainOrTTL
// asks first. Keys of one hash tag (every key of an app) stay one round
// trip on Redis Cluster.
func (l *redisLocker) heldFor(ctx context.Context, keys []string) ([]time.Duration, error) {
	cmds := make([]*redis.DurationCmd, len(keys))
	err := redisCall(ctx, func(ctx context.Context) error {
		_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, key := range keys {
				cmds[i] = p.PTTL(ctx, key)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, unavailable("pttl", strings.Join(keys, " "), err)
	}
	out := make([]time.Duration, len(keys))
	for i, c := range cmds {
		out[i] = holdLeft(c.Val())
	}
	return out, nil
}

// holdLeft is what a key's PTTL, as go-redis reports it, says of its
// holder: how long its lock has left (a millisecond at least: 0 means
// under one), lockFree for "no such key" (-2 ns), lockHeldUnknown for
// "no expiry" (-1 ns), a key held for as long as nobody can tell.
func holdLeft(pttl time.Duration) time.Duration {
	switch {
	case pttl >= 0:
		return max(pttl, time.Millisecond)
	case pttl == -2*time.Nanosecond:
		return lockFree
	default:
		return lockHeldUnknown
	}
}

// luaRefreshAll extends each key of KEYS whose value is its lock's
// (ARGV[i+1], bsm/redislock's token and metadata, as its own refresh
// script compares) to ARGV[1] milliseconds, and answers 1 for those, 0 for
// the others (expired, or another holder's). Its keys must hash to one
// cluster slot: RefreshAll groups them by hash tag.
var luaRefreshAll = redis.NewScript(`
local out = {}
for i, key in ipairs(KEYS) do
	if redis.call("get", key) == ARGV[i + 1] then
		out[i] = redis.call("pexpire", key, ARGV[1])
	else
		out[i] = 0
	end
end
return out`)

// RefreshAll refreshes the locks whose keys share a hash tag (every key of
// an app: "xtimer:{app}:...") with one script per tag, valid on Redis
// Cluster; any other lock, or one this Locker did not obtain, with its own
// Refresh.
func (l *redisLocker) RefreshAll(ctx context.Context, locks []Lock, ttl time.Duration) []error {
	errs := make([]error, len(locks))
	groups := map[string][]int{} // hash tag → indexes into locks
	var tags []string
	for i, lk := range locks {
		if err := validateLock(lk.Key(), ttl); err != nil {
			errs[i] = err
			continue
		}
		_, ok := lk.(*redisLock)
		tag := hashTag(lk.Key())
		if !ok || tag == "" {
			errs[i] = lk.Refresh(ctx, ttl)
			continue
		}
		if groups[tag] == nil {
			tags = append(tags, tag)
		}
		groups[tag] = append(groups[tag], i)
	}
	for _, tag := range tags {
		idx := groups[tag]
		keys := make([]string, len(idx))
		args := make([]any, 1+len(idx))
		args[0] = strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)
		for j, i := range idx {
			rl := locks[i].(*redisLock).lock
			keys[j], args[1+j] = rl.Key(), rl.Token()+rl.Metadata()
		}
		var res []int64
		err := redisCall(ctx, func(ctx context.Context) (err error) {
			res, err = luaRefreshAll.Run(ctx, l.rdb, keys, args...).Int64Slice()
			return err
		})
		for j, i := range idx {
			switch {
			case err != nil:
				errs[i] = unavailable("refresh", keys[j], err)
			case j < len(res) && res[j] == 1:
				errs[i] = nil
			default:
				errs[i] = ErrLockLost
			}
		}
	}
	return errs
}

// hashTag is the part of key Redis Cluster hashes to place it: the text
// between its first "{" and the first "}" after it, if not empty; "" when
// the whole key is hashed.
func hashTag(key string) string {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return ""
	}
	tag, _, ok := strings.Cut(rest, "}")
	if !ok {
		return ""
	}
	return tag
}

// redisCall runs call and waits for it at most until ctx ends or
// redisCallTimeout passes. An answer that is ready wins over the deadline.
func redisCall(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1) // buffered: an abandoned call never blocks
	go func() { done <- call(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return ctx.Err()
		}
	}
}

type redisLock struct {
	lock *redislock.Lock
}

func (l *redisLock) Key() string { return l.lock.Key() }

func (l *redisLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := validateLock(l.Key(), ttl); err != nil {
		return err
	}
	switch err := redisCall(ctx, func(ctx context.Context) error { return l.lock.Refresh(ctx, ttl, nil) }); {
	case err == nil:
		return nil
	case errors.Is(err, redislock.ErrNotObtained):
		return ErrLockLost
	default:
		return unavailable("refresh", l.Key(), err)
	}
}

func (l *redisLock) Release(ctx context.Context) error {
	switch err := redisCall(ctx, l.lock.Release); {
	case err == nil:
		return nil
	case errors.Is(err, redislock.ErrLockNotHeld):
		return ErrLockLost
	default:
		return unavailable("release", l.Key(), err)
	}
}

// NewLocalLocker is the root's NewLocalLocker (documented there).
func NewLocalLocker(clock Clock) Locker {
	if clock == nil {
		clock = SystemClock{}
	}
	return &localLocker{clock: clock, held: make(map[string]localHold), sweepAt: minSweep}
}

// minSweep is the number of keys below which the local locker does not bother
// to drop expired keys that nobody asked for again.
const minSweep = 64

type localLocker struct {
	clock   Clock
	mu      sync.Mutex
	held    map[string]localHold
	sweepAt int    // sweep expired keys when len(held) reaches it
	tokens  uint64 // the last token handed out; tokens are never reused
}

type localHold struct {
	token   uint64
	expires time.Time
}

func (l *localLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (Lock, error) {
	if err := validateLock(key, ttl); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, unavailable("obtain", key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if h, ok := l.held[key]; ok && now.Before(h.expires) {
		return nil, ErrLockHeld
	}
	l.tokens++
	token := l.tokens
	l.held[key] = localHold{token: token, expires: now.Add(ttl)}
	l.sweep(now)
	return &localLock{locker: l, key: key, token: token}, nil
}

// sweep drops expired keys once the map has doubled since the last sweep:
// slot keys are new every minute, and a holder that never releases (a
// crashed owner) must not make the map grow forever. l.mu is held.
func (l *localLocker) sweep(now time.Time) {
	if len(l.held) < l.sweepAt {
		return
	}
	for k, h := range l.held {
		if !now.Before(h.expires) {
			delete(l.held, k)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.held))
}

// holds reports whether token holds key at now, and drops the key if it
// expired. l.mu is held.
func (l *localLocker) holds(key string, token uint64, now time.Time) bool {
	h, ok := l.held[key]
	if ok && !now.Before(h.expires) {
		delete(l.held, key)
		return false
	}
	return ok && h.token == token
}

type localLock struct {
	locker *localLocker
	key    string
	token  uint64
}

// ObtainOrTTL is Obtain, which also says, when the key is held, how long
// its holder's lock has left.
func (l *localLocker) ObtainOrTTL(ctx context.Context, key string, ttl time.Duration) (Lock, time.Duration, error) {
	lock, err := l.Obtain(ctx, key, ttl)
	if !errors.Is(err, ErrLockHeld) {
		return lock, 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if h, ok := l.held[key]; ok && now.Before(h.expires) {
		return nil, h.expires.Sub(now), ErrLockHeld
	}
	return nil, 0, ErrLockHeld // released in between: looked at again at once
}

// heldFor tells, for each key, how long its holder's lock has left.
func (l *localLocker) heldFor(ctx context.Context, keys []string) ([]time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, unavailable("pttl", strings.Join(keys, " "), err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	out := make([]time.Duration, len(keys))
	for i, key := range keys {
		out[i] = lockFree
		if h, ok := l.held[key]; ok && now.Before(h.expires) {
			out[i] = h.expires.Sub(now)
		}
	}
	return out, nil
}

// RefreshAll refreshes each lock as its Refresh does, under one hold of
// the locker's mutex; a lock of another Locker refreshes itself (it never
// takes this one's mutex).
func (l *localLocker) RefreshAll(ctx context.Context, locks []Lock, ttl time.Duration) []error {
	errs := make([]error, len(locks))
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for i, lk := range locks {
		ll, ok := lk.(*localLock)
		switch {
		case !ok || ll.locker != l:
			errs[i] = lk.Refresh(ctx, ttl)
		case validateLock(ll.key, ttl) != nil:
			errs[i] = validateLock(ll.key, ttl)
		case ctx.Err() != nil:
			errs[i] = unavailable("refresh", ll.key, ctx.Err())
		case !l.holds(ll.key, ll.token, now):
			errs[i] = ErrLockLost
		default:
			l.held[ll.key] = localHold{token: ll.token, expires: now.Add(ttl)}
		}
	}
	return errs
}

func (l *localLock) Key() string { return l.key }

func (l *localLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := validateLock(l.key, ttl); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return unavailable("refresh", l.key, err)
	}
	l.locker.mu.Lock()
	defer l.locker.mu.Unlock()
	now := l.locker.clock.Now()
	if !l.locker.holds(l.key, l.token, now) {
		return ErrLockLost
	}
	l.locker.held[l.key] = localHold{token: l.token, expires: now.Add(ttl)}
	return nil
}

func (l *localLock) Release(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return unavailable("release", l.key, err)
	}
	l.locker.mu.Lock()
	defer l.locker.mu.Unlock()
	if !l.locker.holds(l.key, l.token, l.locker.clock.Now()) {
		return ErrLockLost
	}
	delete(l.locker.held, l.key)
	return nil
}

var (
	_ LockRefresher = (*redisLocker)(nil)
	_ LockProber    = (*redisLocker)(nil)
	_ LockRefresher = (*localLocker)(nil)
	_ LockProber    = (*localLocker)(nil)
	_ lockPeeker    = (*redisLocker)(nil)
	_ lockPeeker    = (*localLocker)(nil)
)
