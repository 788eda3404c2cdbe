package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// appRow reads the app's row of xtimer_apps.
func appRow(t *testing.T, b *bundle) store.AppState {
	t.Helper()
	var st store.AppState
	require.NoError(t, b.db.Where("app = ?", b.app).Take(&st).Error)
	return st
}

func TestBeginRegistrationDefersOnlyIntoAnAppWithoutTasks(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(30, everyMinute)
		small, err := b.store.BeginRegistration(b.ctx, b.app, ds[:5], 10)
		require.NoError(t, err)
		require.False(t, small.Deferred, "5 tasks, below deferFrom 10: written at once")
		require.Equal(t, 5, taskCount(t, b))

		more, err := b.store.BeginRegistration(b.ctx, b.app, ds, 10)
		require.NoError(t, err)
		require.False(t, more.Deferred, "the app has tasks: the rows are compared and written at once")
		require.Equal(t, 30, taskCount(t, b))
		require.Equal(t, int64(0), appRow(t, b).RegPendingMs)
	})
}

func TestDeferredRegistrationIsJoinedWrittenInChunksAndFinishedOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(30, everyMinute)
		ds[3].Paused = true
		first, err := b.store.BeginRegistration(b.ctx, b.app, ds, 10)
		require.NoError(t, err)
		require.True(t, first.Deferred)
		require.Equal(t, t0, first.CreatedMs)
		require.Equal(t, 0, taskCount(t, b), "a deferred registration writes no task row")
		genBefore, err := b.store.TaskGen(b.ctx, b.app)
		require.NoError(t, err)

		// The first replica writes one chunk of three and is killed; a
		// replica started later joins the same write, with the same
		// created_ms.
		state, wrote, err := b.store.WriteDeferred(b.ctx, b.app, first, 1, 3, ds[10:20])
		require.NoError(t, err)
		require.Equal(t, store.DeferredPending, state)
		require.True(t, wrote)
		b.clock.Add(5000)
		joined, err := b.store.BeginRegistration(b.ctx, b.app, ds, 10)
		require.NoError(t, err)
		require.Equal(t, first, joined)
		state, marks, err := b.store.DeferredProgress(b.ctx, b.app, joined)
		require.NoError(t, err)
		require.Equal(t, store.DeferredPending, state)
		require.Equal(t, "010", marks)

		// It writes the other chunks; the one written is not written again.
		for k := range 3 {
			state, wrote, err = b.store.WriteDeferred(b.ctx, b.app, joined, k, 3, ds[10*k:10*k+10])
			require.NoError(t, err)
			require.Equal(t, k != 1, wrote, "chunk %d", k)
			want := store.DeferredPending
			if k == 2 {
				want = store.DeferredFinished // the last chunk finishes it
			}
			require.Equal(t, want, state, "chunk %d", k)
		}
		state, wrote, err = b.store.WriteDeferred(b.ctx, b.app, first, 0, 3, ds[:10])
		require.NoError(t, err)
		require.Equal(t, store.DeferredFinished, state)
		require.False(t, wrote)
		require.Equal(t, store.AppState{App: b.app, TaskGen: genBefore, RegDigest: appRow(t, b).RegDigest, RegGen: genBefore},
			appRow(t, b), "finished: nothing pending, no chunk marks")

		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, all, 30)
		for _, row := range all {
			require.Equal(t, t0, row.CreatedMs, row.Code)
			require.Equal(t, t0, row.UpdatedMs, row.Code)
			require.Equal(t, int64(1), row.Version, row.Code)
			want := store.TaskActive
			if row.Code == ds[3].Code {
				want = store.TaskPaused
			}
			require.Equal(t, want, row.Status, row.Code)
		}
		gen, err := b.store.TaskGen(b.ctx, b.app)
		require.NoError(t, err)
		require.Equal(t, genBefore, gen, "the deferred rows do not move the task generation")

		// A restart of the same tasks finds the digest current.
		again, err := b.store.BeginRegistration(b.ctx, b.app, ds, 10)
		require.NoError(t, err)
		require.Equal(t, store.Registration{Gen: gen}, again)
	})
}

func TestDeferredRegistrationSupersededByOtherTasksWritesNoMore(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(30, everyMinute)
		reg, err := b.store.BeginRegistration(b.ctx, b.app, ds, 10)
		require.NoError(t, err)
		require.True(t, reg.Deferred)

		// A replica of other code (20 of the tasks, another definition)
		// does not join: it writes its rows at once, and the first
		// registration's writers stop.
		hourly := &store.Definition{Spec: "0 0 * * * *"}
		other, err := b.store.BeginRegistration(b.ctx, b.app, defs(20, hourly), 10)
		require.NoError(t, err)
		require.False(t, other.Deferred)
		require.Equal(t, int64(0), appRow(t, b).RegPendingMs)

		state, wrote, err := b.store.WriteDeferred(b.ctx, b.app, reg, 2, 3, ds[20:])
		require.NoError(t, err)
		require.Equal(t, store.DeferredSuperseded, state)
		require.False(t, wrote)
		require.Equal(t, 20, taskCount(t, b), "the superseded writer wrote nothing")
	})
}
