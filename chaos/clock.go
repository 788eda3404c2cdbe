package main

import (
	"fmt"
	"time"
)

// The clock profile (issue 24, "Clock correction"): the three replicas run
// clocks off by +30 s, −30 s and +5 min (replica's -skew), as hosts whose
// NTP failed, and correct them by the database's (xtimer's
// Options.ClockReference, on by default). No other fault: every fire runs
// once, and starts within the usual lateness of the real time, which the
// harness measures on its own clock from the start times the replicas
// write (real time, not their skewed clocks: replica/main.go).
func init() {
	profiles["clock"] = profile{
		name: "clock", replicas: 3, tasks: 50, length: 75 * time.Second,
		skews: []time.Duration{30 * time.Second, -30 * time.Second, 5 * time.Minute},
	}
}

// Lateness bounds of a profile with skews: a replica that ran on its own
// clock started fires 30 s early, or a minute late.
const (
	clockEarliest = -250 * time.Millisecond // no fire starts earlier than this
	clockLateP99  = 2 * time.Second
)

// skewOf is the clock offset replica idx runs with: the profile's, or
// skewOffset on the last replica of a profile without skews.
func (h *harness) skewOf(idx int) time.Duration {
	if h.prof.skews != nil {
		return h.prof.skews[idx%len(h.prof.skews)]
	}
	if idx == h.prof.replicas-1 {
		return skewOffset
	}
	return 0
}

// clockLateness checks, in a profile with skews, that the corrected
// clocks start fires on real time: none early by more than clockEarliest,
// and the 99th percentile within clockLateP99. lateness is in ms.
func (h *harness) clockLateness(lateness []int64) *broken {
	if h.prof.skews == nil || len(lateness) == 0 {
		return nil
	}
	b := &broken{promise: "fires start on real time under skewed clocks"}
	if early := percentile(lateness, 0); early < clockEarliest.Milliseconds() {
		b.n++
		b.examples = append(b.examples, fmt.Sprintf("a fire started %d ms early (bound %d ms)", -early, -clockEarliest.Milliseconds()))
	}
	if p99 := percentile(lateness, 0.99); p99 > clockLateP99.Milliseconds() {
		b.n++
		b.examples = append(b.examples, fmt.Sprintf("late p99 %d ms (bound %d ms)", p99, clockLateP99.Milliseconds()))
	}
	if b.n == 0 {
		return nil
	}
	return b
}
