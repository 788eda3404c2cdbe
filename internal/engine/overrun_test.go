package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// A handler that ignores its context past its timeout is recorded
// timed_out at the deadline, and leaves its worker there: on a pool of
// one, the fire waiting for that worker starts at the deadline, while the
// handler still runs.
func TestHandlerPastItsTimeoutLeavesItsWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
	s := newEngine(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, func(c *Config) { c.Workers = 1 })
	stuck, quick := newInvocations(), newInvocations()
	release := make(chan struct{})
	returned := make(chan struct{})
	mustRegister(t, s, "stuck", "0 0 29 2 *", stuck.handler(func(*Attempt) error {
		defer close(returned)
		<-release // ignores its context on purpose
		return errors.New("returned after its timeout")
	}), func(d *store.Definition) { d.TimeoutMs = 5000 })
	mustRegister(t, s, "quick", "0 0 29 2 *", quick.handler(nil))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	defer func() {
		close(release)
		<-returned
	}()

	exec, _, err := s.Trigger(ctx, "stuck")
	require.NoError(t, err)
	stuck.next(t, 10*time.Second)
	_, _, err = s.Trigger(ctx, "quick")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		running, waiting := s.pool.Stats()
		return running == 1 && waiting == 1
	}, 10*time.Second, time.Millisecond, "quick waits for the one worker")

	waitIdle(ctx, t, clock, s)
	clock.Advance(5 * time.Second)
	quick.next(t, 10*time.Second)
	require.Eventually(t, func() bool {
		row, err := s.store.Execution(ctx, exec.ID)
		return err == nil && row.Status == store.StatusTimedOut
	}, 10*time.Second, 5*time.Millisecond, "stuck is recorded timed_out at its deadline")
	select {
	case <-returned:
		t.Fatal("the handler returned: nothing was left running")
	default:
	}
}
