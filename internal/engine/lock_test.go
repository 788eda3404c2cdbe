package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// lockFixture is what the shared Locker tests need from a backend.
type lockFixture struct {
	// a and b are two replicas' lockers (the same locker for the local one,
	// which serves a single process).
	a, b Locker
	// key returns a key no other test uses.
	key func(name string) string
	// remaining returns the key's time to live as the backend sees it, 0 if
	// the key is absent.
	remaining func(t *testing.T, key string) time.Duration
	// expire makes the key's time to live run out.
	expire func(t *testing.T, key string)
}

func localLockFixture(t *testing.T) (lockFixture, *fakeclock.Clock) {
	clk := fakeclock.New(time.Date(2024, 3, 10, 9, 0, 0, 0, time.UTC))
	l := NewLocalLocker(clk)
	return lockFixture{
		a: l, b: l,
		key: func(name string) string { return "xtimer:local:slot:" + name },
		remaining: func(t *testing.T, key string) time.Duration {
			ll := l.(*localLocker)
			ll.mu.Lock()
			defer ll.mu.Unlock()
			h, ok := ll.held[key]
			if !ok || !clk.Now().Before(h.expires) {
				return 0
			}
			return h.expires.Sub(clk.Now())
		},
		expire: func(t *testing.T, key string) { clk.Advance(time.Hour) }, // longer than any ttl here
	}, clk
}

func redisLockFixture(t *testing.T) lockFixture {
	rdbA, rdbB := testsvc.Redis(t), testsvc.Redis(t)
	app := testsvc.App(t)
	return lockFixture{
		a: NewRedisLocker(rdbA), b: NewRedisLocker(rdbB),
		key: func(name string) string { return "xtimer:{" + app + "}:slot:" + name },
		remaining: func(t *testing.T, key string) time.Duration {
			d, err := rdbA.PTTL(context.Background(), key).Result()
			require.NoError(t, err)
			require.NotEqual(t, time.Duration(-1), d, "key %q has no expiry", key)
			return max(d, 0) // -2ns: absent
		},
		expire: func(t *testing.T, key string) {
			ctx := context.Background()
			require.NoError(t, rdbA.PExpire(ctx, key, time.Millisecond).Err())
			require.Eventually(t, func() bool { return rdbA.Exists(ctx, key).Val() == 0 },
				5*time.Second, 2*time.Millisecond, "key %q did not expire", key)
		},
	}
}

func TestLockLocal(t *testing.T) {
	t.Parallel()
	testLocker(t, func(t *testing.T) lockFixture { f, _ := localLockFixture(t); return f })
}

func TestLockRedis(t *testing.T) {
	t.Parallel()
	testLocker(t, redisLockFixture)
}

