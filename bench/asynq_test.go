package main

import (
	"strings"
	"testing"
	"time"
)

func TestAsynqAdapter(t *testing.T) {
	// asynq's server checks an empty queue every second (TaskCheckInterval),
	// so the first fire may come a second or two after ready, and a fire
	// can start more than its 1 s period late: its handler, which learns
	// no scheduled instant from asynq, then records the next second
	// (asynq.go), one second with two records and one with none. Seen in
	// CI on a loaded machine: the 20 fires of one second recorded as the
	// next one's.
	_, dups := runPeerReplicas(t, newAsynq(), false, 5*time.Second, true)
	// Unique's lock is released when the task succeeds: a replica whose
	// timer fires after that enqueues the fire again. Reported, not
	// asserted.
	t.Logf("asynq duplicates: %d", dups)
}

func TestAsynqSpec(t *testing.T) {
	for _, tc := range []struct{ spec, want, err string }{
		{"* * * * * *", "@every 1s", ""},
		{"0 * * * * *", "* * * * *", ""},
		{"0 0 3 * * *", "0 3 * * *", ""},
		{"7 30 2 * * *", "", "second 7"},
		{"* * * * *", "", "six fields"},
	} {
		got, err := asynqSpec(tc.spec)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("asynqSpec(%q): error %v, want one containing %q", tc.spec, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("asynqSpec(%q) = %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
}
