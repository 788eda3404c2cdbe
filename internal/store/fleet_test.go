package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

func TestDoneSlotsReturnsWhatWasMarkedInRange(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		m := store.MinuteOf(t0)
		require.NoError(t, b.store.MarkSlotsDone(b.ctx, b.app, []store.Slot{
			{Minute: m, Bucket: 0, Owner: "r1"},
			{Minute: m, Bucket: 5, Owner: "r1"},
			{Minute: m + 1, Bucket: 3, Owner: "r2"},
			{Minute: m + 2, Bucket: 0, Owner: "r2"},
		}))
		b.set(t0 + 500)
		require.NoError(t, b.store.MarkSlotsDone(b.ctx, b.app, []store.Slot{{Minute: m, Bucket: 0, Owner: "r3"}}))
		require.NoError(t, b.store.MarkSlotsDone(b.ctx, b.app+"x", []store.Slot{{Minute: m, Bucket: 1, Owner: "r9"}}))

		got, err := b.store.DoneSlots(b.ctx, b.app, m, m+1)
		require.NoError(t, err)
		require.Equal(t, []store.Slot{
			{App: b.app, Minute: m, Bucket: 0, Done: true, Owner: "r3", DoneMs: t0 + 500},
			{App: b.app, Minute: m, Bucket: 5, Done: true, Owner: "r1", DoneMs: t0},
			{App: b.app, Minute: m + 1, Bucket: 3, Done: true, Owner: "r2", DoneMs: t0},
		}, got)
	})
}

func TestHeartbeatKeepsStartAndLiveReplicasFollowsIt(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r1", Host: "h1", PID: 11, Version: "v1"}))
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r2", Host: "h2", PID: 22, Version: "v1"}))
		b.set(t0 + 5000)
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{
			App: b.app, ID: "r1", Host: "h1", PID: 11, Version: "v2", Handlers: []string{"a", "b"},
		}))

		live, err := b.store.LiveReplicas(b.ctx, b.app, t0+1000)
		require.NoError(t, err)
		require.Equal(t, []store.Replica{{
			App: b.app, ID: "r1", Host: "h1", PID: 11, Version: "v2",
			StartedMs: t0, HeartbeatMs: t0 + 5000, Handlers: []string{"a", "b"},
		}}, live)

		live, err = b.store.LiveReplicas(b.ctx, b.app, t0)
		require.NoError(t, err)
		require.Len(t, live, 2)
		require.Equal(t, "r2", live[1].ID)

		require.NoError(t, b.store.DeleteReplica(b.ctx, b.app, "r1"))
		require.NoError(t, b.store.DeleteReplica(b.ctx, b.app, "r1"))
		n, err := b.store.PruneReplicas(b.ctx, b.app, t0+1)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		live, err = b.store.LiveReplicas(b.ctx, b.app, 0)
		require.NoError(t, err)
		require.Empty(t, live)

		err = b.store.Heartbeat(b.ctx, store.Replica{App: b.app})
		require.EqualError(t, err, `store: heartbeat: replica id "": want 1 to 128 bytes`)
	})
}

// A heartbeat writes the replica's clock offset and whether its clock is
// too far off to claim; LiveAndClaiming leaves the latter out of the
// claiming list only, and a later heartbeat puts it back.
func TestHeartbeatWritesClockOffsetAndRefusal(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r1", ClockOffsetMs: -30_250}))
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r2", ClockOffsetMs: 660_000, ClockRefused: true}))
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r3"}))

		rows, err := b.store.LiveReplicas(b.ctx, b.app, t0)
		require.NoError(t, err)
		require.Len(t, rows, 3)
		require.Equal(t, int64(-30_250), rows[0].ClockOffsetMs)
		require.Equal(t, []bool{false, true, false}, []bool{rows[0].ClockRefused, rows[1].ClockRefused, rows[2].ClockRefused})
		require.Equal(t, int64(660_000), rows[1].ClockOffsetMs)

		live, claiming, err := b.store.LiveAndClaiming(b.ctx, b.app, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"r1", "r2", "r3"}, live)
		require.Equal(t, []string{"r1", "r3"}, claiming)

		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r2", ClockOffsetMs: 120}))
		_, claiming, err = b.store.LiveAndClaiming(b.ctx, b.app, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"r1", "r2", "r3"}, claiming)
		rows, err = b.store.LiveReplicas(b.ctx, b.app, t0)
		require.NoError(t, err)
		require.Equal(t, int64(120), rows[1].ClockOffsetMs)
	})
}

