package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// freeze stops e as a SIGSTOP does, seen from the others: its loops end
// with nothing handed over, no lock released, nothing more written and
// no heartbeat; unlike crash, its running handlers go on, as a frozen
// process's do once it wakes.
func (s *Engine) freeze(t *testing.T) {
	s.halt()
	t.Cleanup(func() {
		s.cancelHandler()
		s.attempts.Wait()
		_ = s.alerts.stop(context.Background())
		s.metrics.unregister()
	})
}

// A cancel_other fire whose earlier run is on a replica frozen before it
// could see the request (no heartbeat since) waits for that run's row to
// be settled rather than start beside it 5 s later: the frozen process
// would resume its handler when it woke. Its row is settled once the
// frozen replica's heartbeat is ReplicaTimeout old, and the fire waiting
// starts then, after it.
func TestCancelOtherWaitsForARunOnAFrozenReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	runs := newShardRuns()
	start := time.Date(2026, 12, 1, 10, 0, 35, 0, time.UTC)
	first := time.Date(2026, 12, 1, 10, 1, 0, 0, time.UTC)
	block := func(a *Attempt) bool { return a.ScheduledAt.Equal(first) }
	f := newShardFleet(t, testsvc.Postgres(t), start, runs, func(e *Engine) {
		mustRegister(t, e, "job", "*/10 * * * * *", runs.handler(block), func(d *store.Definition) {
			d.Overlap, d.TimeoutMs = OverlapCancelOther, 0
		})
	})
	f.advanceTo(ctx, t, first.Add(500*time.Millisecond))
	held := f.rows(t, "job", first)
	require.Len(t, held, 1)
	held[0] = f.waitStatus(t, held[0].ID, store.StatusRunning)
	var victim *Engine
	for i, name := range f.names {
		if name == held[0].Replica {
			victim = f.engines[i]
		}
	}
	require.NotNil(t, victim, "the run's replica %q", held[0].Replica)
	victim.freeze(t)

	// Past the 5 s a deaf handler gets, and a heartbeat interval more,
	// the next fire still waits: the frozen replica never heart-beat
	// after it asked.
	next := first.Add(10 * time.Second)
	f.advanceTo(ctx, t, next.Add(cancelWait+6*time.Second))
	rows := f.rows(t, "job", next)
	require.Len(t, rows, 1)
	require.Equal(t, store.StatusScheduled, rows[0].Status)
	require.Zero(t, rows[0].StartedMs, "10:01:10 has not started beside the frozen run")
	got := f.rows(t, "job", first)[0]
	require.Equal(t, store.StatusRunning, got.Status)
	require.Positive(t, got.CancelMs, "10:01:10 asked the frozen run to stop")

	// The frozen replica's heartbeat runs out: its run is settled as lost,
	// and the fires waiting start, one after the other.
	f.advanceTo(ctx, t, first.Add(45*time.Second))
	got = f.rows(t, "job", first)[0]
	require.True(t, store.StatusFailed == got.Status, "the frozen run settled: %s %s", got.Status, got.Reason)
	started := f.waitStatus(t, f.rows(t, "job", next)[0].ID, store.StatusSucceeded)
	require.GreaterOrEqual(t, started.StartedMs, got.FinishedMs, "10:01:10 started after the frozen run was settled")
}
