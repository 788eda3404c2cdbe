package main

import (
	"testing"

	"github.com/xtimer-go/xtimer/internal/store"
)

// TestBroadcastDealCheckIgnoresFiresRecordedSkipped checks the shape rule
// on a broadcast fire's rows: two shards dealt to one replica break it,
// but a fire recorded skipped (a misfire, an excluded day), whose rows all
// name the replica that recorded them and none of which runs, does not.
func TestBroadcastDealCheckIgnoresFiresRecordedSkipped(t *testing.T) {
	const at = 1_800_000_000_000
	shard := func(i int, replica, status, reason string) store.Execution {
		return store.Execution{TaskCode: broadcastTask, RunTime: at, Shard: i, Shards: 2, Broadcast: true,
			Replica: replica, Status: status, Reason: reason}
	}
	for _, c := range []struct {
		name  string
		rows  []store.Execution
		shape int
	}{
		{"dealt to two replicas", []store.Execution{
			shard(0, "r0", store.StatusSucceeded, ""), shard(1, "r1", store.StatusSucceeded, "")}, 0},
		{"dealt twice to one replica", []store.Execution{
			shard(0, "r0", store.StatusSucceeded, ""), shard(1, "r0", store.StatusSucceeded, "")}, 1},
		{"one dealt shard later skipped beside another on its replica", []store.Execution{
			shard(0, "r0", store.StatusSkipped, store.ReasonReplicaLost), shard(1, "r0", store.StatusSucceeded, "")}, 1},
		{"recorded skipped, a misfire", []store.Execution{
			shard(0, "r2", store.StatusSkipped, store.ReasonMisfire), shard(1, "r2", store.StatusSkipped, store.ReasonMisfire)}, 0},
		{"recorded skipped, an excluded day", []store.Execution{
			shard(0, "r2", store.StatusSkipped, store.ReasonExcluded), shard(1, "r2", store.StatusSkipped, store.ReasonExcluded)}, 0},
	} {
		byShard := map[fireKey]*store.Execution{}
		for i := range c.rows {
			r := &c.rows[i]
			byShard[fireKey{r.TaskCode, r.RunTime, r.Shard}] = r
		}
		sc := newShardCheck(map[fireKey][]invocation{}, c.rows, byShard)
		sc.stuck, sc.skippedOutside, sc.mismatch, sc.claimed = &broken{}, &broken{}, &broken{}, &broken{}
		sc.involved = map[string]bool{}
		sc.inOutage = func(int64) bool { return true }
		sc.claimedAtKill = func(*store.Execution) string { return "" }
		sc.broadcastFire(at)
		if sc.shape.n != c.shape {
			t.Errorf("%s: %d shape breaks, want %d: %v", c.name, sc.shape.n, c.shape, sc.shape.examples)
		}
	}
}
