package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// manyTasks returns n tasks of app, codes job.0000 ... in order, every
// minute, with the schema's defaults left zero (kind, time zone, attempts).
func manyTasks(app string, n int) []*store.Task {
	tasks := make([]*store.Task, n)
	for i := range tasks {
		tasks[i] = &store.Task{
			App: app, Code: fmt.Sprintf("job.%04d", i), Name: fmt.Sprintf("Job %d", i),
			Spec: "0 * * * * *", TimeoutMs: 60000,
		}
	}
	return tasks
}

func TestUpsertTasksRecordsThousandsInOneCall(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		tasks := manyTasks(b.app, 3000)
		tasks[7].Status = store.TaskPaused
		tasks[8].TimeZone, tasks[8].MaxAttempts = "Asia/Shanghai", 3

		began := time.Now()
		got, err := b.store.UpsertTasks(b.ctx, tasks)
		took := time.Since(began)
		require.NoError(t, err)
		t.Logf("%s: UpsertTasks of 3,000 new tasks took %s", b.db.Dialector.Name(), took)

		require.Len(t, got, 3000)
		for i, row := range got {
			require.Equal(t, tasks[i].Code, row.Code, "row %d in input order", i)
			require.NotZero(t, row.ID, row.Code)
			require.Equal(t, int64(1), row.Version, row.Code)
		}
		require.Equal(t, store.TaskActive, got[0].Status)
		require.Equal(t, store.KindFunc, got[0].Kind)
		require.Equal(t, "UTC", got[0].TimeZone)
		require.Equal(t, 1, got[0].MaxAttempts)
		require.Equal(t, t0, got[0].CreatedMs)
		require.Equal(t, store.TaskPaused, got[7].Status)
		require.Equal(t, "Asia/Shanghai", got[8].TimeZone)
		require.Equal(t, 3, got[8].MaxAttempts)

		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, all, 3000)
		require.Equal(t, got[0], all[0])
		require.Equal(t, got[2999], all[2999])
		require.Equal(t, "job.2999", all[2999].Code)
		require.Equal(t, "Job 2999", all[2999].Name)

		empty, err := b.store.UpsertTasks(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, empty)
	})
}

func TestUpsertTasksBumpsOnlyChangedTasksAndKeepsOperatorState(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		_, err := b.store.UpsertTasks(b.ctx, manyTasks(b.app, 3000))
		require.NoError(t, err)

		// An operator pauses one task and overrides another's schedule.
		b.set(t0 + 1000)
		require.NoError(t, b.store.SetTaskStatus(b.ctx, b.app, "job.0003", store.TaskPaused))
		require.NoError(t, b.store.SetOverride(b.ctx, b.app, "job.0004", store.Override{Spec: "0 30 * * * *"}))

		// A redeploy: ten definitions changed, among them the paused and the
		// overridden task; 2,990 unchanged.
		b.set(t0 + 2000)
		next := manyTasks(b.app, 3000)
		changed := map[string]bool{}
		for i := 0; i < 10; i++ {
			task := next[i*300+3] // job.0003, job.0303, ...
			task.Spec, task.Description = "0 */5 * * * *", fmt.Sprintf("changed %d", i)
			changed[task.Code] = true
		}
		next[1].Code, next[4].Code = next[4].Code, next[1].Code // not sorted: output follows input
		next[4].Name, next[1].Name = "Job 1", "Job 4"
		began := time.Now()
		got, err := b.store.UpsertTasks(b.ctx, next)
		t.Logf("%s: UpsertTasks of 3,000 tasks, 10 changed, took %s", b.db.Dialector.Name(), time.Since(began))
		require.NoError(t, err)
		require.Len(t, got, 3000)
		require.Equal(t, "job.0004", got[1].Code)
		require.Equal(t, "job.0001", got[4].Code)

		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, all, 3000)
		bumped := 0
		for _, row := range all {
			wantVersion := int64(1)
			switch row.Code {
			case "job.0003": // paused (2), then changed (3)
				wantVersion = 3
			case "job.0004": // overridden (2), unchanged
				wantVersion = 2
			default:
				if changed[row.Code] {
					wantVersion = 2
				}
			}
			require.Equal(t, wantVersion, row.Version, row.Code)
			if changed[row.Code] {
				bumped++
				require.Equal(t, "0 */5 * * * *", row.Spec, row.Code)
				require.Equal(t, t0+2000, row.UpdatedMs, row.Code)
				require.Equal(t, t0, row.CreatedMs, row.Code)
			} else if row.Code != "job.0004" {
				require.Equal(t, t0, row.UpdatedMs, row.Code)
			}
		}
		require.Equal(t, 10, bumped)

		byCode := map[string]store.Task{}
		for _, row := range all {
			byCode[row.Code] = row
		}
		require.Equal(t, store.TaskPaused, byCode["job.0003"].Status, "a redeploy never resumes")
		require.Equal(t, "changed 0", byCode["job.0003"].Description)
		require.NotNil(t, byCode["job.0004"].SpecOverride)
		spec, _, _ := byCode["job.0004"].Effective()
		require.Equal(t, "0 30 * * * *", spec, "a redeploy keeps the override")
		for i, row := range got {
			require.Equal(t, byCode[row.Code], row, "returned row %d is the stored row", i)
		}
	})
}

