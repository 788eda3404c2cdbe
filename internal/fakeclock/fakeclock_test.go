package fakeclock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
)

var start = time.Date(2024, 3, 10, 9, 0, 0, 0, time.UTC)

// fired returns the value waiting on t's channel, if any, without blocking:
// the fake clock delivers before Advance returns, so there is nothing to wait for.
func fired(t fakeclock.Timer) (time.Time, bool) {
	select {
	case v := <-t.C():
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestClockNowMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	require.Equal(t, start, c.Now())
	c.Advance(90 * time.Second)
	require.Equal(t, start.Add(90*time.Second), c.Now())
	c.Set(start.Add(-time.Hour))
	require.Equal(t, start.Add(-time.Hour), c.Now())
	require.Panics(t, func() { c.Advance(-time.Second) })
}

func TestClockTimerFiresAtItsDeadlineWithTheDeadline(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	tm := c.NewTimer(time.Second)
	require.Equal(t, 1, c.Timers())

	c.Advance(time.Second - time.Nanosecond)
	_, ok := fired(tm)
	require.False(t, ok, "fired a nanosecond early")

	c.Advance(10 * time.Second)
	v, ok := fired(tm)
	require.True(t, ok)
	require.Equal(t, start.Add(time.Second), v, "the value is the deadline, not the time Advance reached")
	require.Equal(t, 0, c.Timers())

	c.Advance(time.Hour)
	_, ok = fired(tm)
	require.False(t, ok, "a timer fires once")
}

func TestClockAdvanceFiresEveryDueTimerAndNoOther(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	delays := []time.Duration{3 * time.Second, time.Second, 2 * time.Second, 2 * time.Second, 5 * time.Second}
	timers := make([]fakeclock.Timer, len(delays))
	for i, d := range delays {
		timers[i] = c.NewTimer(d)
	}

	c.Advance(3 * time.Second)
	for i, d := range delays {
		v, ok := fired(timers[i])
		if d <= 3*time.Second {
			require.True(t, ok, "timer %d (%v) should have fired", i, d)
			require.Equal(t, start.Add(d), v)
		} else {
			require.False(t, ok, "timer %d (%v) fired early", i, d)
		}
	}
	require.Equal(t, 1, c.Timers())
	c.Set(start.Add(5 * time.Second))
	v, ok := fired(timers[4])
	require.True(t, ok)
	require.Equal(t, start.Add(5*time.Second), v)
}

func TestClockZeroOrNegativeDurationFiresAtOnce(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	for _, d := range []time.Duration{0, -time.Second} {
		tm := c.NewTimer(d)
		v, ok := fired(tm)
		require.True(t, ok, "d=%v", d)
		require.Equal(t, start, v)
		require.Equal(t, 0, c.Timers())

		require.False(t, tm.Reset(d), "received timer was not armed")
		_, ok = fired(tm)
		require.True(t, ok, "Reset(%v) fires at once", d)
	}
}

func TestClockStop(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)

	armed := c.NewTimer(time.Second)
	require.True(t, armed.Stop(), "stopping an armed timer")
	require.False(t, armed.Stop(), "stopping twice")
	require.Equal(t, 0, c.Timers())
	c.Advance(time.Hour)
	_, ok := fired(armed)
	require.False(t, ok, "a stopped timer never fires")

	undelivered := c.NewTimer(time.Second)
	c.Advance(time.Second)
	require.True(t, undelivered.Stop(), "a fired but unreceived value counts as stopped (Go 1.23 timers)")
	_, ok = fired(undelivered)
	require.False(t, ok, "no stale value after Stop")

	received := c.NewTimer(time.Second)
	c.Advance(time.Second)
	_, ok = fired(received)
	require.True(t, ok)
	require.False(t, received.Stop(), "stopping a timer whose value was received")
}

func TestClockReset(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)

	tm := c.NewTimer(time.Second)
	c.Advance(500 * time.Millisecond)
	require.True(t, tm.Reset(time.Second), "reset of an armed timer")
	require.Equal(t, 1, c.Timers())
	c.Advance(500 * time.Millisecond)
	_, ok := fired(tm)
	require.False(t, ok, "the old deadline no longer fires")
	c.Advance(500 * time.Millisecond)
	v, ok := fired(tm)
	require.True(t, ok)
	require.Equal(t, start.Add(1500*time.Millisecond), v, "the new deadline counts from the Reset")

	require.False(t, tm.Reset(time.Second), "reset of a timer whose value was received")
	c.Advance(time.Second)
	require.True(t, tm.Reset(time.Second), "reset of a fired, unreceived timer")
	_, ok = fired(tm)
	require.False(t, ok, "no stale value after Reset")
	c.Advance(time.Second)
	v, ok = fired(tm)
	require.True(t, ok)
	require.Equal(t, start.Add(3500*time.Millisecond), v)
}

