package xtimer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
)

// Fixtures shared by the package's tests.

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}

// waitIdle waits until every loop of the schedulers that sleeps on clock
// has armed its timer, as the running components declare them
// (clockTimers): moving the clock before that would leave a loop's period
// unfired.
func waitIdle(ctx context.Context, t *testing.T, clock *fakeclock.Clock, ss ...*Scheduler) {
	t.Helper()
	n := 0
	for _, s := range ss {
		n += s.clockTimers()
	}
	require.NoError(t, clock.BlockUntil(ctx, n))
}
