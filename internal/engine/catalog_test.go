package engine

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// dailyCodes are n task codes, and a daily spec each, for a deferred
// registration: none fires while a test runs.
func dailyCodes(n int) (codes, specs []string) {
	for i := range n {
		codes = append(codes, fmt.Sprintf("daily.%04d", i))
		specs = append(specs, fmt.Sprintf("%d %d 3 * * *", i%60, i/60%60))
	}
	return codes, specs
}

// deferringEngine is an engine of app on db with the tasks of codes,
// which defers a registration of 10 tasks or more and writes 7 rows a
// chunk; mod, when given, changes its Config further.
func deferringEngine(t *testing.T, db *gorm.DB, app, replica string, codes, specs []string, mod ...func(*Config)) *Engine {
	t.Helper()
	e := newEngine(t, setupOpts{db: db, app: app}, func(c *Config) {
		c.DeferFrom, c.InstanceID = 10, replica
		for _, m := range mod {
			m(c)
		}
	})
	e.catalog.chunk = 7
	h := func(context.Context, *Attempt) error { return nil }
	for i, code := range codes {
		mustRegister(t, e, code, specs[i], h)
	}
	return e
}

// requireViewIsTheRows checks that e's view holds every row of its app
// as stored: version, created_ms and status, and the sums the minute
// check compares.
func requireViewIsTheRows(t *testing.T, e *Engine, n int) {
	t.Helper()
	ctx := context.Background()
	rows, err := e.store.Tasks(ctx, e.opts.App)
	require.NoError(t, err)
	require.Len(t, rows, n)
	sums, err := e.store.TaskSums(ctx, e.opts.App)
	require.NoError(t, err)
	e.view.mu.Lock()
	defer e.view.mu.Unlock()
	require.False(t, e.view.deferred)
	for _, row := range rows {
		got := e.view.taskLocked(row.Code)
		require.NotNil(t, got, row.Code)
		require.Equal(t, []any{row.Version, row.CreatedMs, row.Status},
			[]any{got.version, got.createdMs, got.statusText()}, row.Code)
	}
	require.Equal(t, sums, store.TaskSums(e.view.viewSums))
}

func TestFleetOnAnEmptyAppStartsBeforeItsTaskRowsAreWrittenAndAgrees(t *testing.T) {
	t.Parallel()
	for _, backend := range testsvc.Backends() {
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			db, app := backend.Open(t), testsvc.App(t)
			codes, specs := dailyCodes(60)
			fleet := make([]*Engine, 3)
			for i := range fleet {
				fleet[i] = deferringEngine(t, db, app, fmt.Sprintf("replica-%d", i), codes, specs)
			}
			ctx := context.Background()
			errs := make(chan error, len(fleet))
			for _, e := range fleet {
				go func() { errs <- e.Start(ctx) }()
			}
			for range fleet {
				require.NoError(t, <-errs)
			}
			for _, e := range fleet {
				stopOnCleanup(t, e)
			}
			// Every replica runs the tasks from their registrations, all
			// created at the instant the first one recorded.
			var created int64
			for _, e := range fleet {
				e.view.mu.Lock()
				for _, code := range codes {
					got := e.view.taskLocked(code)
					require.NotNil(t, got, code)
					require.True(t, got.active(), code)
					if created == 0 {
						created = got.createdMs
					}
					require.Equal(t, created, got.createdMs, code)
				}
				e.view.mu.Unlock()
			}
			for _, e := range fleet {
				<-e.catalog.done
			}
			for _, e := range fleet {
				requireViewIsTheRows(t, e, len(codes))
			}
			var st store.AppState
			require.NoError(t, db.Where("app = ?", app).Take(&st).Error)
			require.Equal(t, int64(0), st.RegPendingMs, "the write is finished")
		})
	}
}

func TestReplicaJoinsADeferredWriteAKilledReplicaLeftAndKeepsOperatorChanges(t *testing.T) {
	t.Parallel()
	onPostgresAndSQLite(t, func(t *testing.T, db *gorm.DB) {
		app := testsvc.App(t)
		codes, specs := dailyCodes(30)
		ctx := context.Background()
		// What a replica killed mid-write left: the registration begun,
		// one chunk written.
		st := store.New(db)
		require.NoError(t, st.Migrate(ctx))
		defs := make([]store.TaskDef, len(codes))
		for i, code := range codes {
			def := taskDef(specs[i])
			defs[i] = store.TaskDef{Code: code, Name: code, Def: &def}
		}
		reg, err := st.BeginRegistration(ctx, app, defs, 10)
		require.NoError(t, err)
		require.True(t, reg.Deferred)
		// The chunks of 30 tasks at 7 a chunk (deferringEngine): 5, of 6
		// tasks each in code order.
		chunk0 := defs[:6]
		_, wrote, err := st.WriteDeferred(ctx, app, reg, 0, 5, chunk0)
		require.NoError(t, err)
		require.True(t, wrote)
		// An operator pauses one of the tasks written.
		require.NoError(t, st.SetTaskStatus(ctx, app, chunk0[0].Code, store.TaskPaused))

		e := deferringEngine(t, db, app, "replica-later", codes, specs)
		require.NoError(t, e.Start(ctx))
		stopOnCleanup(t, e)
		e.view.mu.Lock()
		paused := e.view.taskLocked(chunk0[0].Code)
		running := e.view.taskLocked(codes[len(codes)-1])
		e.view.mu.Unlock()
		require.Equal(t, store.TaskPaused, paused.statusText(), "the operator's pause, read at Start")
		require.Equal(t, reg.CreatedMs, running.createdMs, "the killed replica's created_ms")
		<-e.catalog.done
		requireViewIsTheRows(t, e, len(codes))
	})
}

