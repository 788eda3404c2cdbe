package xtimer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
)

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