// testLocker is the behaviour every Locker promises.
func testLocker(t *testing.T, setup func(t *testing.T) lockFixture) {
	ctx := context.Background()

	t.Run("HeldKeyIsRefusedToEveryOtherObtain", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		key := f.key("29000000:3")
		lk, err := f.a.Obtain(ctx, key, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, key, lk.Key())

		_, err = f.b.Obtain(ctx, key, 10*time.Second)
		require.ErrorIs(t, err, ErrLockHeld)
		require.NotErrorIs(t, err, ErrLockUnavailable)
		_, err = f.a.Obtain(ctx, key, 10*time.Second)
		require.ErrorIs(t, err, ErrLockHeld, "not reentrant: a second claim by the same replica is refused too")

		other, err := f.b.Obtain(ctx, f.key("29000000:4"), 10*time.Second)
		require.NoError(t, err, "another key is free")
		require.NoError(t, other.Release(ctx))
	})

	// The lock keeper refreshes every lock it holds in one call: each lock
	// still its holder's is extended, and one another holder took after it
	// expired is reported lost and left as the new holder set it.
	t.Run("RefreshAllExtendsOnlyTheLocksStillHeld", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		k1, k2, k3 := f.key("29000001:1"), f.key("29000001:2"), f.key("29000001:3")
		l1, err := f.a.Obtain(ctx, k1, 2*time.Hour)
		require.NoError(t, err)
		l2, err := f.a.Obtain(ctx, k2, time.Second)
		require.NoError(t, err)
		l3, err := f.a.Obtain(ctx, k3, 2*time.Hour)
		require.NoError(t, err)
		f.expire(t, k2)
		taken, err := f.b.Obtain(ctx, k2, 3*time.Hour)
		require.NoError(t, err, "k2 expired: another holder takes it")

		errs := f.a.(LockRefresher).RefreshAll(ctx, []Lock{l1, l2, l3}, 10*time.Minute)
		require.Len(t, errs, 3)
		require.NoError(t, errs[0])
		require.ErrorIs(t, errs[1], ErrLockLost)
		require.NoError(t, errs[2])
		for _, k := range []string{k1, k3} {
			left := f.remaining(t, k)
			require.True(t, left > 9*time.Minute && left <= 10*time.Minute, "%s: ttl after RefreshAll: %v", k, left)
		}
		left := f.remaining(t, k2)
		require.True(t, left > 2*time.Hour && left <= 3*time.Hour, "the new holder's ttl is untouched: %v", left)
		require.NoError(t, taken.Refresh(ctx, time.Minute), "the new holder still holds k2")
		require.ErrorIs(t, l2.Release(ctx), ErrLockLost)

		require.Empty(t, f.a.(LockRefresher).RefreshAll(ctx, nil, time.Minute))
		errs = f.a.(LockRefresher).RefreshAll(ctx, []Lock{l1}, 0)
		require.ErrorContains(t, errs[0], "ttl must be at least 1ms")
	})

	// A claim of a held key tells how long its holder's lock has left,
	// so that the planner looks again when it runs out.
	t.Run("ObtainOrTTLTellsWhenTheHoldEnds", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		key := f.key("29000002:0")
		lk, left, err := f.a.(LockProber).ObtainOrTTL(ctx, key, 10*time.Second)
		require.NoError(t, err)
		require.Zero(t, left)
		require.Equal(t, key, lk.Key())

		_, left, err = f.b.(LockProber).ObtainOrTTL(ctx, key, 10*time.Second)
		require.ErrorIs(t, err, ErrLockHeld)
		require.True(t, left > 9*time.Second && left <= 10*time.Second, "left: %v", left)

		require.NoError(t, lk.Release(ctx))
		next, left, err := f.b.(LockProber).ObtainOrTTL(ctx, key, 10*time.Second)
		require.NoError(t, err, "released: free again")
		require.Zero(t, left)
		require.NoError(t, next.Release(ctx))
	})

	// The planner looks at many slots' holders in one call: each key
	// held says how long its holder's lock has left, each free key says
	// so, a released one included.
	t.Run("HeldForTellsEveryKeysHolder", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		held, free, released := f.key("29000003:0"), f.key("29000003:1"), f.key("29000003:2")
		lk, err := f.a.Obtain(ctx, held, 10*time.Second)
		require.NoError(t, err)
		gone, err := f.a.Obtain(ctx, released, 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, gone.Release(ctx))

		left, err := f.b.(lockPeeker).heldFor(ctx, []string{free, held, released})
		require.NoError(t, err)
		require.Len(t, left, 3)
		require.Equal(t, lockFree, left[0])
		require.True(t, left[1] > 9*time.Second && left[1] <= 10*time.Second, "left: %v", left[1])
		require.Equal(t, lockFree, left[2])
		require.NoError(t, lk.Release(ctx))
	})

	t.Run("ReleaseLetsAnotherObtainAndOnlyOnce", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		key := f.key("29000000:0")
		lk, err := f.a.Obtain(ctx, key, 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
		require.Zero(t, f.remaining(t, key))
		require.ErrorIs(t, lk.Release(ctx), ErrLockLost, "released twice")

		next, err := f.b.Obtain(ctx, key, 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, next.Release(ctx))
	})

	t.Run("KeysExpireAndRefreshExtends", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		key := f.key("29000000:1")
		lk, err := f.a.Obtain(ctx, key, 10*time.Second)
		require.NoError(t, err)
		left := f.remaining(t, key)
		require.True(t, left > 0 && left <= 10*time.Second, "ttl after obtain: %v", left)

		require.NoError(t, lk.Refresh(ctx, time.Minute))
		left = f.remaining(t, key)
		require.True(t, left > 10*time.Second && left <= time.Minute, "ttl after refresh: %v", left)
		require.NoError(t, lk.Release(ctx))
	})

	t.Run("ExpiryLetsAnotherObtain", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		key := f.key("29000000:2")
		lk, err := f.a.Obtain(ctx, key, 10*time.Second)
		require.NoError(t, err)
		f.expire(t, key)

		require.ErrorIs(t, lk.Refresh(ctx, 10*time.Second), ErrLockLost, "an expired lock is lost even if nobody took it")
		require.ErrorIs(t, lk.Release(ctx), ErrLockLost)
		next, err := f.b.Obtain(ctx, key, 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, next.Release(ctx))
	})

	t.Run("StaleHolderCannotTouchTheNewHoldersKey", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		key := f.key("29000000:5")
		stale, err := f.a.Obtain(ctx, key, 10*time.Second)
		require.NoError(t, err)
		f.expire(t, key)
		current, err := f.b.Obtain(ctx, key, 30*time.Second)
		require.NoError(t, err)

		require.ErrorIs(t, stale.Refresh(ctx, time.Minute), ErrLockLost)
		require.ErrorIs(t, stale.Release(ctx), ErrLockLost)
		left := f.remaining(t, key)
		require.True(t, left > 10*time.Second && left <= 30*time.Second,
			"the new holder's key is intact, not extended or deleted: ttl %v", left)
		_, err = f.a.Obtain(ctx, key, 10*time.Second)
		require.ErrorIs(t, err, ErrLockHeld)

		require.NoError(t, current.Refresh(ctx, time.Minute))
		require.NoError(t, current.Release(ctx))
	})

	t.Run("ConcurrentObtainHasExactlyOneWinner", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		key := f.key("29000000:6")
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := f.a
				if i%2 == 1 {
					l = f.b
				}
				_, errs[i] = l.Obtain(ctx, key, 10*time.Second)
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, ErrLockHeld, "goroutine %d", i)
		}
		require.Equal(t, 1, won)
	})

	t.Run("BadArgumentsAreNeitherHeldNorUnavailable", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		key := f.key("29000000:7")
		for _, tc := range []struct {
			key  string
			ttl  time.Duration
			want string
		}{
			{"", time.Second, "xtimer: lock key is empty"},
			{key, 0, fmt.Sprintf("xtimer: lock %q: ttl must be at least 1ms, got 0s", key)},
			{key, 500 * time.Microsecond, fmt.Sprintf("xtimer: lock %q: ttl must be at least 1ms, got 500µs", key)},
		} {
			_, err := f.a.Obtain(ctx, tc.key, tc.ttl)
			require.EqualError(t, err, tc.want)
			require.NotErrorIs(t, err, ErrLockHeld)
			require.NotErrorIs(t, err, ErrLockUnavailable)
		}
		require.Zero(t, f.remaining(t, key), "nothing was set")

		lk, err := f.a.Obtain(ctx, key, 10*time.Second)
		require.NoError(t, err)
		require.Error(t, lk.Refresh(ctx, 0))
		require.Positive(t, f.remaining(t, key), "a refused refresh leaves the lock alone")
		require.NoError(t, lk.Release(ctx))
	})

	t.Run("EndedContextIsUnavailable", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		key := f.key("29000000:8")
		lk, err := f.a.Obtain(ctx, key, 10*time.Second)
		require.NoError(t, err)

		done, cancel := context.WithCancel(ctx)
		cancel()
		_, err = f.b.Obtain(done, f.key("29000000:9"), 10*time.Second)
		requireUnavailable(t, err, context.Canceled)
		requireUnavailable(t, lk.Refresh(done, time.Minute), context.Canceled)
		requireUnavailable(t, lk.Release(done), context.Canceled)
		require.NoError(t, lk.Release(ctx), "the lock survived the failed calls")
	})
}

