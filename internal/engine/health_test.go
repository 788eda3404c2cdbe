package engine

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// A loop whose last tick is 5 s old or more is not healthy: a tick stuck
// on the database shows in Health.
func TestLoopHealthReportsAStuckTick(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
	e := newEngine(t, setupOpts{db: testsvc.SQLite(t), clock: clock}, nil)
	// Running, with no loop of its own to tick meanwhile: the test sets
	// the last tick.
	e.mu.Lock()
	e.state = stateRunning
	e.mu.Unlock()

	e.health.tick(clock.Now().Add(-6 * time.Second))
	ok, detail, age := e.LoopHealth()
	require.False(t, ok)
	require.Equal(t, "last tick 6s ago (want less than 5s)", detail)
	require.Equal(t, 6*time.Second, age)

	e.health.tick(clock.Now().Add(-4 * time.Second))
	ok, detail, age = e.LoopHealth()
	require.True(t, ok)
	require.Equal(t, "last tick 4s ago", detail)
	require.Equal(t, 4*time.Second, age)
}

// A probe the database leaves unanswered counts as an outage from when it
// went out, unless another call answers meanwhile; a failure counts from
// when it failed; an answer ends both.
func TestDatabaseUnansweredCountsAsDownFromTheProbe(t *testing.T) {
	var h healthState
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	require.Zero(t, h.dbDownFor(t0))
	h.answered(at(-time.Second))
	h.probeSince.Store(t0.UnixNano())
	require.Equal(t, 1500*time.Millisecond, h.dbDownFor(at(1500*time.Millisecond)))
	// Another call answers while the probe is out: the database lives, the
	// probe's wait counts from that answer.
	h.answered(at(1200 * time.Millisecond))
	require.Equal(t, 300*time.Millisecond, h.dbDownFor(at(1500*time.Millisecond)))
	h.probeSince.Store(0)
	require.Zero(t, h.dbDownFor(at(2*time.Second)))

	// A failure noted while the probe is out: the earlier of the two counts.
	h.probeSince.Store(at(3 * time.Second).UnixNano())
	h.dbDownSince.Store(at(4 * time.Second).UnixNano())
	require.Equal(t, 2*time.Second, h.dbDownFor(at(5*time.Second)))
	h.probeSince.Store(0)
	require.Equal(t, time.Second, h.dbDownFor(at(5*time.Second)), "the failure counts once the probe is back")
	h.answered(at(6 * time.Second))
	require.Zero(t, h.dbDownFor(at(7*time.Second)))
}

// The lock keeper's probe: a database that leaves it unanswered, and
// answers nothing else, is cut off a second after it went out, and the
// keeper lets its locks go; an answer to another call meanwhile, or to
// the probe, keeps them.
func TestKeeperLetsGoWhenItsProbeGoesUnanswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	m, err := newMetrics(nil, "probe")
	require.NoError(t, err)
	hang := make(chan struct{})
	pings := make(chan struct{}, 10)
	var hanging atomic.Bool
	var noted atomic.Int32
	var k *lockKeeper
	k = &lockKeeper{locker: NewLocalLocker(clock), clock: clock, log: slog.New(slog.DiscardHandler), metrics: m,
		health: &healthState{}, app: "probe", replica: "r1", held: map[slotKey]Lock{}, lost: map[slotKey]time.Time{},
		noteRedis: func(error) {}, noteDB: func(err error) {
			noted.Add(1)
			if err == nil {
				k.health.answered(clock.Now()) // as Engine.noteDB does
			}
		}}
	k.ping = func(ctx context.Context) error {
		pings <- struct{}{}
		if hanging.Load() {
			select {
			case <-hang:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	slot := slotKey{minute: clock.Now().Unix() / 60, bucket: 0}
	_, err = k.obtain(ctx, slot, false)
	require.NoError(t, err)

	k.keep(ctx, clock.Now())
	<-pings
	k.probes.Wait()
	require.Equal(t, int32(1), noted.Load(), "the probe's answer is noted")
	require.True(t, k.holds(slot))

	hanging.Store(true)
	sent := clock.Now()
	k.keep(ctx, sent) // the probe goes out and hangs; keep returns after probeWait
	<-pings
	clock.Advance(600 * time.Millisecond)
	k.health.answered(clock.Now()) // another call answers: the database lives
	clock.Advance(600 * time.Millisecond)
	k.keep(ctx, clock.Now())
	require.True(t, k.holds(slot), "1.2 s after the probe went out, but 0.6 s after an answer")
	clock.Advance(500 * time.Millisecond)
	k.keep(ctx, clock.Now())
	require.False(t, k.holds(slot), "1.1 s without an answer while the probe is out: cut off")
	require.Len(t, k.takeLost(), 1, "the slot is reported lost to the planner")
	_, err = k.obtain(ctx, slot, false)
	require.ErrorIs(t, err, errDatabaseCut)

	hanging.Store(false)
	close(hang) // the probe answers; the next round finds the database back
	k.probes.Wait()
	require.Zero(t, k.health.dbDownFor(clock.Now()))
	k.keep(ctx, clock.Now())
	_, err = k.obtain(ctx, slot, false)
	require.NoError(t, err, "claims again once the database answers")
	k.probes.Wait()
}
