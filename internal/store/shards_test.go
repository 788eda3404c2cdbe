package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// shardRows are the rows of fires of a task with shards shards each, at
// the run times given, shard i owned by owners[i % len(owners)].
func shardRows(app, code string, shards int, owners []string, runTimes ...int64) []store.Execution {
	var out []store.Execution
	for _, rt := range runTimes {
		for i := range shards {
			out = append(out, store.Execution{App: app, TaskCode: code, RunTime: rt, Shard: i, Shards: shards,
				Replica: owners[i%len(owners)]})
		}
	}
	return out
}

// A fire of 16 shards is 16 rows under the unique key (app, task,
// run_time, shard): recording them again inserts nothing, and a shard
// beyond the fire's count is refused.
func TestShardsOfAFireAreRowsOfTheirOwn(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := shardRows(b.app, "split", 16, []string{"r1", "r2", "r3"}, t0, t0+1000)
		got, err := b.store.InsertFires(b.ctx, rows)
		require.NoError(t, err)
		require.Len(t, got, 32)
		for i, r := range got {
			require.Equal(t, i%16, r.Shard, "returned in key order")
			require.Equal(t, 16, r.Shards)
			require.Equal(t, []string{"r1", "r2", "r3"}[r.Shard%3], r.Replica)
			require.True(t, r.Sharded())
		}
		again, err := b.store.InsertFires(b.ctx, rows)
		require.NoError(t, err)
		require.Empty(t, again, "every shard has its row already")
		have, err := b.store.RunTimesIn(b.ctx, b.app, "split", t0, t0+2000)
		require.NoError(t, err)
		require.Equal(t, []int64{t0, t0 + 1000}, have, "each fire once, for Backfill's preview")

		_, err = b.store.InsertFires(b.ctx, []store.Execution{{App: b.app, TaskCode: "split", RunTime: t0, Shard: 16, Shards: 16}})
		require.ErrorContains(t, err, "shard 16 of 16")

		unsharded, err := b.store.InsertFires(b.ctx, fires(b.app, "plain", t0))
		require.NoError(t, err)
		require.Len(t, unsharded, 1)
		require.Zero(t, unsharded[0].Shard)
		require.Zero(t, unsharded[0].Shards)
		require.False(t, unsharded[0].Sharded())
	})
}

// The history of a 16-shard task pages through every row once, newest
// fire first and, within a fire, by shard, whatever the page size; the
// per-task retention cap keeps exactly as many rows as asked, the newest
// by (run time, shard).
func TestHistoryOfAShardedTaskPagesAndCapsExactly(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := shardRows(b.app, "split", 16, []string{"r1"}, t0-3000, t0-2000, t0-1000)
		for i := range rows {
			rows[i].Status = store.StatusSucceeded // final, for the cap
		}
		require.NoError(t, b.db.Create(&rows).Error)
		type key struct {
			runTime int64
			shard   int
		}
		var want []key // newest first
		for rt := t0 - 1000; rt >= t0-3000; rt -= 1000 {
			for shard := 15; shard >= 0; shard-- {
				want = append(want, key{rt, shard})
			}
		}
		for _, limit := range []int{5, 16, 7, 48} {
			var got []key
			cursor := store.Cursor{}
			for page := 0; ; page++ {
				require.Less(t, page, 50, "paging ends")
				list, next, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{App: b.app, TaskCode: "split"}, cursor, limit)
				require.NoError(t, err)
				for _, e := range list {
					got = append(got, key{e.RunTime, e.Shard})
				}
				if next == (store.Cursor{}) {
					break
				}
				parsed, ok := store.ParseCursor(next.String())
				require.True(t, ok, "cursor %q reads back", next.String())
				require.Equal(t, next, parsed)
				cursor = parsed
			}
			require.Equal(t, want, got, "pages of %d", limit)
		}

		n, err := b.store.DeleteBeyondCount(b.ctx, b.app, "split", 20, 1000)
		require.NoError(t, err)
		require.Equal(t, int64(28), n)
		list, _, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{App: b.app, TaskCode: "split"}, store.Cursor{}, 100)
		require.NoError(t, err)
		require.Len(t, list, 20)
		for i, e := range list {
			require.Equal(t, want[i], key{e.RunTime, e.Shard}, "row %d", i)
		}
	})
}