// A replica of 100,000 tasks heart-beats on every database (MySQL's TEXT
// would stop at some 6,000 codes), and a heartbeat without handlers keeps
// the ones stored.
func TestHeartbeatHoldsAHundredThousandHandlersAndKeepsThemWhenNil(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		codes := make(store.Codes, 100_000)
		for i := range codes {
			codes[i] = fmt.Sprintf("billing.task-%06d", i)
		}
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "big", Handlers: codes, Slots: []string{"1:2"}}))
		b.set(t0 + 5000)
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "big", Slots: []string{"1:3"}}))
		live, err := b.store.LiveReplicas(b.ctx, b.app, t0+1000)
		require.NoError(t, err)
		require.Len(t, live, 1)
		require.Equal(t, codes, live[0].Handlers)
		require.Equal(t, []string{"1:3"}, live[0].Slots)
		require.Equal(t, t0+5000, live[0].HeartbeatMs)
	})
}

// A replica of many handlers writes their list apart from its heartbeat:
// into its row when it has one (the same list again included, which MySQL
// counts as no row changed, and an empty one), and not into a row that is
// not there.
func TestSetReplicaHandlersWritesTheRowThatIsThere(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		codes := store.Codes{"a", "b"}
		ok, err := b.store.SetReplicaHandlers(b.ctx, b.app, "r1", codes)
		require.NoError(t, err)
		require.False(t, ok, "no row yet")
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r1"}))
		for range 2 {
			ok, err = b.store.SetReplicaHandlers(b.ctx, b.app, "r1", codes)
			require.NoError(t, err)
			require.True(t, ok)
		}
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r1"}))
		live, err := b.store.LiveReplicas(b.ctx, b.app, 0)
		require.NoError(t, err)
		require.Len(t, live, 1)
		require.Equal(t, codes, live[0].Handlers, "a heartbeat without handlers keeps them")

		// A replica left with no handler writes an empty list.
		ok, err = b.store.SetReplicaHandlers(b.ctx, b.app, "r1", nil)
		require.NoError(t, err)
		require.True(t, ok)
		live, err = b.store.LiveReplicas(b.ctx, b.app, 0)
		require.NoError(t, err)
		require.Len(t, live, 1)
		require.Empty(t, live[0].Handlers)
	})
}

// A replica of a million tasks of long codes writes a list of some 24 MB
// of JSON, more than MariaDB's default max_allowed_packet (16 MiB): it is
// written in chunks of at most 1 MiB and read back whole, by the console's
// read (LiveReplicas) and the shards' (ReplicaHandlers); a small list
// written by the heartbeat then takes its place, and deleting the replica
// deletes the chunks. (SQLite has no packet limit; the smaller lists of
// the other tests take the same path there.)
func TestABigHandlerListIsWrittenInChunksAndReadBackWhole(t *testing.T) {
	t.Parallel()
	for _, backend := range testsvc.Backends() {
		if backend.Name == "sqlite" {
			continue
		}
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			b := open(t, backend.Open(t))
			require.NoError(t, b.store.Migrate(b.ctx))
			writeAndReadABigHandlerList(t, b)
		})
	}
}

