package fakeclock

import (
	"sync"
	"time"
)

// NewLockstep returns a Lockstep on a fake clock set to start.
func NewLockstep(start time.Time) *Lockstep {
	return &Lockstep{fake: New(start), timers: map[*lockstepTimer]bool{}}
}

// Advance moves the fake clock forward by d.
func (c *Lockstep) Advance(d time.Duration) { c.fake.Advance(d) }

// Lockstep is a fake Clock as the replicas of a test fleet see it.
// It knows which of their timers fired and were not waited on again yet,
// so a test moves time only once every replica's loops are idle (Idle): the
// fake clock's count of armed timers cannot tell, as a running handler's
// timeout timer counts too. Each Reset takes a fresh fake timer, which
// also keeps clear of fakeclock's disarm, which loses track of the timer
// it moves into the freed place (a later Stop of that timer leaves it
// armed, a Reset arms it twice, and its second firing blocks the clock).
type Lockstep struct {
	fake   *Clock
	mu     sync.Mutex
	timers map[*lockstepTimer]bool
}

type lockstepTimer struct {
	c     *Lockstep
	cur   Timer     // guarded by c.mu, like the fields below
	due   time.Time // when cur fires; zero once stopped
	reset bool      // a loop's timer, not a handler's timeout: loops reset theirs
}

// Now returns the fake clock's instant.
func (c *Lockstep) Now() time.Time { return c.fake.Now() }

// NewTimer returns a timer that takes a fresh fake timer at each Reset.
func (c *Lockstep) NewTimer(d time.Duration) Timer {
	t := &lockstepTimer{c: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.arm(d)
	c.timers[t] = true
	return t
}

// Idle reports whether loops timers are there, at least loops of them,
// and none has fired without being waited on again.
func (c *Lockstep) Idle(loops int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.fake.Now()
	for t := range c.timers {
		switch {
		case t.due.IsZero() && !t.reset:
			delete(c.timers, t) // a handler's timeout, done with
		case t.due.IsZero() || !t.due.After(now):
			return false // its loop is at work
		}
	}
	return len(c.timers) >= loops
}

// ForgetStopped drops the loop timers that are stopped: right after a
// replica stopped, with the others idle, those are the stopped replica's.
func (c *Lockstep) ForgetStopped() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range c.timers {
		if t.due.IsZero() {
			delete(c.timers, t)
		}
	}
}

// arm replaces the fake timer. c.mu is held.
func (t *lockstepTimer) arm(d time.Duration) {
	if t.cur != nil {
		t.cur.Stop()
	}
	t.cur, t.due = t.c.fake.NewTimer(d), t.c.fake.Now().Add(d)
}

func (t *lockstepTimer) C() <-chan time.Time {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.cur.C()
}

func (t *lockstepTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.cur.Stop()
	t.due = time.Time{}
	return was
}

func (t *lockstepTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.due.IsZero() && t.due.After(t.c.fake.Now())
	t.reset = true
	t.arm(d)
	return was
}