func requireUnavailable(t *testing.T, err, cause error) {
	t.Helper()
	require.ErrorIs(t, err, ErrLockUnavailable)
	require.NotErrorIs(t, err, ErrLockHeld)
	require.NotErrorIs(t, err, ErrLockLost)
	if cause != nil {
		require.ErrorIs(t, err, cause)
	}
	require.Contains(t, err.Error(), "xtimer: lock backend unavailable: ")
}

// The local locker's expiry follows the injected clock to the nanosecond.
func TestLockLocalExpiryFollowsTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, clk := localLockFixture(t)
	key := f.key("29000000:0")

	lk, err := f.a.Obtain(ctx, key, 10*time.Second)
	require.NoError(t, err)
	clk.Advance(8 * time.Second)
	require.NoError(t, lk.Refresh(ctx, 10*time.Second))
	clk.Advance(10*time.Second - time.Nanosecond)
	_, err = f.b.Obtain(ctx, key, 10*time.Second)
	require.ErrorIs(t, err, ErrLockHeld, "refresh counted from its own instant, not from the obtain")

	clk.Advance(time.Nanosecond)
	next, err := f.b.Obtain(ctx, key, 10*time.Second)
	require.NoError(t, err, "the key is free the instant its ttl runs out")
	require.ErrorIs(t, lk.Refresh(ctx, time.Second), ErrLockLost)
	require.NoError(t, next.Release(ctx))
}

// Slot keys are new every minute; keys whose holders never released them
// must not pile up in a long-running process.
func TestLockLocalDropsExpiredKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := fakeclock.New(time.Date(2024, 3, 10, 9, 0, 0, 0, time.UTC))
	l := NewLocalLocker(clk).(*localLocker)
	for minute := range 100 {
		for bucket := range 16 {
			_, err := l.Obtain(ctx, fmt.Sprintf("xtimer:app:slot:%d:%d", minute, bucket), 30*time.Second)
			require.NoError(t, err)
		}
		clk.Advance(time.Minute)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	require.LessOrEqual(t, len(l.held), 2*minSweep, "expired keys are swept")
}

func TestLockLocalNilClockIsSystemClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := NewLocalLocker(nil)
	lk, err := l.Obtain(ctx, "xtimer:app:slot:1:1", time.Minute)
	require.NoError(t, err)
	_, err = l.Obtain(ctx, "xtimer:app:slot:1:1", time.Minute)
	require.ErrorIs(t, err, ErrLockHeld)
	require.NoError(t, lk.Release(ctx))
}

// With Redis down the Redis locker answers at once with an error the
// scheduler can tell from "held": it then falls back to the database.
func TestLockRedisUnavailableIsQuickAndDistinct(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	l := NewRedisLocker(rdb)

	began := time.Now()
	lk, err := l.Obtain(ctx, "xtimer:down:slot:29000000:0", 10*time.Second)
	took := time.Since(began)
	require.Nil(t, lk)
	requireUnavailable(t, err, nil)
	// With go-redis's default dial retries the per-call bound (one second)
	// usually ends the call first; either cause is wrapped.
	var opErr *net.OpError
	require.True(t, errors.As(err, &opErr) || errors.Is(err, context.DeadlineExceeded),
		"the cause is wrapped: %v", err)
	require.Less(t, took, redisCallTimeout+time.Second, "Obtain must not hang when Redis is down")

	left, err := l.(lockPeeker).heldFor(ctx, []string{"xtimer:down:slot:29000000:0", "xtimer:down:slot:29000000:1"})
	require.Nil(t, left)
	requireUnavailable(t, err, nil)
	require.ErrorContains(t, err, "xtimer:down:slot:29000000:1", "the keys asked for are named")
}

// A key held without expiry (set by hand, or by a Locker of another
// make) is held for as long as nobody can tell, as ObtainOrTTL says.
func TestLockRedisHeldForAKeyWithoutExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testsvc.Redis(t)
	key := "xtimer:{" + testsvc.App(t) + "}:slot:29000000:0"
	require.NoError(t, rdb.Set(ctx, key, "someone", 0).Err())
	left, err := NewRedisLocker(rdb).(lockPeeker).heldFor(ctx, []string{key})
	require.NoError(t, err)
	require.Equal(t, []time.Duration{lockHeldUnknown}, left)
	_, left1, err := NewRedisLocker(rdb).(LockProber).ObtainOrTTL(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrLockHeld)
	require.Equal(t, lockHeldUnknown, left1, "as ObtainOrTTL tells it")
}

// A lock whose Redis client went away reports unavailable, not lost.
func TestLockRedisRefreshAndReleaseOnAClosedClientAreUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testsvc.Redis(t)
	key := "xtimer:{" + testsvc.App(t) + "}:slot:29000000:0"
	lk, err := NewRedisLocker(rdb).Obtain(ctx, key, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, rdb.Close())

	requireUnavailable(t, lk.Refresh(ctx, time.Minute), redis.ErrClosed)
	errs := NewRedisLocker(rdb).(LockRefresher).RefreshAll(ctx, []Lock{lk}, time.Minute)
	require.Len(t, errs, 1)
	requireUnavailable(t, errs[0], redis.ErrClosed)
	requireUnavailable(t, lk.Release(ctx), redis.ErrClosed)
}

// A Redis that accepts connections and never answers is cut off by the
// caller's ctx or, without one, by the per-call bound.
func TestLockRedisSilentServerIsCutOff(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, acceptErr := ln.Accept()
			if acceptErr != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	t.Cleanup(func() { _ = rdb.Close() })
	l := NewRedisLocker(rdb)

	began := time.Now()
	_, err = l.Obtain(context.Background(), "xtimer:silent:slot:29000000:0", 10*time.Second)
	took := time.Since(began)
	requireUnavailable(t, err, context.DeadlineExceeded)
	require.Less(t, took, redisCallTimeout+time.Second, "bounded by the per-call timeout")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	began = time.Now()
	_, err = l.Obtain(ctx, "xtimer:silent:slot:29000000:1", 10*time.Second)
	took = time.Since(began)
	requireUnavailable(t, err, context.DeadlineExceeded)
	require.Less(t, took, redisCallTimeout/2, "bounded by the caller's ctx")
}

