package store_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// taskGen reads app's task generation, failing the test on an error.
func taskGen(t *testing.T, b *bundle, app string) int64 {
	t.Helper()
	gen, err := b.store.TaskGen(b.ctx, app)
	require.NoError(t, err)
	return gen
}

func TestTaskGenOfAnUnknownAppIsZero(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		require.Equal(t, int64(0), taskGen(t, b, b.app))
	})
}

// Every write to a task moves its app's generation by one, in the write's
// transaction; a call that writes nothing, failed or not, leaves it alone.
func TestEveryTaskWriteBumpsTheTaskGenOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		upsert := func(tasks ...*store.Task) error {
			_, err := b.store.UpsertTasks(b.ctx, tasks)
			return err
		}
		at10 := reconcile(b.app)
		at10.Spec = "0 0 10 * * *"
		replaced := httpTask(b.app, "cb", `{"url":"b"}`)
		steps := []struct {
			name    string
			write   func() error
			wantErr error // nil: no error
			bump    int64
		}{
			{"UpsertTasks inserting", func() error { return upsert(reconcile(b.app), goTask(b.app, "other")) }, nil, 1},
			{"UpsertTasks with nothing changed", func() error { return upsert(reconcile(b.app), goTask(b.app, "other")) }, nil, 0},
			{"UpsertTasks updating a definition", func() error { return upsert(at10, goTask(b.app, "other")) }, nil, 1},
			{"UpsertTasks inserting and updating", func() error {
				return upsert(reconcile(b.app), goTask(b.app, "other"), goTask(b.app, "third"))
			}, nil, 1},
			{"SetTaskStatus", func() error {
				return b.store.SetTaskStatus(b.ctx, b.app, "billing.reconcile", store.TaskPaused)
			}, nil, 1},
			{"SetTaskStatus of a missing task", func() error {
				return b.store.SetTaskStatus(b.ctx, b.app, "none", store.TaskPaused)
			}, store.ErrNotFound, 0},
			{"SetOverride", func() error {
				return b.store.SetOverride(b.ctx, b.app, "billing.reconcile", store.Override{Spec: "0 30 9 * * *"})
			}, nil, 1},
			{"ResetOverride", func() error { return b.store.ResetOverride(b.ctx, b.app, "billing.reconcile") }, nil, 1},
			{"CreateTask", func() error {
				_, err := b.store.CreateTask(b.ctx, httpTask(b.app, "cb", `{"url":"a"}`))
				return err
			}, nil, 1},
			{"CreateTask of an existing code", func() error {
				_, err := b.store.CreateTask(b.ctx, httpTask(b.app, "cb", `{"url":"a"}`))
				return err
			}, store.ErrExists, 0},
			{"ReplaceTask", func() error {
				_, err := b.store.ReplaceTask(b.ctx, replaced, 1)
				return err
			}, nil, 1},
			{"ReplaceTask at a stale version", func() error {
				_, err := b.store.ReplaceTask(b.ctx, replaced, 1)
				return err
			}, store.ErrStale, 0},
			{"ReplaceTask of a missing task", func() error {
				_, err := b.store.ReplaceTask(b.ctx, httpTask(b.app, "none", `{}`), 1)
				return err
			}, store.ErrNotFound, 0},
			{"DeleteTask", func() error {
				return b.store.DeleteTask(b.ctx, b.app, "cb", store.KindHTTP, "deleted")
			}, nil, 1},
			{"DeleteTask of a missing task", func() error {
				return b.store.DeleteTask(b.ctx, b.app, "cb", store.KindHTTP, "deleted")
			}, store.ErrNotFound, 0},
		}
		var gen int64
		for _, step := range steps {
			err := step.write()
			if step.wantErr == nil {
				require.NoError(t, err, step.name)
			} else {
				require.ErrorIs(t, err, step.wantErr, step.name)
			}
			gen += step.bump
			require.Equal(t, gen, taskGen(t, b, b.app), step.name)
		}
		require.Equal(t, int64(9), gen)
	})
}