func TestClockSetBackFiresNothingAndKeepsDeadlines(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	tm := c.NewTimer(10 * time.Second)
	c.Set(start.Add(-time.Minute))
	_, ok := fired(tm)
	require.False(t, ok)
	c.Set(start.Add(9 * time.Second))
	_, ok = fired(tm)
	require.False(t, ok)
	c.Set(start.Add(10 * time.Second))
	v, ok := fired(tm)
	require.True(t, ok)
	require.Equal(t, start.Add(10*time.Second), v)
}

func TestClockBlockUntilWaitsForArmedTimers(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	got := make(chan time.Time, 3)
	for i := 1; i <= 3; i++ {
		go func() { got <- <-c.NewTimer(time.Duration(i) * time.Second).C() }()
	}
	require.NoError(t, c.BlockUntil(ctx, 3))
	require.Equal(t, 3, c.Timers())
	c.Advance(3 * time.Second)
	seen := map[time.Time]bool{}
	for range 3 {
		seen[<-got] = true
	}
	require.Equal(t, map[time.Time]bool{
		start.Add(time.Second): true, start.Add(2 * time.Second): true, start.Add(3 * time.Second): true,
	}, seen)
}

func TestClockBlockUntilReturnsWhenContextEnds(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	c.NewTimer(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.BlockUntil(ctx, 2), context.DeadlineExceeded)
	require.NoError(t, c.BlockUntil(ctx, 1), "already satisfied, even with ctx done")
}

// A ticking loop (the shape of the scheduler's): wait for the timer, then
// re-arm it. The test steps one period at a time and sees every tick.
func TestClockSteppedLoopSeesEveryTick(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ticks := make(chan time.Time)
	go func() {
		tm := c.NewTimer(time.Second)
		for i := 0; i < 5; i++ {
			v := <-tm.C()
			tm.Reset(time.Second)
			ticks <- v
		}
		tm.Stop()
		close(ticks)
	}()
	for i := 1; i <= 5; i++ {
		require.NoError(t, c.BlockUntil(ctx, 1))
		c.Advance(time.Second)
		require.Equal(t, start.Add(time.Duration(i)*time.Second), <-ticks)
	}
	_, open := <-ticks
	require.False(t, open)
}

// Many goroutines arm, reset, stop and wait on timers while the test
// advances the clock; run with -race.
func TestClockIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	const workers, rounds = 20, 30
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				d := time.Duration(1+(w+r)%7) * time.Millisecond
				tm := c.NewTimer(d)
				if r%3 == 0 {
					tm.Stop()
					tm.Reset(d)
				}
				v := <-tm.C()
				if v.Before(start) {
					t.Errorf("value %v before start", v)
				}
				_ = c.Now()
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-done:
			require.Equal(t, 0, c.Timers())
			return
		case <-deadline:
			t.Fatalf("workers did not finish; %d timers armed", c.Timers())
		default:
			c.Advance(time.Millisecond)
			time.Sleep(50 * time.Microsecond) // let workers re-arm; the fake itself never sleeps
		}
	}
}

// Stopping one timer moves the last armed timer into its place; the moved
// timer must still stop and reset as itself (it once lost its index, so a
// later Stop left it armed and a Reset armed it twice).
func TestClockStopKeepsTheMovedTimerUsable(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(start)
	first := c.NewTimer(time.Second)
	_ = c.NewTimer(2 * time.Second)
	moved := c.NewTimer(3 * time.Second)
	require.True(t, first.Stop())
	require.Equal(t, 2, c.Timers())
	require.False(t, first.Stop(), "a stopped timer stays stopped")
	require.True(t, moved.Stop())
	require.Equal(t, 1, c.Timers())
	require.False(t, moved.Reset(time.Second), "Reset of a stopped timer reports it was not armed")
	require.Equal(t, 2, c.Timers())
	c.Advance(time.Second)
	v, ok := fired(moved)
	require.True(t, ok)
	require.Equal(t, start.Add(time.Second), v)
	c.Advance(5 * time.Second)
	_, again := fired(moved)
	require.False(t, again, "the moved timer fires once")
}
