package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/xtimer-go/xtimer/internal/store"
)

// isSharded reports whether the fires of code are several rows, one per
// shard: the replicas' sharded and broadcast tasks.
func isSharded(code string) bool { return code == shardTask || code == broadcastTask }

// shardsOf is how many shards of a fire of code maxFailover looks at: 1
// for a task that is not sharded.
func shardsOf(code string) int {
	if code == shardTask {
		return shardCount
	}
	return 1
}

// shardTally counts the shards of one task in the measured window. dup
// counts every shard invoked more than once, inside the window or not.
type shardTally struct {
	total, once, dup, missed, skipped int
	lost                              int // of skipped: broadcast shards recorded skipped, replica lost
	claimed                           int // claimed by a SIGKILLed replica and never started (claimedAtKill)
	fires, nowhere                    int // the window's fires, and those of which no shard ran
	lateness                          []int64
}

func (t *shardTally) String() string {
	return fmt.Sprintf("fires=%d (of which no shard ran: %d) shards=%d once=%d dup=%d missed=%d skipped=%d (replica lost: %d) claimed_at_kill=%d late_p99_ms=%d",
		t.fires, t.nowhere, t.total, t.once, t.dup, t.missed, t.skipped, t.lost, t.claimed, percentile(t.lateness, 0.99))
}

// fields are the tally's figures for the summary line.
func (t *shardTally) fields(name string) string {
	return fmt.Sprintf("%[1]s_shards=%[2]d %[1]s_once=%[3]d %[1]s_dup=%[4]d %[1]s_missed=%[5]d %[1]s_skipped=%[6]d",
		name, t.total, t.once, t.dup, t.missed, t.skipped)
}

// shardCheck checks the sharded and broadcast tasks' fires, shard by
// shard (issue 23). Over every invocation, inside the measured window or
// not:
//
//   - dup: a shard, (task, run time, shard), invoked more than once, on
//     one replica or two (the tasks have no retries: every run is a first
//     attempt);
//   - twice: a replica that ran two shards of one broadcast fire;
//   - elsewhere: a broadcast shard that ran on a replica other than the
//     one its row names.
//
// For every second of the window, every shard of the fire, shardCount of
// the sharded task's and as many as its rows say of the broadcast task's
// (one at least), must have been invoked once, or recorded skipped with
// a reason the harness accepts for other fires (with -strict: in a
// database outage only), or, for a broadcast shard only, recorded skipped
// with reason "replica lost": its replica was gone by its run time. A
// sharded shard never has that reason as a skip; one that started on a
// replica that died is invoked once and its row settled failed, replica
// lost (a mismatch note, as for other tasks); one that was never invoked
// is missed. shape: the rows of a fire, or the runs of a shard, disagree
// on the fire's shard count, or two shards of one broadcast fire were
// dealt to one replica (a fire recorded skipped deals none).
type shardCheck struct {
	invs    map[fireKey][]invocation
	byShard map[fireKey]*store.Execution
	fires   map[fireKey][]*store.Execution // a fire's rows, by its key with shard 0

	from, to int64 // the measured window: run times from, up to to (excluded)
	strict   bool
	inOutage func(at int64) bool

	sharded, broadcast shardTally

	dup, missed, twice, elsewhere, shape *broken
	// shared with check's other tasks
	stuck, skippedOutside, mismatch, claimed *broken
	involved                                 map[string]bool
	// claimedAtKill is harness.claimedAtKill: a shard the victim of a
	// SIGKILL had claimed and not started is counted there, not missed.
	claimedAtKill func(row *store.Execution) string
}

func newShardCheck(invs map[fireKey][]invocation, rows []store.Execution, byShard map[fireKey]*store.Execution) *shardCheck {
	c := &shardCheck{
		invs: invs, byShard: byShard, fires: map[fireKey][]*store.Execution{},
		dup:       &broken{promise: "once: a shard was invoked more than once"},
		missed:    &broken{promise: "nothing lost: a shard was neither invoked nor recorded skipped"},
		twice:     &broken{promise: "broadcast: a replica ran one broadcast fire more than once"},
		elsewhere: &broken{promise: "broadcast: a shard ran on a replica other than its row's"},
		shape:     &broken{promise: "shards: a fire's rows or runs disagree on its shards"},
	}
	for i := range rows {
		if r := &rows[i]; isSharded(r.TaskCode) {
			k := fireKey{code: r.TaskCode, at: r.RunTime}
			c.fires[k] = append(c.fires[k], r)
		}
	}
	return c
}

