package xtimer

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xtimer-go/xtimer/internal/engine"
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
type Lock = interface {
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

// LockRefresher is an optional interface of a Locker: one that refreshes
// many of its locks in one round trip. The scheduler holds every slot lock
// of the coming minutes and its replica's liveness lock with a short TTL,
// and refreshes them all every round with RefreshAll when its Locker has
// it, with one Refresh per lock otherwise. NewRedisLocker's and
// NewLocalLocker's have it.
type LockRefresher interface {
	// RefreshAll extends each of locks, obtained from this Locker, to ttl
	// from now, and returns one error per lock, in order, as its Refresh
	// would: nil, ErrLockLost (expired or taken over: never extended), or
	// an ErrLockUnavailable error.
	RefreshAll(ctx context.Context, locks []Lock, ttl time.Duration) []error
}

// LockProber is an optional interface of a Locker: one that tells, when a
// key is held, how long its holder's lock has left, in the same round
// trip. A scheduler that finds a slot held looks at it again when that
// lock runs out, so that a dead owner's slot is taken over within moments
// of its lock's expiry; without it, at its next tick (a second later).
// NewRedisLocker's and NewLocalLocker's have it.
type LockProber interface {
	// ObtainOrTTL is Obtain, which also returns, with ErrLockHeld, how long
	// the holder's lock has left: at least a millisecond, or zero when the
	// backend cannot tell (a key without expiry).
	ObtainOrTTL(ctx context.Context, key string, ttl time.Duration) (lock Lock, left time.Duration, err error)
}

var (
	// ErrLockHeld is returned by Locker.Obtain when another holder has the key.
	ErrLockHeld = engine.ErrLockHeld
	// ErrLockLost is returned by Lock.Refresh and Lock.Release when the lock
	// expired or was taken over by another holder.
	ErrLockLost = engine.ErrLockLost
	// ErrLockUnavailable is matched (errors.Is) by every error of a Locker or
	// Lock that means the backend did not answer. Such errors also wrap
	// their cause (a network error, context.DeadlineExceeded...).
	ErrLockUnavailable = engine.ErrLockUnavailable
)

// NewRedisLocker returns a Locker for a fleet of replicas sharing one Redis
// (standalone, Sentinel or Cluster), built on github.com/bsm/redislock: a key
// is SET NX PX with a random token, refreshed and released by Lua scripts
// that check the token, so a stale holder never touches another's key.
// Expiry runs on the Redis server's clock, not on Options.Clock. It is a
// LockRefresher (one script refreshes every lock whose keys share a hash
// tag, as all of an app's do, so it runs on Redis Cluster too) and a
// LockProber (it asks a key's PTTL before it tries to obtain it).
//
// Each call waits at most until ctx ends or one second (redisCallTimeout)
// has passed, whichever comes first, and then reports ErrLockUnavailable.
// The bound holds whatever the client's options: go-redis ignores ctx for
// socket I/O unless ContextTimeoutEnabled is set, so a call that overstays is
// left to finish in the background within the client's own timeouts (a key
// it sets then expires after its ttl). It panics if client is nil.
func NewRedisLocker(client redis.UniversalClient) Locker { return engine.NewRedisLocker(client) }

// NewLocalLocker returns a Locker for a single process: keys live in this
// process's memory, so two processes each using one do not exclude each other
// (the scheduler says so in its start-up log). Expiry follows clock, so tests
// drive it with a fake clock; a nil clock means SystemClock. Each Obtain gets
// a fresh token, so a holder whose lock expired cannot refresh or release the
// key of the next holder. The calls answer at once; one whose ctx has already
// ended returns an ErrLockUnavailable error, as the Redis Locker would.
func NewLocalLocker(clock Clock) Locker { return engine.NewLocalLocker(clock) }
