package xtimer

import (
	"fmt"

	"github.com/xtimer-go/xtimer/internal/store"
)

// MaxShards is the most shards WithShards splits a fire into, and the
// most replicas a broadcast fire (WithBroadcast) reaches.
const MaxShards = store.MaxShards

// WithShards splits each fire of the task into n shards that run in
// parallel, each once, dealt round the live replicas that have the
// task's handler. Each shard is an execution of its own, with its own
// status, attempts and retries; the handler learns its part from
// Run.Shard and Run.Shards, and Run.ID names the shard
// ("app/code/run_time_ms/shard"). A shard whose replica dies before it
// starts is taken over by another replica within the failover gap, as
// any fire of a lost slot is; a shard that started there is settled by
// the retry policy (reason "replica lost"), never run twice on its own.
// n is 1 to MaxShards; 1 is the same as no sharding. The task's overlap
// policy applies to the fire: it runs while any of its shards does.
func WithShards(n int) TaskOption {
	return func(c *taskConfig) error {
		switch {
		case n < 1 || n > MaxShards:
			return optionError("WithShards", n, fmt.Sprintf("shards must be 1-%d", MaxShards))
		case c.broadcast:
			return optionError("WithShards", n, "the task is broadcast already (WithBroadcast): a fire is either sharded or broadcast")
		}
		c.shards = n
		if n == 1 {
			c.shards = 0
		}
		return nil
	}
}

// WithBroadcast runs each fire of the task once on every live replica
// that has the task's handler when the fire is recorded: one shard per
// replica (Run.Shards is their count, Run.Shard this replica's place
// among them), each on its own replica. A broadcast shard never runs
// elsewhere: when its replica is gone by its run time, it is recorded
// skipped with reason "replica lost". So each replica runs a broadcast
// fire at most once, and a replica that joins later runs the fires
// recorded after it joined.
func WithBroadcast() TaskOption {
	return func(c *taskConfig) error {
		if c.shards > 0 {
			return optionError("WithBroadcast", "", fmt.Sprintf("the task has %d shards already (WithShards): a fire is either sharded or broadcast", c.shards))
		}
		c.broadcast = true
		return nil
	}
}
