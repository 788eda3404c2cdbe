package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise: a replica that wins a dead owner's slot takes over every
// unstarted fire the owner recorded there, those due within urgentHorizon
// first and the rest after the round records its urgent fires. When the
// database fails in the middle, the take-over stays due though the slot is
// held now, and the next round does it: the owner's fires, recorded up to
// recordAhead ahead, run on the winner, as a hand-over, and are not left
// to the orphan claims once the owner's heartbeat runs out, half a minute
// later.
func TestATakeOverCutHalfwayIsFinishedInTheNextRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.Postgres(t)
	dbB := testsvc.PostgresVia(t, db, testsvc.NewProxy(t, testsvc.PostgresAddr(t))) // replica b's own pool
	// b's take-overs move rows to it with one UPDATE per part: once
	// counting, the first fails.
	var updates atomic.Int32
	updates.Store(-1)
	fail := func(tx *gorm.DB) {
		set, ok := tx.Statement.Dest.(map[string]any)
		if ok && tx.Statement.Table == "xtimer_executions" && set["replica"] == "replica-b" &&
			updates.Load() >= 0 && updates.Add(1) == 1 {
			_ = tx.AddError(errors.New("injected: the connection broke"))
		}
	}
	require.NoError(t, dbB.Callback().Update().Before("gorm:update").Register("test:fail_take_over", fail))

	start := time.Date(2026, 12, 1, 10, 0, 10, 100_000_000, time.UTC)
	f := newFailoverPair(t, db, dbB, start)
	f.a.crash()
	crashed := f.clock.Now()
	updates.Store(0)
	for len(f.b.keeper.heldKeys()) == 0 && f.clock.Now().Before(crashed.Add(5*time.Second)) {
		f.advance(ctx, t, f.clock.Now().Add(10*time.Millisecond))
	}
	require.Len(t, f.b.keeper.heldKeys(), 1, "b won the slot")
	f.advance(ctx, t, f.clock.Now().Add(100*time.Millisecond))
	require.GreaterOrEqual(t, updates.Load(), int32(1), "the take-over's round failed")

	// a recorded up to recordAhead past its last tick: every fire from the
	// crash to there, and after, runs once on b.
	last := crashed.Truncate(time.Second).Add(recordAhead + time.Second)
	f.advance(ctx, t, last.Add(2*time.Second))
	for at := crashed.Truncate(time.Second).Add(time.Second); !at.After(last); at = at.Add(time.Second) {
		require.Equal(t, "replica-b", f.row(t, at).Replica, "fire at %v", at.Format(time.TimeOnly))
		require.Eventually(t, func() bool { return f.row(t, at).StartedMs != 0 }, 10*time.Second, 5*time.Millisecond,
			"fire at %v started", at.Format(time.TimeOnly))
		require.Less(t, f.row(t, at).LatenessMs, int64(misfireAfter/time.Millisecond), "fire at %v: a hand-over, not a misfire", at.Format(time.TimeOnly))
	}
	f.runs.mu.Lock()
	defer f.runs.mu.Unlock()
	for id, calls := range f.runs.calls {
		require.Len(t, calls, 1, "fire %s", id)
	}
}
