package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// defs returns n TaskDefs, codes job.0000 ... in order, sharing one
// definition; every tenth has a name of its own, the others their code.
func defs(n int, def *store.Definition) []store.TaskDef {
	out := make([]store.TaskDef, n)
	for i := range out {
		code := fmt.Sprintf("job.%04d", i)
		out[i] = store.TaskDef{Code: code, Name: code, Def: def}
		if i%10 == 0 {
			out[i].Name = fmt.Sprintf("Job %d", i)
		}
	}
	return out
}

var everyMinute = &store.Definition{Spec: "0 * * * * *", TimeoutMs: 60000, Misfire: "run_once"}

// deleteByHand removes a task row the way no xtimer writer does: without
// bumping the app's task generation.
func deleteByHand(t *testing.T, b *bundle, code string) {
	t.Helper()
	require.NoError(t, b.db.Where("app = ? AND code = ?", b.app, code).Delete(&store.Task{}).Error)
}

func taskCount(t *testing.T, b *bundle) int {
	t.Helper()
	all, err := b.store.Tasks(b.ctx, b.app)
	require.NoError(t, err)
	return len(all)
}

func TestRegisterTasksInsertsSharedDefinitionsWithTheirNamesAndStatus(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		hourly := &store.Definition{Spec: "0 0 * * * *", TimeZone: "Asia/Shanghai", MaxAttempts: 3, Owner: "billing"}
		ds := defs(3000, everyMinute)
		for i := 1500; i < 3000; i++ {
			ds[i].Def = hourly
		}
		ds[7].Paused = true
		gen, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		require.Equal(t, int64(1), gen, "one registration that wrote: one bump")

		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, all, 3000)
		for i, row := range all {
			require.Equal(t, ds[i].Code, row.Code)
			require.Equal(t, ds[i].Name, row.Name, row.Code)
			require.NotZero(t, row.ID, row.Code)
			require.Equal(t, int64(1), row.Version, row.Code)
			require.Equal(t, t0, row.CreatedMs, row.Code)
			require.Equal(t, t0, row.UpdatedMs, row.Code)
			require.Equal(t, store.KindFunc, row.Kind, row.Code)
			require.Nil(t, row.HTTPTarget, row.Code)
			want := store.TaskFrom(b.app, ds[i], store.TaskHead{ID: row.ID, Status: row.Status, Version: 1, CreatedMs: t0, UpdatedMs: t0})
			require.Equal(t, want, row, "TaskFrom makes the row the table holds")
		}
		require.Equal(t, store.TaskPaused, all[7].Status)
		require.Equal(t, store.TaskActive, all[8].Status)
		require.Equal(t, "UTC", all[0].TimeZone, "zero values take the schema's defaults")
		require.Equal(t, 1, all[0].MaxAttempts)
		require.Equal(t, "Asia/Shanghai", all[2999].TimeZone)
		require.Equal(t, 3, all[2999].MaxAttempts)
		require.Equal(t, "billing", all[2999].Owner)

		heads := map[string]store.TaskHead{}
		require.NoError(t, b.store.TaskHeads(b.ctx, b.app, nil, func(h store.TaskHead) error {
			heads[h.Code] = h
			return nil
		}))
		require.Len(t, heads, 3000)
		h := heads["job.0007"]
		require.Equal(t, all[7].ID, h.ID)
		require.Equal(t, store.TaskHead{ID: h.ID, Code: "job.0007", Kind: store.KindFunc, Status: store.TaskPaused,
			Version: 1, CreatedMs: t0, UpdatedMs: t0}, h)
	})
}

// Tasks that differ only by their spec (each its own daily time) share
// one statement; each row still gets its own spec, name and status.
func TestRegisterTasksStoresEachSpecOfDefinitionsThatDifferOnlyByIt(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(1200, nil)
		for i := range ds {
			sec := i * 86_400 / len(ds)
			ds[i].Def = &store.Definition{Spec: fmt.Sprintf("%d %d %d * * *", sec%60, sec/60%60, sec/3600), TimeoutMs: 60000}
			ds[i].Paused = i%7 == 3
		}
		ds[1100].Def = &store.Definition{Spec: "0 0 3 * * *", TimeoutMs: 30000} // another definition
		_, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)

		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, all, len(ds))
		for i, row := range all {
			want := store.TaskFrom(b.app, ds[i], store.TaskHead{ID: row.ID, Status: store.TaskActive, Version: 1, CreatedMs: t0, UpdatedMs: t0})
			if ds[i].Paused {
				want.Status = store.TaskPaused
			}
			require.Equal(t, want, row)
		}
		require.Equal(t, "0 0 3 * * *", all[1100].Spec)
		require.Equal(t, int64(30000), all[1100].TimeoutMs)
		require.Equal(t, "24 14 0 * * *", all[12].Spec, "second 864 of the day")
		require.Equal(t, "Job 10", all[10].Name)
	})
}