func (c *shardCheck) tally(code string) *shardTally {
	if code == broadcastTask {
		return &c.broadcast
	}
	return &c.sharded
}

// fireText describes every row of the fire of k, for the examples.
func (c *shardCheck) fireText(k fireKey) string {
	rows := append([]*store.Execution(nil), c.fires[fireKey{code: k.code, at: k.at}]...)
	sort.Slice(rows, func(i, j int) bool { return rows[i].Shard < rows[j].Shard })
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = fmt.Sprintf("[%d] %s", r.Shard, rowText(r))
	}
	if len(parts) == 0 {
		return "the fire has no rows"
	}
	return "the fire's rows: " + strings.Join(parts, "; ")
}

func (c *shardCheck) run() {
	c.everyRun()
	for at := (c.from + 999) / 1000 * 1000; at < c.to; at += 1000 {
		c.shardedFire(at)
		c.broadcastFire(at)
	}
}

// everyRun checks every invocation of the two tasks, inside the window
// or not: dup, twice and elsewhere.
func (c *shardCheck) everyRun() {
	perReplica := map[fireKey]map[string][]fireKey{} // broadcast fire -> replica -> its shards run there
	for k, inv := range c.invs {
		if !isSharded(k.code) {
			continue
		}
		row := c.byShard[k]
		if len(inv) > 1 {
			c.tally(k.code).dup++
			who := make([]string, len(inv))
			for i, x := range inv {
				who[i] = x.String()
				c.involved[x.replica] = true
			}
			c.dup.add(fmt.Sprintf("%s invoked %d times: %s; %s", k.id(), len(inv), strings.Join(who, ", "), c.fireText(k)))
		}
		for _, x := range inv {
			if row == nil || x.shards != max(1, row.Shards) {
				c.shape.add(fmt.Sprintf("%s ran as shard %d of %d by %s; %s", k.id(), k.shard, x.shards, x, rowText(row)))
			}
		}
		if k.code != broadcastTask {
			continue
		}
		fk := fireKey{code: k.code, at: k.at}
		if perReplica[fk] == nil {
			perReplica[fk] = map[string][]fireKey{}
		}
		for _, x := range inv {
			perReplica[fk][x.replica] = append(perReplica[fk][x.replica], k)
			if row != nil && x.replica != row.Replica {
				c.elsewhere.add(fmt.Sprintf("%s ran by %s; %s", k.id(), x, rowText(row)))
				c.involved[x.replica], c.involved[row.Replica] = true, true
			}
		}
	}
	for fk, reps := range perReplica {
		for rep, ks := range reps {
			if len(ks) > 1 {
				ids := make([]string, len(ks))
				for i, k := range ks {
					ids[i] = k.id()
				}
				sort.Strings(ids)
				c.twice.add(fmt.Sprintf("%s ran %s; %s", rep, strings.Join(ids, ", "), c.fireText(fk)))
				c.involved[rep] = true
			}
		}
	}
}

// shardedFire checks the shardCount shards of the sharded task's fire at
// at.
func (c *shardCheck) shardedFire(at int64) {
	fk := fireKey{code: shardTask, at: at}
	for _, r := range c.fireRows(fk) {
		if r.Shards != shardCount || r.Broadcast {
			c.shape.add(fmt.Sprintf("%s: want %d shards, not broadcast; %s", fireKey{shardTask, at, r.Shard}.id(), shardCount, rowText(r)))
		}
	}
	c.fire(fk, shardCount)
}

