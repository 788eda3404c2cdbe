package main

import (
	"testing"

	"github.com/xtimer-go/xtimer/internal/store"
)

// TestLostVersionTellsLostWritesFromLaterOnes checks the comparison of an
// execution row on the old primary with the new primary's: a write the
// standby never received reads as lost, a row that moved on after the
// failover does not.
func TestLostVersionTellsLostWritesFromLaterOnes(t *testing.T) {
	claimed := store.Execution{ID: 7, Status: store.StatusScheduled, Claim: "c1", StartedMs: 1000}
	running := store.Execution{ID: 7, Status: store.StatusRunning, Attempt: 1, Claim: "c1", StartedMs: 1000}
	succeeded := store.Execution{ID: 7, Status: store.StatusSucceeded, Attempt: 1, Claim: "c1", StartedMs: 1004, FinishedMs: 1300}
	tests := []struct {
		name     string
		old, now store.Execution
		gone     bool // the new primary has no such row
		lost     bool
	}{
		{name: "same row", old: running, now: running},
		{name: "finished after the failover", old: running, now: succeeded},
		{name: "claimed, then started and finished after", old: claimed, now: succeeded},
		{name: "lost start promoted by another replica keeps the start",
			old: claimed, now: store.Execution{ID: 7, Status: store.StatusRunning, Attempt: 1, Claim: "c2", StartedMs: 1000}},
		{name: "insert never replicated", old: running, gone: true, lost: true},
		{name: "insert never replicated, written again", old: running,
			now: store.Execution{ID: 9, Status: store.StatusScheduled}, lost: true},
		{name: "start never replicated", old: running,
			now: store.Execution{ID: 7, Status: store.StatusScheduled}, lost: true},
		{name: "start never replicated, claimed again", old: running,
			now: store.Execution{ID: 7, Status: store.StatusRunning, Attempt: 1, Claim: "c2", StartedMs: 5000}, lost: true},
		{name: "result never replicated", old: succeeded,
			now: store.Execution{ID: 7, Status: store.StatusSkipped, Reason: store.ReasonMisfire, Attempt: 1, Claim: "c1", StartedMs: 1000}, lost: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now *store.Execution
			if !tt.gone {
				now = &tt.now
			}
			why := lostVersion(&tt.old, now)
			if got := why != ""; got != tt.lost {
				t.Fatalf("lostVersion(%+v, %+v) = %q, want lost %t", tt.old, now, why, tt.lost)
			}
		})
	}
}
