package executor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
)

func TestRunEndsOnTheCallersGoroutineAsTheFunctionReturns(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	noAway := func() func() { t.Error("away called for a function that returned in time"); return nil }
	run := func(timeout time.Duration, fn func(context.Context) error) Outcome {
		var got *Outcome
		Run(context.Background(), clock, timeout, fn, func(o Outcome) { got = &o }, noAway, nil)
		require.NotNil(t, got, "then did not run before Run returned")
		return *got
	}
	for _, timeout := range []time.Duration{0, time.Minute} {
		var seen context.Context
		require.NoError(t, run(timeout, func(ctx context.Context) error { seen = ctx; return nil }).Err)
		require.ErrorIs(t, seen.Err(), context.Canceled, "the context outlived the function")

		boom := errors.New("boom")
		require.ErrorIs(t, run(timeout, func(context.Context) error { return boom }).Err, boom)

		out := run(timeout, func(context.Context) error { panic("nil map") })
		var pe *PanicError
		require.ErrorAs(t, out.Err, &pe)
		require.Equal(t, "nil map", pe.Value)
		require.Contains(t, out.Err.Error(), "run_test.go")
		require.Zero(t, clock.Timers(), "a deadline left armed")
	}
}

func TestRunEndsAFunctionPastItsDeadlineAtTheDeadline(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	clock := fakeclock.New(start)
	unblock, returned := make(chan struct{}), make(chan struct{})
	var order []string // appended to in turn: away, then; late, back
	ended := make(chan Outcome, 1)
	cause := make(chan error, 1)
	lateErr := make(chan error, 1)
	go func() {
		defer close(returned)
		Run(context.Background(), clock, 5*time.Second, func(ctx context.Context) error {
			<-unblock // ignores ctx on purpose
			cause <- context.Cause(ctx)
			return errors.New("too late")
		}, func(o Outcome) {
			order = append(order, "then")
			ended <- o
		}, func() func() {
			order = append(order, "away")
			return func() { order = append(order, "back") }
		}, func(err error) {
			order = append(order, "late")
			lateErr <- err
		})
	}()
	waitDeadlineArmed(t, clock)
	clock.Advance(5 * time.Second)
	out := <-ended
	require.True(t, out.TimedOut())
	require.Equal(t, start.Add(5*time.Second), out.Finished)
	require.Contains(t, out.Err.Error(), "5s")
	select {
	case <-returned:
		t.Fatal("Run returned while its function still ran")
	default:
	}
	close(unblock)
	require.ErrorIs(t, <-cause, ErrTimedOut)
	require.EqualError(t, <-lateErr, "too late")
	<-returned
	require.Equal(t, []string{"away", "then", "late", "back"}, order)
}

// A function that returns as its deadline passes ends once, one way or
// the other: then runs once, and late, away and back only if then had the
// timed-out outcome.
func TestRunEndsOnceWhenTheFunctionReturnsAtItsDeadline(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	ways := map[bool]int{}
	for range 300 {
		var thens, lates, aways, backs atomic.Int32
		ended := make(chan Outcome, 2)
		release := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(context.Background(), clock, time.Second, func(context.Context) error {
				<-release
				return nil
			}, func(o Outcome) { thens.Add(1); ended <- o },
				func() func() { aways.Add(1); return func() { backs.Add(1) } },
				func(error) { lates.Add(1) })
		}()
		waitDeadlineArmed(t, clock)
		go close(release)
		clock.Advance(time.Second)
		<-done
		out := <-ended
		timedOut := out.TimedOut()
		ways[timedOut]++
		require.Equal(t, int32(1), thens.Load())
		want := int32(0)
		if timedOut {
			want = 1
		}
		require.Equal(t, []int32{want, want, want}, []int32{lates.Load(), aways.Load(), backs.Load()})
	}
	t.Logf("ended by the return %d times, by the deadline %d times", ways[false], ways[true])
}

// onlyTimers is a Clock without AfterFunc.
type onlyTimers struct{ c *fakeclock.Clock }

func (o onlyTimers) Now() time.Time                 { return o.c.Now() }
func (o onlyTimers) NewTimer(d time.Duration) Timer { return o.c.NewTimer(d) }

func TestAfterFuncWaitsOnATimerOfAClockWithoutOne(t *testing.T) {
	t.Parallel()
	fake := fakeclock.New(time.Unix(1_800_000_000, 0))
	clock := onlyTimers{fake}
	fired := make(chan string, 2)
	AfterFunc(clock, time.Second, func() { fired <- "kept" })
	stopped := AfterFunc(clock, time.Second, func() { fired <- "stopped" })
	require.True(t, stopped.Stop())
	require.False(t, stopped.Stop())
	fake.Advance(time.Second)
	require.Equal(t, "kept", <-fired)
	require.Empty(t, fired)
	// Its goroutines are gone: TestMain's goleak fails the package if not.
}

func TestPoolOverrunStartsTheNextBesideTheFunctionLeft(t *testing.T) {
	t.Parallel()
	p := NewPool(1)
	t.Cleanup(p.Close)
	var (
		others, peak atomic.Int32 // functions running besides the one left
		started      = make(chan string, 4)
		release      = map[string]chan struct{}{}
	)
	for _, name := range []string{"left", "b", "c", "d"} {
		release[name] = make(chan struct{})
	}
	overrun, backNow := make(chan struct{}), make(chan struct{})
	p.Submit(func() {
		started <- "left"
		<-overrun
		back := p.Overrun()
		<-backNow
		back()
		<-release["left"]
	})
	other := func(name string) func() {
		return func() {
			peak.Store(max(peak.Load(), others.Add(1)))
			started <- name
			<-release[name]
			others.Add(-1)
		}
	}
	p.Submit(other("b"))
	p.Submit(other("c"))
	require.Equal(t, "left", <-started)
	running, waiting := p.Stats()
	require.Equal(t, []int{1, 2}, []int{running, waiting})

	close(overrun) // left goes past its deadline: b starts beside it
	require.Equal(t, "b", <-started)
	running, waiting = p.Stats()
	require.Equal(t, []int{1, 1}, []int{running, waiting}, "the function left counts as running")

	close(release["b"]) // c takes b's place, still beside left
	require.Equal(t, "c", <-started)
	close(backNow) // left counts again: the pool is over its size until one ends
	p.Submit(other("d"))
	close(release["left"]) // left's worker ends, and does not take d
	running, waiting = waitStats(t, p, func(r, w int) bool { return r == 1 })
	require.Equal(t, []int{1, 1}, []int{running, waiting})
	close(release["c"])
	require.Equal(t, "d", <-started)
	close(release["d"])
	p.Wait()
	require.Equal(t, int32(1), peak.Load())
}

// waitStats waits until the pool's Stats satisfy ok, and returns them.
func waitStats(t *testing.T, p *Pool, ok func(running, waiting int) bool) (running, waiting int) {
	t.Helper()
	require.Eventually(t, func() bool {
		running, waiting = p.Stats()
		return ok(running, waiting)
	}, 10*time.Second, time.Millisecond)
	return running, waiting
}