// broadcastFire checks the shards of the broadcast task's fire at at: as
// many as its rows say, each dealt to a replica of its own.
func (c *shardCheck) broadcastFire(at int64) {
	fk := fireKey{code: broadcastTask, at: at}
	rows := c.fireRows(fk)
	n := 1 // no rows: shard 0 is missed
	if len(rows) > 0 {
		n = rows[0].Shards
	}
	dealt := map[string]int{}
	for _, r := range rows {
		k := fireKey{broadcastTask, at, r.Shard}
		switch {
		case !r.Broadcast || r.Shards != rows[0].Shards || r.Shards < 1:
			c.shape.add(fmt.Sprintf("%s: want broadcast, shards as its fire's other rows (%d); %s", k.id(), rows[0].Shards, c.fireText(k)))
		case r.Replica != "" && !skippedWhenRecorded(r):
			if other, ok := dealt[r.Replica]; ok {
				c.shape.add(fmt.Sprintf("%s and shard %d both dealt to %s; %s", k.id(), other, r.Replica, c.fireText(k)))
			}
			dealt[r.Replica] = r.Shard
		}
		n = max(n, r.Shards)
	}
	c.fire(fk, n)
}

// skippedWhenRecorded reports whether r was recorded skipped, a misfire or
// an excluded day: such a fire's rows all name the replica that recorded
// them, not owners dealt (the planner's appendRows), and none runs.
func skippedWhenRecorded(r *store.Execution) bool {
	return r.Status == store.StatusSkipped && (r.Reason == store.ReasonMisfire || r.Reason == store.ReasonExcluded)
}

// fire counts the shards 0 to n-1 of the fire fk.
func (c *shardCheck) fire(fk fireKey, n int) {
	t := c.tally(fk.code)
	t.fires++
	ran := false
	for shard := range n {
		k := fireKey{fk.code, fk.at, shard}
		c.shard(k)
		ran = ran || len(c.invs[k]) > 0
	}
	if !ran {
		t.nowhere++
	}
}

// fireRows returns the rows of the fire fk, and counts as stuck those not
// in a final status.
func (c *shardCheck) fireRows(fk fireKey) []*store.Execution {
	rows := c.fires[fk]
	for _, r := range rows {
		if !final(r.Status) {
			c.stuck.add(fireKey{fk.code, fk.at, r.Shard}.id() + ": " + rowText(r))
			if r.Replica != "" {
				c.involved[r.Replica] = true
			}
		}
	}
	return rows
}

// shard counts one shard of the window: once, skipped or missed (a
// duplicate is counted by everyRun).
func (c *shardCheck) shard(k fireKey) {
	t := c.tally(k.code)
	t.total++
	inv, row := c.invs[k], c.byShard[k]
	var kill string // the SIGKILL that left the shard claimed, not started
	if len(inv) == 0 {
		kill = c.claimedAtKill(row)
	}
	switch {
	case len(inv) == 1:
		t.once++
	case len(inv) > 1:
	case k.code == broadcastTask && row != nil && row.Status == store.StatusSkipped && row.Reason == store.ReasonReplicaLost:
		t.skipped++
		t.lost++
	case row != nil && row.Status == store.StatusSkipped && row.Reason != "" && row.Reason != store.ReasonReplicaLost &&
		(!c.strict || c.inOutage(k.at)):
		t.skipped++
		if !c.inOutage(k.at) {
			c.skippedOutside.add(k.id() + ": " + rowText(row))
		}
	case kill != "":
		t.claimed++
		c.claimed.add(k.id() + ": " + kill + "; " + rowText(row))
	default:
		t.missed++
		c.missed.add(k.id() + ": not invoked; " + c.fireText(k))
		if row != nil && row.Replica != "" {
			c.involved[row.Replica] = true
		}
	}
	if len(inv) > 0 {
		due := k.at
		if row != nil {
			due = row.Planned()
			if row.Status != store.StatusSucceeded && row.Status != store.StatusRunning {
				c.mismatch.add(k.id() + ": invoked by " + inv[0].String() + "; " + rowText(row))
			}
		}
		t.lateness = append(t.lateness, inv[0].started-due)
	}
}
