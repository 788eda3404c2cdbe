package engine

import (
	"context"
	"errors"
	"fmt"
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