// Names and specs travel to the database as one document or array
// literal per statement (insertDefsSQL): any text arrives as it is,
// quotes, backslashes, braces, commas, an unquoted NULL, spaces, a tab,
// HTML's specials and non-ASCII letters included.
func TestRegisterTasksKeepsEveryCharacterOfNamesAndSpecs(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		names := []string{`say "hi"`, `C:\reports\daily`, `{a,b}`, `NULL`, `"`, `\`, ` padded `, `café, 日本`, `a\"b`, `}{`, "tab\there", `<&>`}
		ds := defs(len(names)*2, nil)
		for i := range ds {
			ds[i].Name = names[i%len(names)]
			spec := "0 0 3 * * *"
			if i >= len(names) {
				spec = fmt.Sprintf("%d 0 3 * * *", i) // each its own: the specs go as rows too
			}
			ds[i].Def = &store.Definition{Spec: spec, TimeoutMs: 60000}
		}
		_, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, all, len(ds))
		for i, row := range all {
			require.Equal(t, ds[i].Code, row.Code)
			require.Equal(t, ds[i].Name, row.Name, row.Code)
			require.Equal(t, ds[i].Def.Spec, row.Spec, row.Code)
		}
	})
}

// The digest of the last registration lets a replica that registers the
// same tasks skip the rows while no task was written since: a row deleted
// by hand (which no generation records) stays deleted, until
// ReregisterTasks, which reads the rows whatever the digest says.
func TestRegisterTasksSkipsTheRowsWhileNoTaskWasWrittenSince(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(100, everyMinute)
		gen, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		require.Equal(t, int64(1), gen)
		deleteByHand(t, b, "job.0042")

		gen, err = b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		require.Equal(t, int64(1), gen, "nothing written")
		require.Equal(t, 99, taskCount(t, b), "the rows were not read: the deleted one is not noticed")

		gen, err = b.store.ReregisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		require.Equal(t, int64(2), gen)
		require.Equal(t, 100, taskCount(t, b))

		// Another set of tasks (one more) does not match the digest.
		deleteByHand(t, b, "job.0042")
		more := defs(101, everyMinute)
		gen, err = b.store.RegisterTasks(b.ctx, b.app, more)
		require.NoError(t, err)
		require.Equal(t, int64(3), gen)
		require.Equal(t, 101, taskCount(t, b))
	})
}

// An operator's write (a pause) moves the task generation past the
// digest's: the next registration reads the rows, writes what differs,
// keeps the pause, and leaves a digest the one after it can use.
func TestATaskWriteMakesTheNextRegistrationReadTheRows(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(100, everyMinute)
		_, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		b.set(t0 + 1000)
		require.NoError(t, b.store.SetTaskStatus(b.ctx, b.app, "job.0003", store.TaskPaused)) // gen 2
		deleteByHand(t, b, "job.0042")

		b.set(t0 + 2000)
		gen, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		require.Equal(t, int64(3), gen, "the missing row was written")
		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, all, 100)
		byCode := map[string]store.Task{}
		for _, row := range all {
			byCode[row.Code] = row
		}
		require.Equal(t, store.TaskPaused, byCode["job.0003"].Status, "a registration never resumes")
		require.Equal(t, int64(2), byCode["job.0003"].Version)
		require.Equal(t, t0+2000, byCode["job.0042"].CreatedMs)
		require.Equal(t, int64(1), byCode["job.0000"].Version, "unchanged rows are not written")

		deleteByHand(t, b, "job.0050")
		gen, err = b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		require.Equal(t, int64(3), gen)
		require.Equal(t, 99, taskCount(t, b), "the digest holds again")
	})
}

