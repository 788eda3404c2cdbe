package executor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Clock is the subset of xtimer.Clock that Call needs; xtimer.Clock satisfies it.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the same interface literal as xtimer.Timer.
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// PanicError is the error of an attempt whose handler panicked.
type PanicError struct {
	Value any
	Stack []byte
}

// Error includes the panic value and the stack, so the execution row says
// where the handler failed.
func (e *PanicError) Error() string {
	return fmt.Sprintf("panic: %v\n\n%s", e.Value, e.Stack)
}

// ErrTimedOut is the error of an attempt that did not return by its deadline.
var ErrTimedOut = errors.New("handler did not return before its timeout")

// Outcome is what one attempt came to.
type Outcome struct {
	// Err is nil on success, a *PanicError after a panic, ErrTimedOut (wrapped
	// with the timeout) after the deadline, or the handler's own error.
	Err error
	// Started and Finished bound the attempt; Finished is the deadline for a
	// timed-out attempt.
	Started, Finished time.Time
}

// TimedOut reports whether the attempt hit its deadline.
func (o Outcome) TimedOut() bool { return errors.Is(o.Err, ErrTimedOut) }

// Call runs fn once with a context that is cancelled at timeout (measured on
// clock; 0 means no timeout), when ctx ends, or when fn returns. A panic in
// fn becomes a *PanicError. When fn ignores its context and is still
// running at the deadline, Call returns a timed-out Outcome at once; fn's
// late result is passed to late (which may be nil) when it finally
// returns, and is otherwise ignored.
//
// Without a timeout there is no deadline to return at, so fn runs on the
// caller's goroutine; with one it runs on a goroutine of its own, which
// Call can leave behind at the deadline.
func Call(ctx context.Context, clock Clock, timeout time.Duration, fn func(context.Context) error, late func(error)) Outcome {
	if timeout <= 0 {
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		started := clock.Now()
		err := recovered(runCtx, fn)
		return Outcome{Err: err, Started: started, Finished: clock.Now()}
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	started := clock.Now()
	done := make(chan error, 1)
	go func() { done <- recovered(runCtx, fn) }()
	t := clock.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		cancel(nil)
		return Outcome{Err: err, Started: started, Finished: clock.Now()}
	case <-t.C():
		err := fmt.Errorf("%w (%s)", ErrTimedOut, timeout)
		cancel(err)
		go func() {
			lateErr := <-done
			if late != nil {
				late(lateErr)
			}
		}()
		return Outcome{Err: err, Started: started, Finished: clock.Now()}
	}
}

// recovered returns fn's error, or a *PanicError if fn panics.
func recovered(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}
