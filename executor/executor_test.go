package executor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
)

// MeanRun is unknown until a function returned, then at least the run
// time of functions that all take that long (it measures real time).
func TestPoolMeanRunFollowsTheRunTimes(t *testing.T) {
	p := NewPool(2)
	t.Cleanup(p.Close)
	_, ok := p.MeanRun()
	require.False(t, ok)
	for range 4 {
		p.Submit(func() { time.Sleep(20 * time.Millisecond) })
	}
	p.Wait()
	mean, ok := p.MeanRun()
	require.True(t, ok)
	require.GreaterOrEqual(t, mean, 20*time.Millisecond)
	t.Logf("mean run of four 20 ms sleeps: %s", mean)
}

func TestPoolRunsAtMostSizeAndKeepsOrder(t *testing.T) {
	t.Parallel()
	p := NewPool(2)
	t.Cleanup(p.Close)
	// Each function runs until released, one at a time: a released one
	// frees its worker, which takes the head of the queue. (Releasing all
	// at once let two workers race to report which they took: the order
	// seen was not the order taken.)
	var releases [10]chan struct{}
	for i := range releases {
		releases[i] = make(chan struct{})
	}
	started := make(chan int, 10)
	var running, peak atomic.Int32
	for i := range 10 {
		p.Submit(func() {
			n := running.Add(1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			started <- i
			<-releases[i]
			running.Add(-1)
		})
	}
	run, wait := p.Stats()
	require.Equal(t, 2, run)
	require.Equal(t, 8, wait)
	// The first two start in either order; the queue then drains in order.
	require.ElementsMatch(t, []int{0, 1}, []int{<-started, <-started})
	for i := range 8 {
		close(releases[i])
		require.Equal(t, i+2, <-started, "after %d ended", i)
	}
	close(releases[8])
	close(releases[9])
	p.Wait()
	require.Equal(t, int32(2), peak.Load())
}

func TestCallReportsSuccessErrorAndPanic(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	ctx := context.Background()

	require.NoError(t, Call(ctx, clock, time.Minute, func(context.Context) error { return nil }, nil).Err)

	boom := errors.New("boom")
	require.ErrorIs(t, Call(ctx, clock, time.Minute, func(context.Context) error { return boom }, nil).Err, boom)

	out := Call(ctx, clock, 0, func(context.Context) error { panic("nil map") }, nil)
	var pe *PanicError
	require.ErrorAs(t, out.Err, &pe)
	require.Equal(t, "nil map", pe.Value)
	require.Contains(t, out.Err.Error(), "executor_test.go")
}

func TestCallTimesOutAHandlerThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	clock := fakeclock.New(start)
	unblock := make(chan struct{})
	lateErr := make(chan error, 1)
	result := make(chan Outcome, 1)
	go func() {
		result <- Call(context.Background(), clock, 5*time.Second, func(context.Context) error {
			<-unblock // ignores ctx on purpose
			return errors.New("too late")
		}, func(err error) { lateErr <- err })
	}()
	waitDeadlineArmed(t, clock)
	clock.Advance(5 * time.Second)
	out := <-result
	require.True(t, out.TimedOut())
	require.Equal(t, start.Add(5*time.Second), out.Finished)
	require.Contains(t, out.Err.Error(), "5s")
	close(unblock)
	require.EqualError(t, <-lateErr, "too late")
}

func TestCallCancelsTheHandlerContextAtTheDeadline(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	result := make(chan Outcome, 1)
	seen := make(chan error, 1)
	go func() {
		result <- Call(context.Background(), clock, time.Second, func(ctx context.Context) error {
			<-ctx.Done()
			seen <- context.Cause(ctx)
			return ctx.Err()
		}, nil)
	}()
	waitDeadlineArmed(t, clock)
	clock.Advance(time.Second)
	require.True(t, (<-result).TimedOut())
	require.ErrorIs(t, <-seen, ErrTimedOut)
}

func TestBackoffDoublesCapsAndJitters(t *testing.T) {
	t.Parallel()
	b := Backoff{Base: time.Second, Max: 10 * time.Second}
	var got []time.Duration
	for a := 1; a <= 6; a++ {
		got = append(got, b.Delay(a, nil))
	}
	require.Equal(t, []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, got)

	b.Jitter = 0.2
	require.Equal(t, 3200*time.Millisecond, b.Delay(3, func() float64 { return 0 }))
	require.Equal(t, 4*time.Second, b.Delay(3, func() float64 { return 0.5 }))
	require.Equal(t, 4800*time.Millisecond, b.Delay(3, func() float64 { return 1 }))
}

// Rate is the pace at which the pool starts queued functions while it has
// a queue: a spell of 40 starts in 40 ms is 1,000 a second. A spell of a
// few (fewer than minSpell) tells nothing.
func TestPoolRateIsThePaceOfItsBusySpells(t *testing.T) {
	t.Parallel()
	p := NewPool(2)
	t.Cleanup(p.Close)
	var clock atomic.Int64
	p.now = func() time.Time { return time.Unix(0, clock.Load()) }
	spell := func(queued int, took time.Duration) {
		block := make(chan struct{})
		for range 2 {
			p.Submit(func() { <-block }) // both workers busy
		}
		for range queued {
			p.Submit(func() {})
		}
		clock.Add(int64(took))
		close(block)
		p.Wait()
	}
	spell(minSpell-1, 10*time.Millisecond)
	_, ok := p.Rate()
	require.False(t, ok, "a spell of %d starts", minSpell-1)
	spell(40, 40*time.Millisecond)
	rate, ok := p.Rate()
	require.True(t, ok)
	require.InDelta(t, 1000, rate, 0.001)
	spell(40, 10*time.Millisecond) // 4,000 a second: the average moves a quarter of the way
	rate, _ = p.Rate()
	require.InDelta(t, 1750, rate, 0.001)
}

// waitDeadlineArmed waits until Call has armed its deadline, the one timer
// it keeps on the clock while the function runs.
func waitDeadlineArmed(t *testing.T, clock *fakeclock.Clock) {
	t.Helper()
	const callTimers = 1 // Call's deadline
	require.NoError(t, clock.BlockUntil(context.Background(), callTimers))
}

// A pool keeps the workers that ran out of work, up to its size, and
// hands them the next functions rather than starting goroutines; Close
// ends them (TestMain's goleak fails the package if not), and a function
// submitted after it still runs.
func TestPoolParksItsWorkersAndCloseEndsThem(t *testing.T) {
	t.Parallel()
	p := NewPool(3)
	parked := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.parked)
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		p.Submit(wg.Done)
	}
	wg.Wait()
	p.Wait() // nothing runs: every worker has parked, in the same hold of mu
	require.Equal(t, 3, parked(), "the three workers the five functions ran on")
	ran := make(chan struct{})
	p.Submit(func() { close(ran) })
	<-ran
	p.Wait()
	require.Equal(t, 3, parked(), "the next function ran on a parked worker, parked again")
	p.Close()
	require.Zero(t, parked())
	after := make(chan struct{})
	p.Submit(func() { close(after) })
	<-after
	p.Wait()
	require.Zero(t, parked(), "a closed pool parks none")
}
