package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// A fire claimed ahead of its run time records its start at the run time
// (lateness 0), one claimed late at the claim (lateness the difference);
// UnclaimFires undoes the claim ahead of a fire that did not start, so
// that ReleaseFires hands it on, and touches nothing else.
func TestStartFiresAheadRecordsTheRunTimeAndUnclaimUndoesIt(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows, err := b.store.InsertFires(b.ctx, []store.Execution{
			{App: b.app, TaskCode: "ahead", RunTime: t0 + 1000, Replica: "r1"},
			{App: b.app, TaskCode: "late", RunTime: t0 - 40, Replica: "r1"},
			{App: b.app, TaskCode: "other", RunTime: t0 + 1000, Replica: "r2"},
		})
		require.NoError(t, err)
		require.Len(t, rows, 3)
		ahead, late, other := rows[0], rows[1], rows[2]

		got, err := b.store.StartFires(b.ctx, b.app, []int64{ahead.ID, late.ID, other.ID}, "r1", t0)
		require.NoError(t, err)
		require.ElementsMatch(t, []int64{ahead.ID, late.ID}, got, "r2's fire is not r1's to claim")
		e, err := b.store.Execution(b.ctx, ahead.ID)
		require.NoError(t, err)
		require.Equal(t, t0+1000, e.StartedMs)
		require.Equal(t, int64(0), e.LatenessMs)
		e, err = b.store.Execution(b.ctx, late.ID)
		require.NoError(t, err)
		require.Equal(t, t0, e.StartedMs)
		require.Equal(t, int64(40), e.LatenessMs)

		// A claimed fire is not taken over nor released while claimed.
		n, err := b.store.ReleaseFires(b.ctx, b.app, "r1")
		require.NoError(t, err)
		require.Zero(t, n)

		// r1 stops before the run time of "ahead"; "late" started.
		oks, err := b.store.MarkRunning(b.ctx, []store.Start{{ID: late.ID, Replica: "r1", StartedMs: t0}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, oks)
		n, err = b.store.UnclaimFires(b.ctx, b.app, "r2", []int64{ahead.ID})
		require.NoError(t, err)
		require.Zero(t, n, "only the claimer undoes its claim")
		n, err = b.store.UnclaimFires(b.ctx, b.app, "r1", []int64{ahead.ID, late.ID})
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "a running fire stays claimed")
		e, err = b.store.Execution(b.ctx, ahead.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusScheduled, e.Status)
		require.Zero(t, e.StartedMs)
		require.Zero(t, e.LatenessMs)
		e, err = b.store.Execution(b.ctx, late.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusRunning, e.Status)
		require.Equal(t, t0, e.StartedMs)

		n, err = b.store.ReleaseFires(b.ctx, b.app, "r1")
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		got, err = b.store.StartFires(b.ctx, b.app, []int64{ahead.ID}, "r1", t0+1001)
		require.NoError(t, err)
		require.Empty(t, got, "released: it is nobody's until claimed")
	})
}

// A jittered fire keeps its planned start (planned_ms) beside its run
// time, in a chunk whose other fires have none; StartFires records the
// start at the planned start when claimed ahead of it, and the lateness
// from the planned start when claimed after it. A planned start before
// the run time is refused.
func TestStartFiresMeasuresJitteredFiresFromTheirPlannedStart(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows, err := b.store.InsertFires(b.ctx, []store.Execution{
			{App: b.app, TaskCode: "ahead", RunTime: t0, PlannedMs: t0 + 7000, Replica: "r1"},
			{App: b.app, TaskCode: "late", RunTime: t0 - 9000, PlannedMs: t0 - 3000, Replica: "r1"},
			{App: b.app, TaskCode: "plain", RunTime: t0 + 1000, Replica: "r1"},
		})
		require.NoError(t, err)
		require.Len(t, rows, 3)
		ahead, late, plain := rows[0], rows[1], rows[2]
		for _, r := range rows {
			e, readErr := b.store.Execution(b.ctx, r.ID)
			require.NoError(t, readErr)
			require.Equal(t, r.PlannedMs, e.PlannedMs, r.TaskCode)
		}
		require.Equal(t, t0+1000, plain.Planned(), "no jitter: the run time")

		got, err := b.store.StartFires(b.ctx, b.app, []int64{ahead.ID, late.ID, plain.ID}, "r1", t0)
		require.NoError(t, err)
		require.ElementsMatch(t, []int64{ahead.ID, late.ID, plain.ID}, got)
		for _, c := range []struct {
			id                int64
			started, lateness int64
		}{{ahead.ID, t0 + 7000, 0}, {late.ID, t0, 3000}, {plain.ID, t0 + 1000, 0}} {
			e, readErr := b.store.Execution(b.ctx, c.id)
			require.NoError(t, readErr)
			require.Equal(t, c.started, e.StartedMs, e.TaskCode)
			require.Equal(t, c.lateness, e.LatenessMs, e.TaskCode)
		}

		_, err = b.store.InsertFires(b.ctx, []store.Execution{{App: b.app, TaskCode: "early", RunTime: t0, PlannedMs: t0 - 1}})
		require.ErrorContains(t, err, "planned_ms")
	})
}
