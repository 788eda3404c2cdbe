package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// A fire claimed by a replica that died before it marked the fire running
// is lost with it: the first heartbeat after the replica leaves the alive
// list settles it (PromoteLostStarts), not the read every promoteEvery.
// A claim of a replica still alive is settled once it is staleClaim old,
// within promoteEvery and a heartbeat after.
func TestLostStartsAreSettledWhenTheirReplicaGoesOrTheClaimIsStale(t *testing.T) {
	t.Parallel()
	onPostgresAndSQLite(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s, clock, _ := startTasks(ctx, t, db, "0 0 0 1 1 *", "lost") // no fire of its own in the test
		app := s.opts.App
		alive := func() []string {
			s.planner.mu.Lock()
			defer s.planner.mu.Unlock()
			return s.planner.alive
		}
		tick := func() {
			waitSettled(ctx, t, clock, s)
			clock.Advance(time.Second)
			waitSettled(ctx, t, clock, s)
		}
		beat := func() {
			require.NoError(t, s.store.Heartbeat(ctx, store.Replica{App: app, ID: "ghost", HeartbeatMs: clock.Now().UnixMilli()}))
		}
		claimed := func(replica string, runTime time.Time) store.Execution {
			r := store.Execution{App: app, TaskCode: "lost", RunTime: runTime.UnixMilli(), Status: store.StatusScheduled,
				Source: store.SourceSchedule, MaxAttempts: 1, Replica: replica, StartedMs: clock.Now().UnixMilli(), Claim: "c"}
			require.NoError(t, db.Create(&r).Error)
			return r
		}
		status := func(id int64) store.Execution {
			var r store.Execution
			require.NoError(t, db.First(&r, id).Error)
			return r
		}

		// The ghost heart-beats for 47 s, so that it leaves the list off
		// the beat of the read every promoteEvery, claims a fire and dies.
		beat()
		for !slices.Contains(alive(), "ghost") {
			tick()
		}
		for end := clock.Now().Add(47 * time.Second); clock.Now().Before(end); tick() {
			beat()
		}
		ghostClaim := claimed("ghost", clock.Now().Truncate(time.Second))
		for slices.Contains(alive(), "ghost") {
			require.Equal(t, store.StatusScheduled, status(ghostClaim.ID).Status, "settled while its replica was alive")
			tick()
		}
		gone := clock.Now()
		for status(ghostClaim.ID).Status == store.StatusScheduled {
			require.Less(t, clock.Now().Sub(gone), s.opts.HeartbeatInterval+time.Second,
				"the ghost left the alive list at %s, and its claim is still not settled", gone)
			tick()
		}
		r := status(ghostClaim.ID)
		require.Equal(t, store.StatusFailed, r.Status)
		require.Equal(t, store.ReasonReplicaLost, r.Reason)

		// A claim of this replica that it never marked running.
		own := claimed(s.opts.InstanceID, clock.Now().Truncate(time.Second))
		at := clock.Now()
		for status(own.ID).Status == store.StatusScheduled {
			require.Less(t, clock.Now().Sub(at), staleClaim+promoteEvery+s.opts.HeartbeatInterval+time.Second,
				"a claim made at %s is still not settled", at)
			tick()
		}
		require.GreaterOrEqual(t, clock.Now().Sub(at), staleClaim, "settled before it was stale")
		require.Equal(t, store.ReasonReplicaLost, status(own.ID).Reason)
	})
}
