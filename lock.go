package xtimer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// Locker claims keys for a while: the scheduler claims each slot with it
// before recording the slot's fires. NewRedisLocker serves a fleet,
// NewLocalLocker a single process.
//
// Obtain never waits for a held key: a replica that does not get a slot does
// nothing for it. Its error is one of:
//
//   - nil: the caller holds the key for ttl, until it refreshes or releases;
//   - ErrLockHeld (returned as is): another holder has the key, a normal outcome;
//   - an error matching ErrLockUnavailable: the backend gave no answer (down,
//     too slow, or ctx ended); the cause is wrapped too. The scheduler then
//     falls back to the database unique key. The key may still have been set
//     if the answer was lost; it expires after ttl;
//   - anything else: a programmer error (empty key, ttl under a millisecond).
//
// Keys and ttls are the caller's; a Locker never retries and never renews
// on its own.
type Locker interface {
	// Obtain claims key for ttl, with the outcomes listed above.
	Obtain(ctx context.Context, key string, ttl time.Duration) (Lock, error)
}

// Lock is a key held through a Locker. It stays held until its ttl runs out,
// unless refreshed; a holder that let it expire has lost it even if nobody
// else took the key since.
type Lock interface {
	// Key returns the key that was obtained.
	Key() string
	// Refresh extends the lock to ttl from now. It returns ErrLockLost if the
	// lock expired or another holder has the key, and an ErrLockUnavailable
	// error if the backend gave no answer.
	Refresh(ctx context.Context, ttl time.Duration) error
	// Release gives the key up. It returns ErrLockLost if the lock had
	// expired or was taken over (the other holder's key is left alone), and
	// an ErrLockUnavailable error if the backend gave no answer.
	Release(ctx context.Context) error
}

var (
	// ErrLockHeld is returned by Locker.Obtain when another holder has the key.
	ErrLockHeld = errors.New("xtimer: lock held by another owner")
	// ErrLockLost is returned by Lock.Refresh and Lock.Release when the lock
	// expired or was taken over by another holder.
	ErrLockLost = errors.New("xtimer: lock lost: expired or taken over")
	// ErrLockUnavailable is matched (errors.Is) by every error of a Locker or
	// Lock that means the backend did not answer. Such errors also wrap
	// their cause (a network error, context.DeadlineExceeded...).
	ErrLockUnavailable = errors.New("xtimer: lock backend unavailable")
)

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

// NewRedisLocker returns a Locker for a fleet of replicas sharing one Redis
// (standalone, Sentinel or Cluster), built on github.com/bsm/redislock: a key
// is SET NX PX with a random token, refreshed and released by Lua scripts
// that check the token, so a stale holder never touches another's key.
// Expiry runs on the Redis server's clock, not on Options.Clock.
//
// Each call waits at most until ctx ends or one second (redisCallTimeout)
// has passed, whichever comes first, and then reports ErrLockUnavailable.
// The bound holds whatever the client's options: go-redis ignores ctx for
// socket I/O unless ContextTimeoutEnabled is set, so a call that overstays is
// left to finish in the background within the client's own timeouts (a key
// it sets then expires after its ttl). It panics if client is nil.
func NewRedisLocker(client redis.UniversalClient) Locker {
	if client == nil {
		panic("xtimer: NewRedisLocker: nil Redis client")
	}
	return &redisLocker{client: redislock.New(client)}
}

type redisLocker struct {
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

// NewLocalLocker returns a Locker for a single process: keys live in this
// process's memory, so two processes each using one do not exclude each other
// (the scheduler says so in its start-up log). Expiry follows clock, so tests
// drive it with a fake clock; a nil clock means SystemClock. Each Obtain gets
// a fresh token, so a holder whose lock expired cannot refresh or release the
// key of the next holder. The calls answer at once; one whose ctx has already
// ended returns an ErrLockUnavailable error, as the Redis Locker would.
func NewLocalLocker(clock Clock) Locker {
	if clock == nil {
		clock = SystemClock()
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