func TestConcurrentUpsertTasksWithOverlappingCodesLeaveOneRowPerCode(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		// Three replicas start at once: codes 0-1499, 500-1999 and 1000-2499.
		tasks := manyTasks(b.app, 2500)
		var wg sync.WaitGroup
		errs := make([]error, 3)
		got := make([][]store.Task, 3)
		for g := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[g], errs[g] = b.store.UpsertTasks(b.ctx, tasks[g*500:g*500+1500])
			}()
		}
		wg.Wait()
		for g, err := range errs {
			require.NoError(t, err, "goroutine %d", g)
			require.Len(t, got[g], 1500)
		}
		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, all, 2500)
		ids := map[string]int64{}
		for i, row := range all {
			require.Equal(t, fmt.Sprintf("job.%04d", i), row.Code)
			require.Equal(t, int64(1), row.Version, row.Code)
			ids[row.Code] = row.ID
		}
		for g := range got {
			for _, row := range got[g] {
				require.Equal(t, ids[row.Code], row.ID, "goroutine %d sees the one row of %s", g, row.Code)
			}
		}
	})
}

func TestUpsertTasksRefusesABadBatchWhole(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		tasks := manyTasks(b.app, 3)
		tasks[2].Code = tasks[0].Code
		_, err := b.store.UpsertTasks(b.ctx, tasks)
		require.EqualError(t, err, `store: upsert tasks: row 2 code "job.0000" repeats row 0`)

		tasks = manyTasks(b.app, 3)
		tasks[1].App = "other"
		_, err = b.store.UpsertTasks(b.ctx, tasks)
		require.EqualError(t, err, fmt.Sprintf(`store: upsert tasks: row 1 app "other" differs from row 0 app %q`, b.app))

		tasks = manyTasks(b.app, 3)
		tasks[2].Kind = "grpc"
		_, err = b.store.UpsertTasks(b.ctx, tasks)
		require.EqualError(t, err, `store: task "job.0002" kind "grpc": want "func" or "http"`)

		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Empty(t, all)
	})
}

// On PostgreSQL, registering many tasks into a tasks table never analyzed
// analyzes it, inside the upsert's transaction, so that the read-back of
// the rows (500 codes a statement) is planned on the (app, code) index.
func TestLargeFirstUpsertAnalyzesTheTasksTable(t *testing.T) {
	t.Parallel()
	b := open(t, testsvc.Postgres(t))
	require.NoError(t, b.store.Migrate(b.ctx))
	analyzed := func(t assert.TestingT) bool {
		var done bool
		assert.NoError(t, b.db.Raw(`SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relid = 'xtimer_tasks'::regclass`).Scan(&done).Error)
		return done
	}
	_, err := b.store.UpsertTasks(b.ctx, manyTasks(b.app, 10))
	require.NoError(t, err)
	require.False(t, analyzed(t), "ten tasks do not call for ANALYZE")

	began := time.Now()
	got, err := b.store.UpsertTasks(b.ctx, manyTasks(b.app, 5000))
	require.NoError(t, err)
	t.Logf("UpsertTasks of 5,000 tasks, 4,990 new: %s", time.Since(began))
	require.Len(t, got, 5000)
	for i, row := range got {
		require.Equal(t, fmt.Sprintf("job.%04d", i), row.Code)
		require.NotZero(t, row.ID)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.True(c, analyzed(c)) }, 5*time.Second, 20*time.Millisecond,
		"5,000 tasks into a table never analyzed")
}