// A slot claim cut short by Stop (its context canceled) is not the lock
// backend failing: no fallback to the database's unique key, no alert,
// and the slot is not taken.
func TestSlotClaimCanceledByStopIsNotAFallback(t *testing.T) {
	t.Parallel()
	rdb := testsvc.Redis(t)
	s := newEngine(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, func(c *Config) {
		c.Locker, c.LockMode = NewRedisLocker(rdb), "redis"
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st := &slotState{}
	down := false
	require.False(t, s.planner.claimSlot(ctx, time.Now(), slotKey{minute: time.Now().Unix() / 60, bucket: 3}, st, &down, nil))
	require.False(t, down, "a canceled claim must not switch the tick to the database fallback")
	require.Empty(t, s.keeper.heldKeys())
	require.False(t, s.health.redisDown.Load(), "a canceled claim must not mark Redis down")
}

// failoverPair is two engines of one app on one database and one
// in-process lock (it stands for Redis), on a fake clock, with a task
// that fires every second: a started first and holds the slot, b
// started after and watches it.
type failoverPair struct {
	clock  *fakeclock.Clock
	locker *localLocker
	a, b   *Engine
	runs   *invocations
	app    string
	db     *gorm.DB // b's pool
}

func newFailoverPair(t *testing.T, dbA, dbB *gorm.DB, start time.Time) *failoverPair {
	t.Helper()
	f := newPairClock(t, dbB, start)
	ctx := context.Background()
	f.a = f.start(t, "replica-a", dbA, f.locker)
	f.advance(ctx, t, start.Add(1500*time.Millisecond)) // a's first tick claims the minute, alone
	require.Len(t, f.a.keeper.heldKeys(), 1, "a holds the slot of the task's bucket")
	f.b = f.start(t, "replica-b", dbB, f.locker)
	f.advance(ctx, t, start.Add(4*time.Second)) // b's ticks find the slot held: it watches it
	require.Len(t, f.a.keeper.heldKeys(), 1)
	require.Empty(t, f.b.keeper.heldKeys())
	return f
}

// newPairClock is a pair of no replica yet: its app, its fake clock at
// start, and the in-process locker on it; db is the pool its rows are
// read through (row).
func newPairClock(t *testing.T, db *gorm.DB, start time.Time) *failoverPair {
	t.Helper()
	f := &failoverPair{clock: fakeclock.New(start), runs: newInvocations(), app: testsvc.App(t), db: db}
	f.locker = NewLocalLocker(f.clock).(*localLocker)
	return f
}

// start starts a replica of the pair's app, with the task "pay" every
// second, on db and locker.
func (f *failoverPair) start(t *testing.T, id string, db *gorm.DB, locker Locker) *Engine {
	t.Helper()
	e := newEngine(t, setupOpts{db: db, clock: f.clock, app: f.app}, func(c *Config) { c.InstanceID, c.Locker, c.Logger = id, locker, c.Logger.With("replica", id) })
	mustRegister(t, e, "pay", "* * * * * *", f.runs.handler(nil))
	require.NoError(t, e.Start(context.Background()))
	stopOnCleanup(t, e)
	return e
}

// advance moves the clock to at in steps of 10ms, each once every running
// engine has settled (waitSettled): every timer of the test lands on its
// instant, and no fire armed waits unseen while the clock moves.
func (f *failoverPair) advance(ctx context.Context, t *testing.T, at time.Time) {
	t.Helper()
	for {
		var running []*Engine
		for _, e := range []*Engine{f.a, f.b} {
			if e == nil {
				continue
			}
			e.mu.Lock()
			if e.state == stateRunning {
				running = append(running, e)
			}
			e.mu.Unlock()
		}
		waitSettled(ctx, t, f.clock, running...)
		if !f.clock.Now().Before(at) {
			return
		}
		f.clock.Advance(min(10*time.Millisecond, at.Sub(f.clock.Now())))
	}
}

// row reads the fire of "pay" at run time at.
func (f *failoverPair) row(t *testing.T, at time.Time) store.Execution {
	t.Helper()
	r, err := f.findRow(at)
	require.NoError(t, err)
	return r
}

// findRow is row's read, with its error (gorm.ErrRecordNotFound: no row).
func (f *failoverPair) findRow(at time.Time) (store.Execution, error) {
	var r store.Execution
	err := f.db.Where("app = ? AND task_code = ? AND run_time = ?", f.app, "pay", at.UnixMilli()).First(&r).Error
	return r, err
}

// lockExpiry is when the lock a holds on its one slot runs out.
func (f *failoverPair) lockExpiry(t *testing.T) time.Time {
	t.Helper()
	held := f.a.keeper.heldKeys()
	require.Len(t, held, 1)
	f.locker.mu.Lock()
	defer f.locker.mu.Unlock()
	h, ok := f.locker.held[f.a.keeper.lockKey(held[0])]
	require.True(t, ok)
	return h.expires
}

// A replica that found a slot held looks at it again when the owner's
// lock runs out, not at its next tick: when the owner is killed, the
// watcher wins the slot at the lock's expiry (plus expiryMargin), takes
// over the owner's unstarted fires and starts the overdue one there and
// then. Its ticks fall half a second past each second (tickPhase); the
// lock here runs out elsewhere, so a takeover at the tick would start the
// fire at another instant.
func TestSlotTakenOverWhenTheOwnersLockRunsOutNotAtTheNextTick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.SQLite(t)
	start := time.Date(2026, 12, 1, 10, 0, 30, 100_000_000, time.UTC) // a's lock rounds at .1 and .6
	f := newFailoverPair(t, db, db, start)

	// a's lock rounds follow the clock's steps: the crash waits for a lock
	// that runs out well away from b's ticks.
	f.advance(ctx, t, start.Add(4100*time.Millisecond))
	expires := f.lockExpiry(t)
	for phase := expires.Sub(expires.Truncate(time.Second)); phase > tickPhase-200*time.Millisecond && phase < tickPhase+200*time.Millisecond; {
		f.advance(ctx, t, f.clock.Now().Add(250*time.Millisecond))
		expires = f.lockExpiry(t)
		phase = expires.Sub(expires.Truncate(time.Second))
	}
	f.a.crash()
	expires = f.lockExpiry(t) // a round may have ended between the look and the crash
	takeover := expires.Add(expiryMargin)
	if tick := expires.Truncate(time.Second).Add(tickPhase); !tick.Before(expires) && tick.Before(takeover) {
		takeover = tick // a tick of b's comes first (the crash raced a round of a's)
	}

	key := f.a.keeper.lockKey(f.a.keeper.heldKeys()[0])
	var won time.Time // when b won the slot, on the engines' clock
	for won.IsZero() && f.clock.Now().Before(expires.Add(2*time.Second)) {
		f.advance(ctx, t, f.clock.Now().Add(10*time.Millisecond))
		f.locker.mu.Lock()
		if h, ok := f.locker.held[key]; ok && h.expires.After(expires) {
			won = h.expires.Add(-slotLockTTL) // obtained, or refreshed since: the first look tells
		}
		f.locker.mu.Unlock()
	}
	require.Equal(t, takeover, won, "b won the slot at %v; the lock ran out at %v (b's ticks come %v past each second)", won, expires, tickPhase)
	f.advance(ctx, t, expires.Add(2*time.Second))
	due := expires.Truncate(time.Second) // the fire a left unstarted, overdue at the takeover
	r := f.row(t, due)
	require.Equal(t, "replica-b", r.Replica)
	require.GreaterOrEqual(t, r.StartedMs, takeover.UnixMilli(), "started once b won the slot")
	require.Len(t, f.b.keeper.heldKeys(), 1, "b holds the slot now")
	f.runs.mu.Lock()
	defer f.runs.mu.Unlock()
	for id, calls := range f.runs.calls {
		require.Len(t, calls, 1, "fire %s", id)
	}
}

// A replica that cannot reach its database lets its locks go after
// dbCutAfter, the liveness lock too, rather than hold slots whose fires it
// can neither record nor start: the other replica takes the slot over, at
// that instant (the lock was refreshed only until then), and runs the
// fires, each once. Once its database answers again, it holds a
// liveness lock again.
func TestReplicaCutFromTheDatabaseReleasesItsLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.Postgres(t)
	proxy := testsvc.NewProxy(t, testsvc.PostgresAddr(t))
	start := time.Date(2026, 12, 1, 10, 0, 30, 100_000_000, time.UTC)
	f := newFailoverPair(t, testsvc.PostgresVia(t, db, proxy), db, start)
	selfKey := f.a.keeper.replicaKey("replica-a")
	heldBy := func(key string) bool {
		f.locker.mu.Lock()
		defer f.locker.mu.Unlock()
		h, ok := f.locker.held[key]
		return ok && f.clock.Now().Before(h.expires)
	}
	require.True(t, heldBy(selfKey))

	proxy.Cut()
	cut := f.clock.Now()
	asked := cut.Add(lockRefreshEvery) // a's next probe goes out by then, unanswered
	for len(f.b.keeper.heldKeys()) == 0 && f.clock.Now().Before(cut.Add(5*time.Second)) {
		f.advance(ctx, t, f.clock.Now().Add(10*time.Millisecond))
	}
	require.Len(t, f.b.keeper.heldKeys(), 1, "b took the slot over")
	require.LessOrEqual(t, f.clock.Now().Sub(asked), dbCutAfter+expiryMargin+10*time.Millisecond,
		"a refreshed its lock only until it would let it go (refreshTTL), a second after its probe went out, so b took the slot over then")
	f.advance(ctx, t, cut.Add(3*time.Second))
	require.Empty(t, f.a.keeper.heldKeys(), "a let its slot lock go")
	require.False(t, heldBy(selfKey), "a let its liveness lock go")
	require.Len(t, f.b.keeper.heldKeys(), 1, "b took the slot over")

	f.advance(ctx, t, cut.Add(6*time.Second))
	for at := cut.Truncate(time.Second).Add(4 * time.Second); at.Before(cut.Add(6 * time.Second)); at = at.Add(time.Second) {
		r := f.row(t, at)
		require.Equal(t, "replica-b", r.Replica, "fire at %v", at)
		require.NotZero(t, r.StartedMs, "fire at %v started", at)
	}

	proxy.Restore()
	f.advance(ctx, t, cut.Add(9*time.Second))
	require.True(t, heldBy(selfKey), "a holds its liveness lock again")
	f.runs.mu.Lock()
	defer f.runs.mu.Unlock()
	for id, calls := range f.runs.calls {
		require.Len(t, calls, 1, "fire %s", id)
	}
}

