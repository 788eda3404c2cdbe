package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// countingLocker is a replica's view of the in-process locker, counting
// the calls that each cost a round trip to Redis: Obtain, ObtainOrTTL,
// and heldFor with the keys it asked for.
type countingLocker struct {
	*localLocker
	mu              sync.Mutex
	obtains, probes int
	peeks           [][]string
}

func (c *countingLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (Lock, error) {
	c.mu.Lock()
	c.obtains++
	c.mu.Unlock()
	return c.localLocker.Obtain(ctx, key, ttl)
}

func (c *countingLocker) ObtainOrTTL(ctx context.Context, key string, ttl time.Duration) (Lock, time.Duration, error) {
	c.mu.Lock()
	c.probes++
	c.mu.Unlock()
	return c.localLocker.ObtainOrTTL(ctx, key, ttl)
}

func (c *countingLocker) heldFor(ctx context.Context, keys []string) ([]time.Duration, error) {
	c.mu.Lock()
	c.peeks = append(c.peeks, slices.Clone(keys))
	c.mu.Unlock()
	return c.localLocker.heldFor(ctx, keys)
}

func (c *countingLocker) counts() (obtains, probes int, peeks [][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.obtains, c.probes, slices.Clone(c.peeks)
}

func (c *countingLocker) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.obtains, c.probes, c.peeks = 0, 0, nil
}

// A replica watching the slots another holds looks at them all in one
// round trip (peek) each time their locks should run out, rather than one
// ObtainOrTTL per slot: with 16 buckets and 3 replicas, each replica
// watched about ten slots, which made ten Redis calls a second, a third
// of a replica's round trips while a million daily tasks ran. When the
// holder stops, the watcher obtains each slot the peek found free, and
// runs the fires, each once.
func TestSlotsHeldElsewhereAreLookedAtInOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.Postgres(t)
	start := time.Date(2026, 12, 1, 10, 0, 30, 100_000_000, time.UTC)
	f := newPairClock(t, db, start)
	lb := &countingLocker{localLocker: f.locker}
	held := startHolder(ctx, t, f, db, &countingLocker{localLocker: f.locker})
	f.b = startPayTasks(t, f, "replica-b", db, lb)
	// b's first claims, its share and the others' startShareWait later,
	// find the slots held: it watches them.
	f.advance(ctx, t, start.Add(4500*time.Millisecond))
	require.Empty(t, f.b.keeper.heldKeys())

	lb.reset()
	f.advance(ctx, t, start.Add(9*time.Second)) // before the next minute's claims (ClaimAhead)
	obtains, probes, peeks := lb.counts()
	require.Zero(t, obtains+probes, "no slot looked at on its own")
	require.GreaterOrEqual(t, len(peeks), 3, "a look each time the held locks should have run out")
	want := make([]string, len(held))
	for i, k := range held {
		want[i] = f.b.keeper.lockKey(k)
	}
	for _, keys := range peeks {
		require.ElementsMatch(t, want, keys, "every slot a holds, in one call")
	}

	lb.reset()
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, f.a.Stop(stopCtx)) // its locks released
	f.advance(ctx, t, start.Add(12*time.Second))
	require.ElementsMatch(t, held, f.b.keeper.heldKeys(), "b took every slot over")
	obtains, probes, _ = lb.counts()
	require.Zero(t, probes, "the slots the peek found free are obtained at once")
	require.Equal(t, len(held), obtains)
	f.advance(ctx, t, start.Add(16*time.Second))
	for range 24 {
		f.runs.next(t, 10*time.Second) // the fires at 10:00:45, b's
	}
	f.runs.mu.Lock()
	defer f.runs.mu.Unlock()
	require.Len(t, f.runs.calls, 24)
	for id, calls := range f.runs.calls {
		require.Len(t, calls, 1, "fire %s", id)
	}
}

// startHolder starts f's replica a on locker, at the clock's instant, and
// lets its first tick claim every slot of the minute, alone; it returns
// those slots (several buckets' worth).
func startHolder(ctx context.Context, t *testing.T, f *failoverPair, db *gorm.DB, locker Locker) []slotKey {
	t.Helper()
	start := f.clock.Now()
	f.a = startPayTasks(t, f, "replica-a", db, locker)
	f.advance(ctx, t, start.Add(1500*time.Millisecond)) // a's first tick claims the minute, alone
	held := f.a.keeper.heldKeys()
	require.GreaterOrEqual(t, len(held), 4, "the tasks fall in several buckets: %v", held)
	return held
}

// startPayTasks starts a replica of f's app with 24 tasks firing at
// second 45 of each minute, spread over the buckets by their codes. (Tasks
// firing every second would keep handlers' timers on the fake clock while
// the loops are busy, and the clock would move on before them: waitIdle.)
// mods change its Config after that.
func startPayTasks(t *testing.T, f *failoverPair, id string, db *gorm.DB, locker Locker, mods ...func(*Config)) *Engine {
	t.Helper()
	e := newEngine(t, setupOpts{db: db, clock: f.clock, app: f.app}, func(c *Config) {
		c.InstanceID, c.Locker, c.Logger = id, locker, c.Logger.With("replica", id)
		for _, mod := range mods {
			mod(c)
		}
	})
	for i := range 24 {
		mustRegister(t, e, fmt.Sprintf("pay-%02d", i), "45 * * * * *", f.runs.handler(nil))
	}
	require.NoError(t, e.Start(context.Background()))
	stopOnCleanup(t, e)
	return e
}

// peekDownLocker is the in-process locker whose look at many slots
// (heldFor) fails as a Redis away does, while its other calls answer.
type peekDownLocker struct{ *localLocker }

func (p *peekDownLocker) heldFor(_ context.Context, keys []string) ([]time.Duration, error) {
	return nil, unavailable("pttl", keys[0], errors.New("connection refused"))
}

// A look at the others' slots that the lock backend does not answer is
// a claim it does not answer: the replica notes the fallback (Health,
// the metric, the alert) and records the round without the lock. Its
// lock keeper's refreshes, which this backend answers, note it back up
// at once, so the alert is what shows the peek was noted.
func TestAPeekUnansweredIsTheFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.Postgres(t)
	start := time.Date(2026, 12, 1, 10, 0, 30, 100_000_000, time.UTC)
	f := newPairClock(t, db, start)
	startHolder(ctx, t, f, db, f.locker)
	alerts := &alertLog{clock: f.clock}
	f.b = startPayTasks(t, f, "replica-b", db, &peekDownLocker{f.locker}, func(c *Config) { c.Notifier = alerts.notifier() })
	require.False(t, f.b.health.redisDown.Load())
	f.advance(ctx, t, start.Add(4*time.Second))
	require.Eventually(t, func() bool { return len(alerts.of(EventFallbackEntered, "")) > 0 }, 10*time.Second, 10*time.Millisecond,
		"b noted the lock backend down")
	require.Contains(t, alerts.of(EventFallbackEntered, "")[0].Error, "pttl", "noted at the peek, the one call that fails")
}
