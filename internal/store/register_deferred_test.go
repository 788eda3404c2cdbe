package store_test

import (
	"slices"
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
		digest := appRow(t, b).RegDigest
		require.Equal(t, store.AppState{App: b.app, TaskGen: genBefore, RegDigest: digest, RegGen: genBefore, RegUniformMs: t0, RegUniformDigest: digest},
			appRow(t, b), "finished: nothing pending, no chunk marks; the rows' instant kept")

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

		// A restart of the same tasks finds the digest current, and the
		// rows as the write left them.
		again, err := b.store.BeginRegistration(b.ctx, b.app, ds, 10)
		require.NoError(t, err)
		require.Equal(t, store.Registration{Gen: gen, UniformMs: t0}, again)
	})
}

// headsBut returns the codes TaskHeadsBut reads at uniformMs, and the
// count of the rows it does not (CountTasks, less the heads read).
func headsBut(t *testing.T, b *bundle, uniformMs int64) (codes []string, uniform int64) {
	t.Helper()
	err := b.store.TaskHeadsBut(b.ctx, b.app, uniformMs, nil, func(h store.TaskHead) error {
		codes = append(codes, h.Code)
		return nil
	})
	require.NoError(t, err)
	all, err := b.store.CountTasks(b.ctx, b.app)
	require.NoError(t, err)
	slices.Sort(codes)
	return codes, all - int64(len(codes))
}

// The rows a deferred registration wrote and nobody changed since are
// counted, not read; a row created paused, paused by an operator, given a
// schedule or options by the console, rewritten by a registration of
// another definition, or of another task, is read. A registration of
// other tasks has no uniform rows to skip.
func TestTaskHeadsButSkipsTheRowsAsTheDeferredWriteLeftThem(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(20, everyMinute)
		ds[3].Paused = true
		reg, err := b.store.BeginRegistration(b.ctx, b.app, ds, 10)
		require.NoError(t, err)
		require.True(t, reg.Deferred)
		require.Zero(t, reg.UniformMs, "not written yet")
		_, _, err = b.store.WriteDeferred(b.ctx, b.app, reg, 0, 1, ds)
		require.NoError(t, err)

		codes, uniform := headsBut(t, b, reg.CreatedMs)
		require.Equal(t, []string{ds[3].Code}, codes, "created paused")
		require.Equal(t, int64(19), uniform)
		require.ErrorContains(t, b.store.TaskHeadsBut(b.ctx, b.app, 0, nil, func(store.TaskHead) error { return nil }), "no uniform registration")

		b.clock.Add(60_000)
		require.NoError(t, b.store.SetTaskStatus(b.ctx, b.app, ds[5].Code, store.TaskPaused))
		require.NoError(t, b.store.SetTaskStatus(b.ctx, b.app, ds[5].Code, store.TaskActive))
		require.NoError(t, b.store.SetOverride(b.ctx, b.app, ds[6].Code, store.Override{Spec: "0 0 4 * * *"}))
		timeout := int64(90_000)
		require.NoError(t, b.store.SetOptionOverrides(b.ctx, b.app, ds[7].Code, store.OptionOverrides{TimeoutMs: &timeout}))
		again, err := b.store.BeginRegistration(b.ctx, b.app, ds, 10)
		require.NoError(t, err)
		require.Equal(t, reg.CreatedMs, again.UniformMs, "the same tasks, rows changed since: the uniform ones are still known")
		codes, uniform = headsBut(t, b, again.UniformMs)
		require.Equal(t, []string{ds[3].Code, ds[5].Code, ds[6].Code, ds[7].Code}, codes, "paused and resumed: version 3")
		require.Equal(t, int64(16), uniform)

		// Another definition of one task: its row is rewritten, and the
		// digest is another one's.
		changed := slices.Clone(ds)
		def := *changed[8].Def
		def.TimeoutMs = 5000
		changed[8].Def = &def
		other, err := b.store.BeginRegistration(b.ctx, b.app, changed, 10)
		require.NoError(t, err)
		require.Zero(t, other.UniformMs, "not the tasks of the deferred write")
		codes, uniform = headsBut(t, b, reg.CreatedMs)
		require.Equal(t, []string{ds[3].Code, ds[5].Code, ds[6].Code, ds[7].Code, ds[8].Code}, codes)
		require.Equal(t, int64(15), uniform)
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
