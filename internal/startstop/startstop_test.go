package startstop_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/startstop"
)

func TestStopReturnsOnceEveryLoopReturned(t *testing.T) {
	t.Parallel()
	var b startstop.Base
	var ended atomic.Int32
	loop := startstop.Loop{Run: func(ctx context.Context) {
		<-ctx.Done()
		ended.Add(1)
	}}
	require.NoError(t, b.Start(context.Background(), loop, loop, loop))
	require.ErrorIs(t, b.Start(context.Background(), loop), startstop.ErrStarted)
	b.Stop()
	require.Equal(t, int32(3), ended.Load())
	b.Stop() // stopping twice is harmless
}

func TestLoopsOutliveTheContextThatStartedThem(t *testing.T) {
	t.Parallel()
	var b startstop.Base
	ctx, cancel := context.WithCancel(context.Background())
	loopCtx := make(chan context.Context, 1)
	require.NoError(t, b.Start(ctx, startstop.Loop{Run: func(ctx context.Context) {
		loopCtx <- ctx
		<-ctx.Done()
	}}))
	inner := <-loopCtx
	cancel()
	require.NoError(t, inner.Err(), "the caller's context ended, the component did not")
	b.Stop()
	require.ErrorIs(t, inner.Err(), context.Canceled)
}

func TestTimersSumsTheRunningLoopsAndIsZeroWhenStopped(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var b startstop.Base
	noop := func(context.Context, time.Time) {}
	require.Equal(t, 0, b.Timers())
	require.NoError(t, b.Start(context.Background(),
		startstop.Every(clock, time.Second, noop), startstop.Every(clock, time.Minute, noop),
		startstop.Loop{Run: func(ctx context.Context) { <-ctx.Done() }}))
	require.Equal(t, 2, b.Timers())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, clock.BlockUntil(ctx, b.Timers()))
	b.Stop()
	require.Equal(t, 0, b.Timers())
	require.Equal(t, 0, clock.Timers(), "Every stops its timer when it returns")
	// A stopped Base starts again.
	require.NoError(t, b.Start(context.Background(), startstop.Every(clock, time.Second, noop)))
	require.Equal(t, 1, b.Timers())
	b.Stop()
}

func TestEveryCallsOncePerPeriodCountedFromTheEndOfTheLastCall(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := fakeclock.New(start)
	calls := make(chan time.Time, 10)
	var b startstop.Base
	require.NoError(t, b.Start(context.Background(), startstop.Every(clock, 10*time.Second, func(_ context.Context, now time.Time) {
		calls <- now
	})))
	defer b.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 1; i <= 3; i++ {
		require.NoError(t, clock.BlockUntil(ctx, b.Timers()))
		clock.Advance(9 * time.Second)
		require.Empty(t, calls, "no call before the period ends")
		clock.Advance(time.Second)
		require.Equal(t, start.Add(time.Duration(i)*10*time.Second), <-calls)
	}
}

func TestKickCoalescesPokes(t *testing.T) {
	t.Parallel()
	k := startstop.NewKick()
	for range 5 {
		k.Poke()
	}
	<-k
	select {
	case <-k:
		t.Fatal("five pokes before the loop looked woke it twice")
	default:
	}
}

func TestDrainRetriesUntilTheFlushSucceeds(t *testing.T) {
	t.Parallel()
	tries := 0
	err := startstop.Drain(context.Background(), time.Millisecond, func(context.Context) error {
		tries++
		if tries < 3 {
			return errors.New("database away")
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, tries)
}

func TestDrainGivesUpWithTheLastErrorWhenContextEnds(t *testing.T) {
	t.Parallel()
	away := errors.New("database away")
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	err := startstop.Drain(ctx, time.Millisecond, func(context.Context) error {
		tries++
		if tries == 2 {
			cancel()
		}
		return away
	})
	require.ErrorIs(t, err, away)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 2, tries)
}