// A Register after Start (UpsertTask, one task) does not replace the
// digest of the full set: when it writes nothing, the full set's digest
// still holds; when it writes, the generation moves past it.
func TestAPartialRegistrationKeepsTheFullSetsDigest(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(100, everyMinute)
		_, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		same := store.TaskFrom(b.app, ds[5], store.TaskHead{})
		_, err = b.store.UpsertTask(b.ctx, &same)
		require.NoError(t, err)
		deleteByHand(t, b, "job.0042")
		gen, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		require.Equal(t, int64(1), gen)
		require.Equal(t, 99, taskCount(t, b), "the full set's digest still holds")

		changed := same
		changed.Spec = "0 */5 * * * *"
		_, err = b.store.UpsertTask(b.ctx, &changed)
		require.NoError(t, err)
		gen, err = b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		require.Equal(t, int64(3), gen, "the upsert bumped, and the registration wrote job.0005 back and job.0042")
		require.Equal(t, 100, taskCount(t, b))
		row, err := b.store.Task(b.ctx, b.app, "job.0005")
		require.NoError(t, err)
		require.Equal(t, "0 * * * * *", row.Spec)
		require.Equal(t, int64(3), row.Version)
	})
}

// The digest does not depend on the order the tasks come in: a replica
// whose map of handlers lists them in another order skips the rows too.
func TestRegisterTasksInAnyOrderMatchTheDigest(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(100, everyMinute)
		slices.Reverse(ds)
		gen, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.NoError(t, err)
		require.Equal(t, int64(1), gen)
		require.Equal(t, 100, taskCount(t, b))
		deleteByHand(t, b, "job.0042")
		shuffled := defs(100, everyMinute)
		rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		gen, err = b.store.RegisterTasks(b.ctx, b.app, shuffled)
		require.NoError(t, err)
		require.Equal(t, int64(1), gen)
		require.Equal(t, 99, taskCount(t, b), "the same set: the rows were skipped")

		other := defs(100, everyMinute)
		other[7].Name = "renamed"
		gen, err = b.store.RegisterTasks(b.ctx, b.app, other)
		require.NoError(t, err)
		require.Equal(t, int64(2), gen, "a name changed: another digest")
	})
}

// Three replicas registering the same tasks at once take turns behind the
// app's lock: one inserts, the others find every row written.
func TestConcurrentRegistrationsWriteTheRowsOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(3000, everyMinute)
		gens := make([]int64, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for g := range gens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				gens[g], errs[g] = b.store.RegisterTasks(b.ctx, b.app, ds)
			}()
		}
		wg.Wait()
		for g := range gens {
			require.NoError(t, errs[g], "replica %d", g)
			require.Equal(t, int64(1), gens[g], "replica %d: one bump in all", g)
		}
		all, err := b.store.Tasks(b.ctx, b.app)
		require.NoError(t, err)
		require.Len(t, all, 3000)
		for _, row := range all {
			require.Equal(t, int64(1), row.Version, row.Code)
		}
	})
}

func TestRegisterTasksRefusesBadInputNamingIt(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		ds := defs(3, everyMinute)
		ds[2].Code = ds[0].Code
		_, err := b.store.RegisterTasks(b.ctx, b.app, ds)
		require.EqualError(t, err, `store: register tasks: code "job.0000" given twice`)

		ds = defs(3, &store.Definition{Spec: ""})
		_, err = b.store.RegisterTasks(b.ctx, b.app, ds)
		require.EqualError(t, err, `store: task "job.0000" spec "": want 1 to 255 bytes`)

		ds = defs(1, everyMinute)
		ds[0].Def = nil
		_, err = b.store.RegisterTasks(b.ctx, b.app, ds)
		require.EqualError(t, err, `store: task "job.0000": definition is nil`)

		_, err = b.store.RegisterTasks(b.ctx, "", defs(1, everyMinute))
		require.EqualError(t, err, `store: register tasks: app "": want 1 to 64 bytes`)
		require.Zero(t, taskCount(t, b), "nothing written")
	})
}

// A code taken by an HTTP task refuses the registration whole.
func TestRegisterTasksRefusesACodeOfAnotherKind(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		target := `{"url":"http://127.0.0.1:1/"}`
		_, err := b.store.CreateTask(b.ctx, &store.Task{App: b.app, Code: "job.0001", Kind: store.KindHTTP, Spec: "0 * * * * *", HTTPTarget: &target})
		require.NoError(t, err)
		_, err = b.store.RegisterTasks(b.ctx, b.app, defs(3, everyMinute))
		require.ErrorIs(t, err, store.ErrExists)
		require.Equal(t, 1, taskCount(t, b), "nothing written")
	})
}
