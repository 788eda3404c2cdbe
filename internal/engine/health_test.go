package engine

import (
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

// A call the database leaves unanswered counts as an outage from when it
// was asked, as a failure does from when it failed: the lock keeper lets
// go a second after either, and an answer ends both.
func TestDatabaseUnansweredCountsAsDownFromTheAsking(t *testing.T) {
	var h healthState
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	require.Zero(t, h.dbDownFor(t0))
	h.asking(t0)
	h.asking(t0.Add(500 * time.Millisecond)) // the first asking counts
	require.Equal(t, 1500*time.Millisecond, h.dbDownFor(t0.Add(1500*time.Millisecond)))
	h.answered()
	require.Zero(t, h.dbDownFor(t0.Add(2*time.Second)))

	// A failure noted while a call hangs: the earlier of the two counts.
	h.asking(t0.Add(3 * time.Second))
	h.dbDownSince.Store(t0.Add(4 * time.Second).UnixNano())
	require.Equal(t, 2*time.Second, h.dbDownFor(t0.Add(5*time.Second)))
	h.answered()
	h.dbDownSince.Store(t0.Add(6 * time.Second).UnixNano())
	require.Equal(t, time.Second, h.dbDownFor(t0.Add(7*time.Second)))
}