// downLocker is the in-process locker behind a switch: while down, every
// Obtain and refresh answers that the backend is unavailable, as a Redis
// failing over does.
type downLocker struct {
	*localLocker
	down atomic.Bool
}

func (d *downLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (Lock, error) {
	l, _, err := d.ObtainOrTTL(ctx, key, ttl)
	return l, err
}

func (d *downLocker) ObtainOrTTL(ctx context.Context, key string, ttl time.Duration) (Lock, time.Duration, error) {
	if d.down.Load() {
		return nil, 0, unavailable("obtain", key, errors.New("connection refused"))
	}
	return d.localLocker.ObtainOrTTL(ctx, key, ttl)
}

func (d *downLocker) heldFor(ctx context.Context, keys []string) ([]time.Duration, error) {
	if d.down.Load() {
		return nil, unavailable("pttl", keys[0], errors.New("connection refused"))
	}
	return d.localLocker.heldFor(ctx, keys)
}

func (d *downLocker) RefreshAll(ctx context.Context, locks []Lock, ttl time.Duration) []error {
	errs := make([]error, len(locks))
	if d.down.Load() {
		for i, l := range locks {
			errs[i] = unavailable("refresh", l.Key(), errors.New("connection refused"))
		}
		return errs
	}
	return d.localLocker.RefreshAll(ctx, locks, ttl)
}

// newDownPair is a pair of no replica yet on SQLite (newPairClock), and
// a downLocker over its locker.
func newDownPair(t *testing.T, start time.Time) (*failoverPair, *downLocker, *gorm.DB) {
	t.Helper()
	db := testsvc.SQLite(t)
	f := newPairClock(t, db, start)
	return f, &downLocker{localLocker: f.locker}, db
}

// A lock backend away between two claims is noted by the lock keeper,
// whose refresh is the one call to it every lockRefreshEvery: a replica
// holding every slot of its minute claims nothing then, and a Sentinel
// promotion over within the minute went unseen (no fallback in Health,
// the metric or the alerts) when only claims noted it.
func TestAnOutageBetweenClaimsIsNotedByTheLockKeeper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 10, 0, 15, 100_000_000, time.UTC)
	f, locker, db := newDownPair(t, start)
	f.a = f.start(t, "replica-a", db, locker)
	f.advance(ctx, t, start.Add(5*time.Second))
	require.Len(t, f.a.keeper.heldKeys(), 1, "the replica holds its minute's slot")
	require.False(t, f.a.health.redisDown.Load())

	locker.down.Store(true)
	down := f.clock.Now()
	f.advance(ctx, t, down.Add(lockRefreshEvery))
	require.True(t, f.a.health.redisDown.Load(), "the keeper's refresh noted the backend down")

	locker.down.Store(false)
	up := f.clock.Now()
	f.advance(ctx, t, up.Add(lockRefreshEvery))
	require.False(t, f.a.health.redisDown.Load(), "the keeper's refresh noted the backend back")
}

