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
