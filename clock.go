package xtimer

import (
	"time"

	"github.com/xtimer-go/xtimer/internal/engine"
)

// Clock is the source of time for everything a Scheduler does: the tick loop,
// the per-fire timers, lateness, lock expiry of the in-process Locker. The
// default is SystemClock; tests inject internal/fakeclock so that timing
// tests are exact and never sleep.
//
// A Clock must be safe for concurrent use. One that also has a method
// AfterFunc(d time.Duration, f func()) interface{ Stop() bool }, calling f
// on a goroutine of its own once d has elapsed as time.AfterFunc does,
// times each handler's attempt with it; any other waits on one of its
// timers with a goroutine per attempt. SystemClock has it.
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// NewTimer returns a Timer that sends the instant it fires on its
	// channel once d has elapsed. A d of zero or less fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a single-shot timer created by a Clock, with the semantics of
// *time.Timer since Go 1.23: after Stop or Reset returns, no stale value is
// received from C.
//
// Timer is an alias of an interface literal rather than a named type so that
// a Clock implemented in another package (internal/fakeclock, or a user's
// own) can return it without importing xtimer: identical interface literals
// are the same type.
type Timer = interface {
	// C returns the channel on which the firing instant is delivered.
	C() <-chan time.Time
	// Stop prevents the Timer from firing. It returns true if the call
	// stopped the timer, false if it had already fired (and the value was
	// received) or been stopped.
	Stop() bool
	// Reset re-arms the Timer to fire after d, discarding an undelivered
	// value. It returns true if the timer was armed before the call.
	Reset(d time.Duration) bool
}

// SystemClock returns the Clock backed by the time package, the default for
// Options.Clock.
func SystemClock() Clock { return engine.SystemClock{} }
