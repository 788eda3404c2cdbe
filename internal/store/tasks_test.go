package store_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

func reconcile(app string) *store.Task {
	return &store.Task{
		App: app, Code: "billing.reconcile", Name: "Reconcile", Owner: "billing-team",
		Spec: "0 0 9 * * *", TimeZone: "Asia/Shanghai", TimeoutMs: 300000,
		MaxAttempts: 3, BackoffBaseMs: 1000, BackoffMaxMs: 60000,
		Misfire: "run_once", MisfireWindowMs: 3600000, Overlap: "forbid",
	}
}

func TestUpsertTaskInsertsActiveAtVersionOne(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		got, err := b.store.UpsertTask(b.ctx, reconcile(b.app))
		require.NoError(t, err)
		require.NotZero(t, got.ID)
		require.Equal(t, store.TaskActive, got.Status)
		require.Equal(t, store.KindFunc, got.Kind)
		require.Equal(t, int64(1), got.Version)
		require.Equal(t, t0, got.CreatedMs)
		require.Equal(t, t0, got.UpdatedMs)
		require.Equal(t, "Asia/Shanghai", got.TimeZone)
		require.Equal(t, 3, got.MaxAttempts)
		require.Nil(t, got.SpecOverride)

		read, err := b.store.Task(b.ctx, b.app, "billing.reconcile")
		require.NoError(t, err)
		require.Equal(t, got, read)
	})
}

func TestRedeployNeverResumesAPausedTaskNorDropsOverrides(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		_, err := b.store.UpsertTask(b.ctx, reconcile(b.app))
		require.NoError(t, err)
		b.set(t0 + 1000)
		require.NoError(t, b.store.SetTaskStatus(b.ctx, b.app, "billing.reconcile", store.TaskPaused))
		require.NoError(t, b.store.SetOverride(b.ctx, b.app, "billing.reconcile", store.Override{Spec: "0 30 9 * * *"}))

		// Same definition again: nothing changes, not even the version.
		b.set(t0 + 2000)
		same, err := b.store.UpsertTask(b.ctx, reconcile(b.app))
		require.NoError(t, err)
		require.Equal(t, int64(3), same.Version)
		require.Equal(t, t0+1000, same.UpdatedMs)

		// A new definition updates the code columns only.
		changed := reconcile(b.app)
		changed.Spec, changed.MaxAttempts, changed.Description = "0 0 10 * * *", 5, "now at ten"
		b.set(t0 + 3000)
		got, err := b.store.UpsertTask(b.ctx, changed)
		require.NoError(t, err)
		require.Equal(t, int64(4), got.Version)
		require.Equal(t, t0+3000, got.UpdatedMs)
		require.Equal(t, t0, got.CreatedMs)
		require.Equal(t, "0 0 10 * * *", got.Spec)
		require.Equal(t, 5, got.MaxAttempts)
		require.Equal(t, "now at ten", got.Description)
		require.Equal(t, store.TaskPaused, got.Status)
		require.NotNil(t, got.SpecOverride)
		spec, dialect, tz := got.Effective()
		require.Equal(t, []string{"0 30 9 * * *", "", "Asia/Shanghai"}, []string{spec, dialect, tz})

		require.NoError(t, b.store.ResetOverride(b.ctx, b.app, "billing.reconcile"))
		got, err = b.store.Task(b.ctx, b.app, "billing.reconcile")
		require.NoError(t, err)
		require.Equal(t, int64(5), got.Version)
		spec, _, _ = got.Effective()
		require.Equal(t, "0 0 10 * * *", spec)
	})
}

func TestConcurrentUpsertsOfOneTaskLeaveOneRow(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = b.store.UpsertTask(b.ctx, reconcile(b.app))
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		tasks, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		require.Equal(t, int64(1), tasks[0].Version)
	})
}

func TestTasksOfOneAppAreInvisibleToAnother(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		other := b.app + "x"
		for _, app := range []string{b.app, other} {
			_, err := b.store.UpsertTask(b.ctx, reconcile(app))
			require.NoError(t, err)
		}
		second := reconcile(b.app)
		second.Code = "cache.warm"
		_, err := b.store.UpsertTask(b.ctx, second)
		require.NoError(t, err)
		require.NoError(t, b.store.SetTaskStatus(b.ctx, other, "billing.reconcile", store.TaskPaused))

		tasks, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, tasks, 2)
		require.Equal(t, "billing.reconcile", tasks[0].Code)
		require.Equal(t, "cache.warm", tasks[1].Code)
		require.Equal(t, store.TaskActive, tasks[0].Status)

		versions, err := b.store.TaskVersions(b.ctx, b.app)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"billing.reconcile": 1, "cache.warm": 1}, versions)
		versions, err = b.store.TaskVersions(b.ctx, other)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"billing.reconcile": 2}, versions)
	})
}

func TestUnknownTaskIsErrNotFound(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		_, err := b.store.Task(b.ctx, b.app, "nope")
		require.ErrorIs(t, err, store.ErrNotFound)
		require.ErrorContains(t, err, `task "nope"`)
		require.ErrorIs(t, b.store.SetTaskStatus(b.ctx, b.app, "nope", store.TaskPaused), store.ErrNotFound)
		require.ErrorIs(t, b.store.SetOverride(b.ctx, b.app, "nope", store.Override{Spec: "@hourly"}), store.ErrNotFound)
		require.ErrorIs(t, b.store.ResetOverride(b.ctx, b.app, "nope"), store.ErrNotFound)
	})
}

func TestBadTaskInputNamesFieldAndValue(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		err := b.store.SetTaskStatus(b.ctx, b.app, "billing.reconcile", "stopped")
		require.EqualError(t, err, `store: task "billing.reconcile" status "stopped": want "active" or "paused"`)

		bad := reconcile(b.app)
		bad.Kind = "grpc"
		_, err = b.store.UpsertTask(b.ctx, bad)
		require.EqualError(t, err, `store: task "billing.reconcile" kind "grpc": want "func" or "http"`)

		bad = reconcile(b.app)
		bad.Code = ""
		_, err = b.store.UpsertTask(b.ctx, bad)
		require.EqualError(t, err, `store: task code "": want 1 to 128 bytes`)

		err = b.store.SetOverride(b.ctx, b.app, "billing.reconcile", store.Override{})
		require.ErrorContains(t, err, "every field is empty")
	})
}