// Redis forgets a held slot's lock (FLUSHALL, a failover that lost it),
// another replica wins the slot and takes its fires over, and the old
// holder, whose keeper learns of the loss only at its next refresh,
// records a fire past the winner's frontier as its own meanwhile. That
// fire is the slot holder's to run: it takes it over when its own round
// finds it recorded, so that the old holder dying then does not leave it
// to the orphan claims after its heartbeat times out. (A chaos run froze
// the old holder 3.5 s after a FLUSHALL: such a fire started 11 s late,
// when the old holder woke.) The old holder's belated insert is written
// here as its round writes it, after the winner's takeover: which of two
// rounds at one tick instant inserts first is up to the scheduler.
func TestAFireTheOldHolderRecordsAfterATakeoverIsTheHolders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.SQLite(t)
	start := time.Date(2026, 12, 1, 10, 0, 5, 100_000_000, time.UTC)
	f := newFailoverPair(t, db, db, start)
	f.a.crash()
	crashed := f.clock.Now()
	for len(f.b.keeper.heldKeys()) == 0 && f.clock.Now().Before(crashed.Add(3*time.Second)) {
		f.advance(ctx, t, f.clock.Now().Add(10*time.Millisecond))
	}
	require.Len(t, f.b.keeper.heldKeys(), 1, "b took the slot over")
	late := f.clock.Now().Add(recordAhead).Truncate(time.Second).Add(time.Second) // past b's frontier
	_, err := f.findRow(late)
	require.ErrorIs(t, err, gorm.ErrRecordNotFound, "b has not recorded the fire at %v yet", late)
	inserted, err := f.a.store.InsertFires(ctx, []store.Execution{{App: f.app, TaskCode: "pay", RunTime: late.UnixMilli(),
		Status: store.StatusScheduled, Replica: "replica-a", MaxAttempts: 1}})
	require.NoError(t, err)
	require.Len(t, inserted, 1)

	f.advance(ctx, t, late.Add(500*time.Millisecond))
	r := f.row(t, late)
	require.Equal(t, "replica-b", r.Replica, "the slot holder took the fire over")
	require.Eventually(t, func() bool { return f.row(t, late).StartedMs != 0 }, 10*time.Second, 5*time.Millisecond, "and started it")
	require.Less(t, time.UnixMilli(f.row(t, late).StartedMs).Sub(late), time.Second, "on time, not at the orphan claims")
}