func TestRestartAfterADeferredWriteReadsTheRows(t *testing.T) {
	t.Parallel()
	onPostgresAndSQLite(t, func(t *testing.T, db *gorm.DB) {
		app := testsvc.App(t)
		codes, specs := dailyCodes(25)
		ctx := context.Background()
		first := deferringEngine(t, db, app, "replica-0", codes, specs)
		require.NoError(t, first.Start(ctx))
		<-first.catalog.done
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, first.Stop(stopCtx))

		again := deferringEngine(t, db, app, "replica-0", codes, specs)
		require.NoError(t, again.Start(ctx))
		stopOnCleanup(t, again)
		again.view.mu.Lock()
		deferred := again.view.deferred
		again.view.mu.Unlock()
		require.False(t, deferred, "the rows exist: nothing to defer")
		<-again.catalog.done
		requireViewIsTheRows(t, again, len(codes))
	})
}

// A restart after a deferred write reads the heads of the rows changed
// since (an operator's pause, schedule and options), takes the others as
// the write left them, and its view is the rows. A row deleted by hand
// makes the rows left as written one fewer than the tasks no head was
// read for: every head is read then, and the row is recorded again.
func TestRestartReadsOnlyTheRowsChangedSinceTheDeferredWrite(t *testing.T) {
	t.Parallel()
	onPostgresAndSQLite(t, func(t *testing.T, db *gorm.DB) {
		app := testsvc.App(t)
		codes, specs := dailyCodes(25)
		ctx := context.Background()
		start := func() (*Engine, *testsvc.LogBuffer) {
			t.Helper()
			logs := &testsvc.LogBuffer{}
			e := deferringEngine(t, db, app, "replica-0", codes, specs, func(c *Config) {
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			require.NoError(t, e.Start(ctx))
			<-e.catalog.done
			return e, logs
		}
		stop := func(e *Engine) {
			stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, e.Stop(stopCtx))
		}
		first, _ := start()
		stop(first)

		st := store.New(db)
		require.NoError(t, st.SetTaskStatus(ctx, app, codes[0], store.TaskPaused))
		require.NoError(t, st.SetOverride(ctx, app, codes[1], store.Override{Spec: "0 0 4 * * *"}))
		timeout := int64(90_000)
		require.NoError(t, st.SetOptionOverrides(ctx, app, codes[2], store.OptionOverrides{TimeoutMs: &timeout}))

		again, logs := start()
		require.Contains(t, logs.String(), `msg="xtimer read the heads of the changed tasks only" read=3 "as written"=22`)
		require.NotContains(t, logs.String(), "reading every task", "the rows left as written are the tasks no head was read for")
		requireViewIsTheRows(t, again, len(codes))
		again.view.mu.Lock()
		paused, moved, longer := again.view.taskLocked(codes[0]), again.view.taskLocked(codes[1]), again.view.taskLocked(codes[2])
		again.view.mu.Unlock()
		require.Equal(t, store.TaskPaused, paused.statusText())
		require.NotNil(t, moved.over(), "the console's schedule")
		require.Equal(t, timeout, longer.def().TimeoutMs, "the console's timeout")
		stop(again)

		require.NoError(t, db.Exec("DELETE FROM xtimer_tasks WHERE app = ? AND code = ?", app, codes[5]).Error)
		third, logs := start()
		stopOnCleanup(t, third)
		require.Contains(t, logs.String(), "reading every task")
		require.Contains(t, logs.String(), "recording them again")
		requireViewIsTheRows(t, third, len(codes))
	})
}

// A row that was there before its chunk is kept as it is, and the view
// takes it from the row once the write is finished: here an HTTP task an
// operator created, during the write, with one of the registered codes.
func TestDeferredWriteKeepsARowThatWasThereAndTheViewReadsIt(t *testing.T) {
	t.Parallel()
	onPostgresAndSQLite(t, func(t *testing.T, db *gorm.DB) {
		app := testsvc.App(t)
		codes, specs := dailyCodes(20)
		ctx := context.Background()
		now := time.Now()
		st := store.New(db, store.WithNow(func() time.Time { return now }))
		require.NoError(t, st.Migrate(ctx))
		defs := make([]store.TaskDef, len(codes))
		for i, code := range codes {
			def := taskDef(specs[i])
			defs[i] = store.TaskDef{Code: code, Name: code, Def: &def}
		}
		reg, err := st.BeginRegistration(ctx, app, defs, 10)
		require.NoError(t, err)
		require.True(t, reg.Deferred)
		now = now.Add(5 * time.Second)
		target := `{"url":"https://example.com/hook"}`
		taken, err := st.CreateTask(ctx, &store.Task{App: app, Code: codes[15], Kind: store.KindHTTP, Spec: "0 0 4 * * *", HTTPTarget: &target})
		require.NoError(t, err)

		e := deferringEngine(t, db, app, "replica-later", codes, specs)
		require.NoError(t, e.Start(ctx))
		stopOnCleanup(t, e)
		<-e.catalog.done
		requireViewIsTheRows(t, e, len(codes))
		e.view.mu.Lock()
		got := e.view.taskLocked(codes[15])
		e.view.mu.Unlock()
		require.Equal(t, []any{store.KindHTTP, taken.CreatedMs}, []any{got.kind(), got.createdMs}, "the operator's row")
	})
}
