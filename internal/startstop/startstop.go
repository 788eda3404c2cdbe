// Package startstop is the one way the engine's components start and stop
// their goroutines.
//
// A component embeds a Base and starts its loops with Base.Start; Stop
// cancels their context and returns once every loop has returned, so no
// component counts goroutines by hand. A loop that waits on the injected
// clock says how many timers it arms while it waits (Loop.Timers): the sum
// over the running components is what a test with a fake clock waits for
// before it moves time (Base.Timers), so that no test names a count.
//
// Kick is the coalescing wake-up a component's loop sleeps on (a queued
// status update, an alert raised); Every is the loop that calls a function
// once per period of the clock; Drain is the retrying flush of a
// component's last writes at Stop.
package startstop

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Timer is the timer of a Clock. It is an alias of an interface literal,
// as the root package's Timer is, so that the two are the same type.
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Clock is the source of time of a loop: the Scheduler's Options.Clock.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Loop is one goroutine of a component.
type Loop struct {
	// Run runs until ctx ends.
	Run func(ctx context.Context)
	// Timers is how many timers of the injected clock Run keeps armed
	// while it waits for work: 1 for a loop that sleeps on one clock
	// timer, 0 for one that sleeps on channels or on real time only.
	Timers int
}

// ErrStarted is returned by Start on a Base that runs already.
var ErrStarted = errors.New("startstop: already started")

// Base runs the loops of one component. Its zero value is ready to use; a
// Base can be started again after Stop.
type Base struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	timers  int
	running sync.WaitGroup
}

// Start runs each loop in a goroutine of its own, with a context that
// Stop cancels (ctx's values are kept; its cancellation is not: a
// component stops when its owner stops it, not when the context of the
// call that started it ends).
func (b *Base) Start(ctx context.Context, loops ...Loop) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil {
		return ErrStarted
	}
	ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.timers = 0
	for _, l := range loops {
		b.timers += l.Timers
		b.running.Add(1)
		go func() {
			defer b.running.Done()
			l.Run(ctx)
		}()
	}
	return nil
}

// Stop cancels the loops' context and waits until every loop returned. It
// does nothing on a Base that is not running.
func (b *Base) Stop() {
	b.mu.Lock()
	cancel := b.cancel
	b.cancel = nil
	b.timers = 0
	b.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	b.running.Wait()
}

// Timers is the number of clock timers the running loops keep armed while
// they wait; 0 when stopped.
func (b *Base) Timers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timers
}

// Kick is a coalescing wake-up: any number of pokes before the loop looks
// wake it once. Make it with NewKick.
type Kick chan struct{}

// NewKick returns a Kick with nothing pending.
func NewKick() Kick { return make(Kick, 1) }

// Poke wakes the loop waiting on the Kick, or leaves one wake-up pending
// for it; it never blocks.
func (k Kick) Poke() {
	select {
	case k <- struct{}{}:
	default:
	}
}

// Every returns the loop that calls do with the clock's time every d,
// until its context ends. d is counted from the end of the previous call,
// so a slow round delays the next rather than piling up.
func Every(clock Clock, d time.Duration, do func(ctx context.Context, now time.Time)) Loop {
	return Loop{Timers: 1, Run: func(ctx context.Context) {
		timer := clock.NewTimer(d)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C():
			}
			do(ctx, clock.Now())
			timer.Reset(d)
		}
	}}
}

// Pause waits d of real time, or until ctx ends, and reports whether the
// whole of d went by. Pauses between writes are for the database's sake,
// not the schedule's, so they do not follow the injected clock (a test
// that freezes time still sees its rows written).
func Pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Drain calls flush until it succeeds or ctx ends, pausing between tries,
// and returns the last error joined with ctx's when it gives up. It is
// the last write of a component's Stop: nothing queued is dropped while
// the caller is willing to wait.
func Drain(ctx context.Context, every time.Duration, flush func(context.Context) error) error {
	for {
		err := flush(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !Pause(ctx, every) {
			return errors.Join(err, ctx.Err())
		}
	}
}