func writeAndReadABigHandlerList(t *testing.T, b *bundle) {
	codes := make(store.Codes, 1_000_000)
	size := 1
	for i := range codes {
		codes[i] = fmt.Sprintf("distinct-task-%07d", i)
		size += len(codes[i]) + 3
	}
	if b.db.Dialector.Name() == "mysql" {
		var packet int
		require.NoError(t, b.db.Raw("SELECT @@max_allowed_packet").Scan(&packet).Error)
		t.Logf("a list of %d bytes of JSON; max_allowed_packet %d", size, packet)
	}
	require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "big"}))
	require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "small", Handlers: store.Codes{"distinct-task-0000007"}}))
	ok, err := b.store.SetReplicaHandlers(b.ctx, b.app, "big", codes)
	require.NoError(t, err)
	require.True(t, ok)

	var chunks []struct {
		Seq int
		N   int
	}
	require.NoError(t, b.db.Model(&store.HandlerChunk{}).Select("seq, LENGTH(codes) AS n").
		Where("app = ? AND replica = ?", b.app, "big").Order("seq").Scan(&chunks).Error)
	require.Len(t, chunks, (size+1<<20-1)/(1<<20), "chunks of 1 MiB")
	for i, c := range chunks {
		require.Equal(t, i, c.Seq)
		require.LessOrEqual(t, c.N, 1<<20, "chunk %d", i)
	}

	live, err := b.store.LiveReplicas(b.ctx, b.app, 0)
	require.NoError(t, err)
	require.Len(t, live, 2)
	require.Equal(t, "big", live[0].ID)
	require.Equal(t, codes, live[0].Handlers)
	require.Equal(t, store.Codes{"distinct-task-0000007"}, live[1].Handlers)

	keep := map[string]bool{"distinct-task-0000007": true, "distinct-task-0999999": true, "other": true}
	lists, err := b.store.ReplicaHandlers(b.ctx, b.app, []string{"big", "small"}, keep)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{
		"big":   {"distinct-task-0000007", "distinct-task-0999999"},
		"small": {"distinct-task-0000007"},
	}, lists)

	require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "big", Handlers: store.Codes{"a"}}))
	live, err = b.store.LiveReplicas(b.ctx, b.app, 0)
	require.NoError(t, err)
	require.Equal(t, store.Codes{"a"}, live[0].Handlers, "the heartbeat's list replaces the chunks'")

	require.NoError(t, b.store.DeleteReplica(b.ctx, b.app, "big"))
	var n int64
	require.NoError(t, b.db.Model(&store.HandlerChunk{}).Where("app = ?", b.app).Count(&n).Error)
	require.Zero(t, n, "chunks of a deleted replica")
}

// Replicas of a big app write their handler lists at the same moment when
// a fleet starts. On MySQL/MariaDB at REPEATABLE READ each transaction's
// DELETE of its replica's (not yet written) chunks locked the gap where
// the others' chunks go, and their INSERTs then deadlocked one another
// (a fleet of three, 1M tasks, in the distinct benchmark). The writes name
// their rows by key and take no gap lock: no statement of them fails.
func TestReplicasWriteTheirHandlerListsAtOnceWithoutDeadlocks(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		// Small chunks: the gap locks were taken however big the rows, and
		// megabyte chunks under -race, beside every other test, once kept
		// a writer silent between two statements past abandonAfter.
		codes := make(store.Codes, 1_200)
		for i := range codes {
			codes[i] = fmt.Sprintf("distinct-task-%07d", i)
		}
		rec := &recorder{}
		s := store.New(b.db.Session(&gorm.Session{Logger: rec}), store.WithHandlerChunkBytes(8<<10))
		ids := []string{"r0", "r1", "r2", "r3"}
		for _, id := range ids {
			require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: id}))
		}
		for round := range 3 {
			var g errgroup.Group
			for _, id := range ids {
				g.Go(func() error {
					ok, err := s.SetReplicaHandlers(b.ctx, b.app, id, codes[round:])
					if err == nil && !ok {
						err = fmt.Errorf("replica %s: no row", id)
					}
					return err
				})
			}
			require.NoError(t, g.Wait())
		}
		require.Empty(t, rec.errors(), "statements that failed (and were retried)")
		live, err := b.store.LiveReplicas(b.ctx, b.app, 0)
		require.NoError(t, err)
		require.Len(t, live, len(ids))
		for _, r := range live {
			require.Equal(t, codes[2:], r.Handlers, "replica %s", r.ID)
		}
	})
}

// A pruned replica's chunks go with its row; a live one's stay.
func TestPruneReplicasDeletesTheirHandlerChunks(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		for _, id := range []string{"gone", "live"} {
			require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: id}))
			ok, err := b.store.SetReplicaHandlers(b.ctx, b.app, id, store.Codes{"a", "b"})
			require.NoError(t, err)
			require.True(t, ok)
			b.set(t0 + 60_000)
		}
		n, err := b.store.PruneReplicas(b.ctx, b.app, t0+30_000)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		var left []string
		require.NoError(t, b.db.Model(&store.HandlerChunk{}).Where("app = ?", b.app).Pluck("replica", &left).Error)
		require.Equal(t, []string{"live"}, left)
	})
}

func TestMinuteOfFloors(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(29013660), store.MinuteOf(t0))
	require.Equal(t, int64(29013660), store.MinuteOf(t0+59999))
	require.Equal(t, int64(29013661), store.MinuteOf(t0+60000))
	require.Equal(t, int64(-1), store.MinuteOf(-1))
	require.Equal(t, int64(0), store.MinuteOf(0))
}
