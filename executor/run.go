package executor

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// AfterFuncClock is a Clock that can also call a function once a duration
// has elapsed, on a goroutine of its own, as time.AfterFunc does. Run
// times a function with it, so that the function runs on the caller's
// goroutine and no other goroutine waits beside it.
type AfterFuncClock interface {
	Clock
	AfterFunc(d time.Duration, f func()) Stopper
}

// Stopper is what AfterFunc returns: Stop keeps the function from being
// called, and reports whether it did (false: it was called, or stopped,
// already). An alias of an interface literal, as Timer is, so that a clock
// in another package (internal/fakeclock) can return it without importing
// this one; *time.Timer is one.
type Stopper = interface{ Stop() bool }

// AfterFunc calls f on a goroutine of its own once d has elapsed on clock,
// unless it is stopped first: with the clock's own AfterFunc if it is an
// AfterFuncClock, else by a goroutine that waits on one of its timers.
func AfterFunc(clock Clock, d time.Duration, f func()) Stopper {
	if c, ok := clock.(AfterFuncClock); ok {
		return c.AfterFunc(d, f)
	}
	w := &timerFunc{t: clock.NewTimer(d), stop: make(chan struct{})}
	go func() {
		select {
		case <-w.t.C():
			f()
		case <-w.stop:
		}
	}()
	return w
}

// timerFunc is AfterFunc on a clock's timer.
type timerFunc struct {
	t    Timer
	stop chan struct{} // closed by the Stop that stopped t
}

func (w *timerFunc) Stop() bool {
	if !w.t.Stop() {
		return false
	}
	close(w.stop) // only once: t.Stop reports false after the first
	return true
}

// Run calls fn once, on the calling goroutine, with a context that is
// cancelled at timeout (measured on clock; 0 means no timeout), when ctx
// ends, or when fn returns, and hands what came of it to then. A panic in
// fn becomes a *PanicError.
//
// then runs once. Usually that is on this goroutine, as fn returns. If fn
// ignores its context and is still running at the deadline, then runs at
// the deadline instead, on the deadline's own goroutine, with a timed-out
// Outcome (Finished is the deadline). Before that, Run calls away (if not
// nil), so that the caller can give its place to other work (a pool's
// worker: Pool.Overrun). When fn finally returns, late (which may be nil)
// gets its result, back (what away returned, if not nil) is called, and
// Run returns.
func Run(ctx context.Context, clock Clock, timeout time.Duration, fn func(context.Context) error, then func(Outcome), away func() (back func()), late func(error)) {
	if timeout <= 0 {
		then(Call(ctx, clock, 0, fn, nil))
		return
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	r := &timedRun{clock: clock, timeout: timeout, cancel: cancel, then: then, away: away, started: clock.Now()}
	deadline := AfterFunc(clock, timeout, r.deadline)
	err := recovered(runCtx, fn)
	r.mu.Lock() // the deadline, if it came first, holds it until back is set
	overran, back := r.ended, r.back
	r.ended = true
	r.mu.Unlock()
	if !overran {
		deadline.Stop()
		cancel(nil)
		then(Outcome{Err: err, Started: r.started, Finished: clock.Now()})
		return
	}
	if late != nil {
		late(err)
	}
	if back != nil {
		back()
	}
}

// timedRun is one Run with a timeout.
type timedRun struct {
	clock   Clock
	timeout time.Duration
	cancel  context.CancelCauseFunc
	then    func(Outcome)
	away    func() (back func())
	started time.Time
	mu      sync.Mutex
	ended   bool   // by the function's return or by the deadline, whichever came first
	back    func() // set by deadline
}

// deadline ends r as timed out, unless its function returned first.
func (r *timedRun) deadline() {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.ended = true
	err := fmt.Errorf("%w (%s)", ErrTimedOut, r.timeout)
	r.cancel(err)
	if r.away != nil {
		r.back = r.away()
	}
	r.mu.Unlock()
	r.then(Outcome{Err: err, Started: r.started, Finished: r.clock.Now()})
}