// goTask is a minimal task of a Go handler.
func goTask(app, code string) *store.Task {
	return &store.Task{App: app, Code: code, Spec: "* * * * *"}
}

func TestAppsHaveIndependentTaskGens(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		other := b.app + "x"
		_, err := b.store.UpsertTask(b.ctx, reconcile(b.app))
		require.NoError(t, err)
		_, err = b.store.UpsertTask(b.ctx, reconcile(other))
		require.NoError(t, err)
		require.NoError(t, b.store.SetTaskStatus(b.ctx, other, "billing.reconcile", store.TaskPaused))
		require.NoError(t, b.store.SetTaskStatus(b.ctx, other, "billing.reconcile", store.TaskActive))

		require.Equal(t, int64(1), taskGen(t, b, b.app))
		require.Equal(t, int64(3), taskGen(t, b, other))
		require.Equal(t, int64(0), taskGen(t, b, b.app+"y"))
	})
}

// Concurrent writers of one app each count, starting from an app without a
// generation row: the first bumps race to create it.
func TestConcurrentTaskWritesEachBumpTheTaskGen(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		const writers, writes = 4, 10
		for w := range writers {
			// Written behind the store's back, so that no row of xtimer_apps exists yet.
			row := goTask(b.app, fmt.Sprintf("t%d", w))
			require.NoError(t, b.db.Create(row).Error)
		}
		require.Equal(t, int64(0), taskGen(t, b, b.app))

		var wg sync.WaitGroup
		errs := make(chan error, writers*writes)
		for w := range writers {
			wg.Go(func() {
				for i := range writes {
					status := store.TaskPaused
					if i%2 == 1 {
						status = store.TaskActive
					}
					errs <- b.store.SetTaskStatus(b.ctx, b.app, fmt.Sprintf("t%d", w), status)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int64(writers*writes), taskGen(t, b, b.app))
	})
}

// TaskSums counts an app's tasks and sums their creation instants and versions: an
// insert, a delete and a version bump each change it, whoever wrote them;
// other apps' tasks do not count.
func TestTaskSumsFollowInsertsDeletesAndVersions(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		sums := func() store.TaskSums {
			got, err := b.store.TaskSums(b.ctx, b.app)
			require.NoError(t, err)
			return got
		}
		require.Equal(t, store.TaskSums{}, sums())

		rec, err := b.store.UpsertTask(b.ctx, reconcile(b.app))
		require.NoError(t, err)
		cb, err := b.store.CreateTask(b.ctx, httpTask(b.app, "cb", `{"url":"a"}`))
		require.NoError(t, err)
		_, err = b.store.UpsertTask(b.ctx, reconcile(b.app+"-other"))
		require.NoError(t, err)
		require.Equal(t, store.TaskSums{Count: 2, Created: store.CreatedTerm(rec.CreatedMs) + store.CreatedTerm(cb.CreatedMs), Versions: 2}, sums())

		require.NoError(t, b.store.SetTaskStatus(b.ctx, b.app, rec.Code, store.TaskPaused))
		require.Equal(t, store.TaskSums{Count: 2, Created: store.CreatedTerm(rec.CreatedMs) + store.CreatedTerm(cb.CreatedMs), Versions: 3}, sums())
		// A writer that bumps the version and not the generation (an older
		// release) shows too.
		require.NoError(t, b.db.Model(&store.Task{}).Where("id = ?", cb.ID).
			UpdateColumn("version", 2).Error)
		require.Equal(t, store.TaskSums{Count: 2, Created: store.CreatedTerm(rec.CreatedMs) + store.CreatedTerm(cb.CreatedMs), Versions: 4}, sums())

		require.NoError(t, b.store.DeleteTask(b.ctx, b.app, "cb", store.KindHTTP, "test"))
		require.Equal(t, store.TaskSums{Count: 1, Created: store.CreatedTerm(rec.CreatedMs), Versions: 2}, sums())
	})
}
