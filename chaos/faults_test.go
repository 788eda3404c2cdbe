package main

import (
	"testing"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
)

// TestClaimedAtKillOnlyExcusesTheVictimsClaimsAroundItsKill checks which
// fires that never ran count as claimed at a kill rather than missed: a
// row the SIGKILLed replica had claimed, settled failed, replica lost, due
// within the claim lead after the kill or a late wake before it. The same
// row of another replica, of another reason, or due outside that span is
// missed.
func TestClaimedAtKillOnlyExcusesTheVictimsClaimsAroundItsKill(t *testing.T) {
	kill := time.UnixMilli(1_800_000_000_000).Add(2 * time.Millisecond)
	h := &harness{failovers: []failoverRecord{
		{kind: faultStop, at: kill.Add(-time.Minute), victim: "r0-g1"},
		{kind: faultKill, at: kill, victim: "r0-g1"},
	}}
	row := func(replica string, dueFromKill time.Duration, status, reason string) *store.Execution {
		return &store.Execution{Replica: replica, RunTime: kill.Add(dueFromKill).UnixMilli(), Status: status, Reason: reason}
	}
	lost := func(replica string, dueFromKill time.Duration) *store.Execution {
		return row(replica, dueFromKill, store.StatusFailed, store.ReasonReplicaLost)
	}
	for _, c := range []struct {
		name    string
		row     *store.Execution
		claimed bool
	}{
		{"due just after the kill", lost("r0-g1", 998*time.Millisecond), true},
		{"due as the kill landed", lost("r0-g1", 0), true},
		{"due a late wake before the kill", lost("r0-g1", -launchSlack), true},
		{"due before a late wake", lost("r0-g1", -launchSlack-time.Millisecond), false},
		{"due past the largest claim lead", lost("r0-g1", maxClaimLead+time.Millisecond), false},
		{"another replica's", lost("r1-g1", 0), false},
		{"the frozen replica's, a minute before", lost("r0-g1", -time.Minute), false},
		{"settled otherwise", row("r0-g1", 0, store.StatusFailed, store.ReasonCancelled), false},
		{"still scheduled", row("r0-g1", 0, store.StatusScheduled, ""), false},
		{"no row", nil, false},
	} {
		if got := h.claimedAtKill(c.row) != ""; got != c.claimed {
			t.Errorf("%s: claimed at the kill = %v, want %v", c.name, got, c.claimed)
		}
	}
}
