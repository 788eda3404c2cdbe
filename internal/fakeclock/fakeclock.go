// Package fakeclock is a manual clock for tests: time moves only when the
// test calls Advance or Set, and timers fire then, in deadline order. It
// satisfies xtimer.Clock without importing xtimer (xtimer.Timer is an alias
// of the same interface literal as Timer here).
//
// The usual pattern: start the code under test, wait with BlockUntil until
// it has armed the timers it should, Advance, assert, repeat. Advance does
// not wait for the receivers of fired timers: a timer that code re-arms
// after a fire is armed at the clock's time after Advance returned, so a
// test steps one period at a time (BlockUntil, Advance) rather than jumping
// across several.
package fakeclock

import (
	"context"
	"sync"
	"time"
)

// Timer is a single-shot timer; it is the same type as xtimer.Timer.
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Clock is a manual clock, safe for concurrent use. Create it with New.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64        // arming order, breaks ties between equal deadlines
	armed   []*fakeTimer  // timers waiting for their deadline, unordered
	changed chan struct{} // closed and replaced whenever len(armed) changes
}

// New returns a Clock whose Now is start until the test moves it.
func New(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's current instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a Timer that fires when the clock reaches Now()+d. A d of
// zero or less fires at once: the value is on C before NewTimer returns.
func (c *Clock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: c, ch: make(chan time.Time, 1), index: -1}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arm(t, d)
	return t
}

// AfterFunc calls f on a goroutine of its own when the clock reaches
// Now()+d, as time.AfterFunc does; Stop on what it returns keeps f from
// being called. It counts as an armed timer until then.
func (c *Clock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	t := &fakeTimer{clock: c, fn: f, index: -1}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arm(t, d)
	return t
}

// Advance moves the clock forward by d, firing every timer whose deadline is
// reached, earliest first (ties in arming order). Each timer sends its own
// deadline, not the time Advance ends at, so a receiver that measures
// lateness from the value sees exactly zero. A negative d panics.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic("fakeclock: Advance with a negative duration; use Set to move back")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the clock to t. Moving forward fires timers as Advance does.
// Moving back fires nothing; armed timers keep their deadlines, so they fire
// later in elapsed fake time (a wall-clock step back, as a test of clock
// skew wants it).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(t)
}

// setLocked fires the timers due by t, in deadline order, then moves now to
// t. c.mu is held.
func (c *Clock) setLocked(t time.Time) {
	for {
		next := c.earliest()
		if next < 0 || c.armed[next].when.After(t) {
			break
		}
		ft := c.armed[next]
		c.disarm(next)
		ft.fire(ft.when)
	}
	c.now = t
}

// Timers returns the number of timers armed and not yet fired or stopped.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.armed)
}

// BlockUntil waits until at least n timers are armed, or ctx ends, in which
// case it returns ctx.Err(). Use it to know the code under test is waiting
// before calling Advance.
func (c *Clock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		armed, changed := len(c.armed), c.changed
		c.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// arm schedules t at now+d, or fires it at once when d <= 0. c.mu is held.
func (c *Clock) arm(t *fakeTimer, d time.Duration) {
	if d <= 0 {
		t.fire(c.now)
		return
	}
	c.seq++
	t.when, t.seq, t.index = c.now.Add(d), c.seq, len(c.armed)
	c.armed = append(c.armed, t)
	c.notify()
}

// disarm removes the armed timer at index i. c.mu is held.
func (c *Clock) disarm(i int) {
	last := len(c.armed) - 1
	c.armed[i].index = -1 // the removed timer: Stop and Reset must see it disarmed
	if i != last {
		c.armed[i] = c.armed[last] // the last timer moves into the hole
		c.armed[i].index = i
	}
	c.armed[last] = nil
	c.armed = c.armed[:last]
	c.notify()
}

// earliest returns the index of the armed timer that fires first, or -1.
// A linear scan: tests arm tens or hundreds of timers, not millions.
func (c *Clock) earliest() int {
	best := -1
	for i, t := range c.armed {
		if best < 0 || t.when.Before(c.armed[best].when) ||
			(t.when.Equal(c.armed[best].when) && t.seq < c.armed[best].seq) {
			best = i
		}
	}
	return best
}

func (c *Clock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// fakeTimer is guarded by its clock's mutex.
type fakeTimer struct {
	clock *Clock
	ch    chan time.Time // capacity 1; holds a fired, undelivered value
	fn    func()         // AfterFunc's function, called instead of a send on ch
	when  time.Time
	seq   uint64
	index int // position in clock.armed, -1 when not armed
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// fire sends at on C, or calls the AfterFunc's function. It never blocks:
// C is empty while the timer is armed.
func (t *fakeTimer) fire(at time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	t.ch <- at
}

// Stop follows *time.Timer since Go 1.23: it returns true if the timer was
// armed or had fired with its value still undelivered (which it discards).
func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	return t.stopLocked()
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	wasActive := t.stopLocked()
	t.clock.arm(t, d)
	return wasActive
}

func (t *fakeTimer) stopLocked() bool {
	active := false
	if t.index >= 0 && t.index < len(t.clock.armed) && t.clock.armed[t.index] == t {
		t.clock.disarm(t.index)
		active = true
	}
	select {
	case <-t.ch:
		active = true
	default:
	}
	return active
}