// Slots recorded while the lock backend did not answer are claimed again
// once it answers (relockSlots): one replica wins each and takes over its
// unstarted fires, the other watches its lock. When the winner is then
// killed, the other takes the slot over at the lock's expiry, as from any
// dead owner, rather than leave the fires to the orphan claims once the
// dead replica's heartbeat runs out (a Redis Cluster failover followed by
// a replica kill left its fires 4.8 s late that way).
func TestSlotsRecordedWithoutTheLockAreLockedOnceItAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 10, 0, 5, 100_000_000, time.UTC)
	f, locker, db := newDownPair(t, start)
	locker.down.Store(true)
	f.a = f.start(t, "replica-a", db, locker)
	f.b = f.start(t, "replica-b", db, locker)
	f.advance(ctx, t, start.Add(4*time.Second)) // both record the coming seconds, without the lock
	require.Empty(t, f.a.keeper.heldKeys())
	require.Empty(t, f.b.keeper.heldKeys())
	require.NotEmpty(t, f.row(t, start.Truncate(time.Second).Add(8*time.Second)).Replica, "the fires of the next recordAhead are recorded")

	locker.down.Store(false)
	f.advance(ctx, t, start.Add(6*time.Second))
	winner, watcher := f.a, f.b
	if len(f.b.keeper.heldKeys()) == 1 {
		winner, watcher = f.b, f.a
	}
	require.Len(t, winner.keeper.heldKeys(), 1, "one replica claimed the slot once the lock answered")
	require.Empty(t, watcher.keeper.heldKeys(), "the other found it held")
	f.advance(ctx, t, start.Add(7*time.Second))
	next := f.clock.Now().Truncate(time.Second).Add(time.Second)
	require.Equal(t, winner.opts.InstanceID, f.row(t, next).Replica, "the winner took the slot's unstarted fires over")

	winner.crash()
	crashed := f.clock.Now()
	for len(watcher.keeper.heldKeys()) == 0 && f.clock.Now().Before(crashed.Add(10*time.Second)) {
		f.advance(ctx, t, f.clock.Now().Add(10*time.Millisecond))
	}
	require.Len(t, watcher.keeper.heldKeys(), 1, "the watcher took the slot over")
	require.LessOrEqual(t, f.clock.Now().Sub(crashed), slotLockTTL+expiryMargin+10*time.Millisecond,
		"the watcher took the slot over at the lock's expiry, not at the orphan claims")
	f.advance(ctx, t, crashed.Add(5*time.Second))
	for at := crashed.Truncate(time.Second).Add(time.Second); at.Before(crashed.Add(3 * time.Second)); at = at.Add(time.Second) {
		require.Equal(t, watcher.opts.InstanceID, f.row(t, at).Replica, "fire at %v", at)
		// Its start is written by the watcher's dispatcher, which the
		// clock's moves do not wait for.
		require.Eventually(t, func() bool { return f.row(t, at).StartedMs != 0 }, 10*time.Second, 5*time.Millisecond, "fire at %v started", at)
	}
	f.runs.mu.Lock()
	defer f.runs.mu.Unlock()
	for id, calls := range f.runs.calls {
		require.Len(t, calls, 1, "fire %s", id)
	}
}