// A dead replica's unstarted shards move to the replica that found it
// dead, but its broadcast shards, which are recorded skipped once due;
// the shards of live owners, and started ones, stay. A slot take-over
// leaves every shard alone, and a Stop's release skips its broadcast
// shards instead of handing them on.
func TestShardsOfAGoneReplicaAreTakenOverAndBroadcastOnesSkipped(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := shardRows(b.app, "split", 4, []string{"live", "dead"}, t0, t0+1000)
		for i := range 3 {
			rows = append(rows, store.Execution{App: b.app, TaskCode: "all", RunTime: t0, Shard: i, Shards: 3, Broadcast: true,
				Replica: []string{"live", "dead", "gone"}[i]})
		}
		rows = append(rows, store.Execution{App: b.app, TaskCode: "all", RunTime: t0 + 5000, Shard: 0, Shards: 1, Broadcast: true, Replica: "dead"})
		got, err := b.store.InsertFires(b.ctx, rows)
		require.NoError(t, err)
		require.Len(t, got, len(rows))

		taken, skipped, err := b.store.TakeOverFires(b.ctx, b.app, []string{"split", "all"}, t0, t0+60_000, "live")
		require.NoError(t, err)
		require.Empty(t, taken, "shards are not the slot's")
		require.Empty(t, skipped)

		due, err := b.store.ShardFires(b.ctx, b.app, "live", []string{"split", "all"}, t0+1000, 100)
		require.NoError(t, err)
		require.Len(t, due, 4+1, "live's shards due by t0+1s, oldest first")
		require.Equal(t, t0, due[0].RunTime)
		for _, r := range due {
			require.Equal(t, "live", r.Replica)
		}
		late, err := b.store.LateShardOwners(b.ctx, b.app, "live", []string{"split", "all"}, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"dead", "gone"}, late, "the owners of shards unstarted at t0, but the caller")

		moved, n, err := b.store.TakeOverShards(b.ctx, b.app, "dead", []string{"split", "all"}, t0+1000, t0, "live")
		require.NoError(t, err)
		require.Len(t, moved, 4, "the dead replica's two shards of each fire")
		for _, r := range moved {
			require.Equal(t, "live", r.Replica)
			require.Equal(t, "split", r.TaskCode)
		}
		require.Equal(t, int64(1), n, "its broadcast shard due by now is skipped")
		var all []store.Execution
		require.NoError(t, b.db.Where("app = ? AND task_code = ?", b.app, "all").Order("run_time, shard").Find(&all).Error)
		require.Equal(t, store.StatusScheduled, all[0].Status)
		require.Equal(t, store.StatusSkipped, all[1].Status)
		require.Equal(t, store.ReasonReplicaLost, all[1].Reason)
		require.Equal(t, "dead", all[1].Replica, "it stays its replica's")
		require.Equal(t, store.StatusScheduled, all[3].Status, "not due yet")

		// Nobody claims a broadcast shard of a replica not in the live list.
		claimed, err := b.store.ClaimFires(b.ctx, b.app, "live", store.CodeSet{Codes: []string{"all"}}, func(string) bool { return true },
			[]string{"live"}, t0+10_000, t0+10_000, 100)
		require.NoError(t, err)
		require.Empty(t, claimed)

		// A stop releases its shards, but skips its broadcast ones.
		released, err := b.store.ReleaseFires(b.ctx, b.app, "live")
		require.NoError(t, err)
		require.Equal(t, int64(8), released, "its own two shards of each fire and the four it took over")
		require.NoError(t, b.db.Where("app = ? AND task_code = ?", b.app, "all").Order("run_time, shard").Find(&all).Error)
		require.Equal(t, store.StatusSkipped, all[0].Status)
		require.Equal(t, store.ReasonReplicaLost, all[0].Reason)
	})
}

// Pause on failure counts fires, not shards: a fire failed when any of
// its shards did, and one whose shards all succeeded breaks the streak,
// however many shards each has.
func TestFailureStreakOfAShardedTaskCountsFires(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		task := reconcile(b.app)
		task.Shards = 4
		_, err := b.store.UpsertTask(b.ctx, task)
		require.NoError(t, err)
		var rows []store.Execution
		fire := func(sec int64, statuses ...string) {
			for i, st := range statuses {
				rows = append(rows, store.Execution{App: b.app, TaskCode: "billing.reconcile", RunTime: t0 + sec*1000, Shard: i, Shards: 4,
					Status: st, Source: store.SourceSchedule, Error: fmt.Sprintf("shard %d %s", i, st), Attempt: 1, MaxAttempts: 1})
			}
		}
		ok, failed, timedOut := store.StatusSucceeded, store.StatusFailed, store.StatusTimedOut
		fire(10, failed, failed, failed, failed)
		fire(20, ok, ok, ok, ok)
		fire(30, ok, failed, ok, ok)
		fire(40, timedOut, ok, failed, ok)
		require.NoError(t, b.db.Create(&rows).Error)

		st, err := b.store.FailureStreak(b.ctx, b.app, "billing.reconcile", 3)
		require.NoError(t, err)
		require.Equal(t, 2, st.Failures, "the fires of 40 and 30 failed; 20 succeeded in every shard")
		require.Equal(t, "shard 0 timed_out", st.Last.Error, "the newest fire's first failure")
		st, err = b.store.FailureStreak(b.ctx, b.app, "billing.reconcile", 1)
		require.NoError(t, err)
		require.Equal(t, 1, st.Failures, "one fire, not its two failed shards")
	})
}

// A fire's shards are recorded by one call or none: a second recording
// of a broadcast fire dealt over more replicas (a slot taken over after
// another replica joined) finds its shard 0 there and adds no shard,
// and a call that wins shard 0 records every other shard of the fire.
func TestAFiresShardsAreRecordedByOneCall(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		deal := func(owners ...string) []store.Execution {
			var rows []store.Execution
			for i, o := range owners {
				rows = append(rows, store.Execution{App: b.app, TaskCode: "all", RunTime: t0, Shard: i, Shards: len(owners), Broadcast: true, Replica: o})
			}
			return rows
		}
		got, err := b.store.InsertFires(b.ctx, deal("r1", "r2"))
		require.NoError(t, err)
		require.Len(t, got, 2)
		got, err = b.store.InsertFires(b.ctx, append(deal("r1", "r2", "r3"), fires(b.app, "plain", t0)...))
		require.NoError(t, err)
		require.Len(t, got, 1, "the unsharded fire only")
		require.Equal(t, "plain", got[0].TaskCode)
		var n int64
		require.NoError(t, b.db.Model(&store.Execution{}).Where("app = ? AND task_code = ?", b.app, "all").Count(&n).Error)
		require.EqualValues(t, 2, n, "the first deal stands")
	})
}
