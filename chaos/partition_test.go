package main

import (
	"testing"
	"time"
)

// TestFailoverFiguresPerKind checks maxFailover's windows and figures: a
// kill's window ends at the next fault, a slow link's figure is reported
// per kind but not bounded.
func TestFailoverFiguresPerKind(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000).Add(300 * time.Millisecond)
	sec := func(n int) int64 { return t0.Truncate(time.Second).Add(time.Duration(n) * time.Second).UnixMilli() }
	code := taskCode(0)
	invs := map[fireKey][]invocation{
		{code, sec(2), 0}:  {{started: sec(2) + 1200}},                     // taken over 1.2 s late
		{code, sec(7), 0}:  {{started: sec(7) + 9000}},                     // after the next fault: not the kill's
		{code, sec(21), 0}: {{started: sec(21) + 3400}},                    // during the slow link
		{code, sec(22), 0}: {{started: sec(22) + 500}, {started: sec(23)}}, // the first start counts
	}
	h := &harness{
		begun: []time.Time{t0.Add(-10 * time.Millisecond), t0.Add(5 * time.Second), t0.Add(20 * time.Second)},
		failovers: []failoverRecord{
			{kind: faultKill, at: t0, until: t0.Add(15 * time.Second), victim: "r0-g1", codes: map[string]bool{code: true}, bounded: true},
			{kind: faultSlowDB, at: t0.Add(20 * time.Second), until: t0.Add(30 * time.Second), victim: "r1-g1", codes: map[string]bool{code: true}},
		},
	}
	worst, perKind := h.maxFailover(invs)
	if worst != 1.2 {
		t.Errorf("max_failover_s = %.1f, want 1.2 (the fire due after the next fault is not the kill's, the slow link is not bounded)", worst)
	}
	if got, want := perKind.String(), "kill:1.2,slow_db:3.4"; got != want {
		t.Errorf("failover_s = %s, want %s", got, want)
	}
	if got := (failoverFigures{}).String(); got != "none" {
		t.Errorf("failover_s without faults = %s, want none", got)
	}
}
