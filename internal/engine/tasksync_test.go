package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// Once a minute a replica checks its view of the tasks against the
// database's sums (TaskSums), for writers that do not bump the task
// generation: while they agree it reads no task, and a version bumped
// behind the generation's back (an older release pausing a task) is
// picked up within the minute.
func TestMinuteTaskCheckReadsTasksOnlyWhenTheirSumsDiffer(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	var versionReads atomic.Int32
	require.NoError(t, db.Callback().Row().After("gorm:row").Register("count-version-reads", func(tx *gorm.DB) {
		if sql := tx.Statement.SQL.String(); strings.Contains(sql, "xtimer_tasks") && strings.Contains(sql, "version") &&
			!strings.Contains(sql, "SUM(") {
			versionReads.Add(1)
		}
	}))
	f := newTasksyncFleet(t, db)
	s := f.start(map[string]string{"nightly": "0 0 3 * * *", "other": "0 0 4 * * *"})
	// Start loads the view with store.TaskHeads, a statement of its own
	// past GORM's callbacks: from here on only the minute check reads.
	versionReads.Store(0)
	f.runUntil(tasksyncHMS(2, 30))
	require.Zero(t, versionReads.Load(), "two minutes of agreeing sums read no task")

	require.NoError(t, db.Model(&store.Task{}).Where("app = ? AND code = ?", f.app, "nightly").
		UpdateColumns(map[string]any{"status": store.TaskPaused, "version": gorm.Expr("version + 1")}).Error)
	f.runUntil(tasksyncHMS(3, 31))
	require.NotZero(t, versionReads.Load())
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	require.Equal(t, store.TaskPaused, s.view.taskLocked("nightly").statusText())
	require.Equal(t, store.TaskActive, s.view.taskLocked("other").statusText())
}

// A replica registering the same tasks as the last one skips their rows
// (store.RegisterTasks' digest) and loads its view from their heads; a row
// that vanished without a trace in the task generation (deleted by hand)
// is noticed in that load and written again, and its task fires.
func TestATaskRowDeletedByHandIsRecordedAgainAtStart(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	f := newTasksyncFleet(t, db)
	specs := map[string]string{"minutely": "0 * * * * *", "other": "30 * * * * *"}
	f.start(specs)
	require.NoError(t, db.Where("app = ? AND code = ?", f.app, "minutely").Delete(&store.Task{}).Error)

	s := f.start(specs)
	row, err := s.store.Task(context.Background(), f.app, "minutely")
	require.NoError(t, err, "recorded again")
	s.view.mu.Lock()
	require.NotNil(t, s.view.taskLocked("minutely"))
	require.Equal(t, row.CreatedMs, s.view.taskLocked("minutely").createdMs, "the new row's")
	s.view.mu.Unlock()
	f.runUntil(tasksyncHMS(1, 0).Add(500 * time.Millisecond))
	// The replicas are idle once the fire started; its handler may still
	// run: wait for every handler started.
	for _, e := range f.replicas {
		e.attempts.Wait()
	}
	require.Equal(t, map[string]int{tasksyncHMS(1, 0).Format("15:04:05"): 1}, f.callsOf("minutely"), "once, by either replica")
}

// tasksyncHMS is 12:mm:ss on the day the tests of this file run.
func tasksyncHMS(minute, second int) time.Time {
	return time.Date(2026, 11, 30, 12, minute, second, 0, time.UTC)
}

// tasksyncFleet is engines of one app on one database, sharing a fake
// clock and one in-process lock (as replicas share Redis), started at
// 12:00:00.5. It counts handler calls per fire, independently of the
// execution rows. (The root's editFleet, for the engine.)
type tasksyncFleet struct {
	t        *testing.T
	db       *gorm.DB
	app      string
	clock    *fakeclock.Lockstep
	locker   Locker
	replicas []*Engine

	mu    sync.Mutex
	calls map[string]map[string]int // code → "15:04:05" run time → handler calls
}

func newTasksyncFleet(t *testing.T, db *gorm.DB) *tasksyncFleet {
	clock := fakeclock.NewLockstep(tasksyncHMS(0, 0).Add(500 * time.Millisecond))
	return &tasksyncFleet{t: t, db: db, app: testsvc.App(t), clock: clock, locker: NewLocalLocker(clock),
		calls: map[string]map[string]int{}}
}

// start starts one more replica with the tasks of specs (code → spec).
func (f *tasksyncFleet) start(specs map[string]string) *Engine {
	f.t.Helper()
	pool := f.db
	if len(f.replicas) > 0 && f.db.Dialector.Name() != "sqlite" {
		pool = testsvc.Reopen(f.t, f.db)
	}
	e := newEngine(f.t, setupOpts{db: pool, app: f.app, clock: f.clock}, func(o *Config) {
		o.Locker = f.locker
		o.InstanceID = fmt.Sprintf("replica-%d", len(f.replicas))
	})
	for _, code := range slices.Sorted(maps.Keys(specs)) {
		mustRegister(f.t, e, code, specs[code], f.handle)
	}
	require.NoError(f.t, e.Start(context.Background()))
	stopOnCleanup(f.t, e)
	f.replicas = append(f.replicas, e)
	return e
}

func (f *tasksyncFleet) handle(_ context.Context, a *Attempt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls[a.Code] == nil {
		f.calls[a.Code] = map[string]int{}
	}
	f.calls[a.Code][a.ScheduledAt.UTC().Format("15:04:05")]++
	return nil
}

// callsOf returns the handler calls of a task per run time.
func (f *tasksyncFleet) callsOf(code string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls[code])
}

// runUntil moves the clock to at a second at a time, each step once every
// replica is idle, so that every replica ticks and dispatches on every
// second, as on a real clock.
func (f *tasksyncFleet) runUntil(at time.Time) {
	f.t.Helper()
	for now := f.clock.Now(); now.Before(at); now = f.clock.Now() {
		f.waitIdle()
		f.clock.Advance(min(time.Second, at.Sub(now)))
	}
	f.waitIdle()
}

// waitIdle waits until the loops of every replica wait for their timers
// (as many as the running components declare, ClockTimers), with no fire
// armed and not yet seen by its dispatcher.
func (f *tasksyncFleet) waitIdle() {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		loops := 0
		for _, e := range f.replicas {
			loops += e.ClockTimers()
		}
		idle := f.clock.Idle(loops)
		for _, e := range f.replicas {
			idle = idle && !e.dispatcher.wakePending()
		}
		if idle {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("replicas still busy at %s", f.clock.Now())
		}
		time.Sleep(time.Millisecond)
	}
}

// A task created through this replica's API while the tick read every
// task's version is not taken for deleted: the read, begun before its row
// was written, does not have it. It was dropped from the view, and a
// manual run triggered right after was skipped as deleted (seen in a CI
// run of TestHTTPTaskSendsTheRequestAsDescribedAndSigned).
func TestTaskCreatedDuringAVersionsReadIsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.SQLite(t)
	s, _, _ := startEveryMinute(ctx, t, db, "registered")
	app := s.opts.App

	s.view.beginVersionsRead()
	versions, err := s.store.TaskVersions(ctx, app) // read before the row exists
	require.NoError(t, err)
	target := `{"url":"https://example.com/hook"}`
	row, err := s.store.CreateTask(ctx, &store.Task{App: app, Code: "cb.new", Kind: store.KindHTTP, Spec: "0 0 4 * * *", HTTPTarget: &target})
	require.NoError(t, err)
	s.Adopt(row) // as CreateHTTPTask does
	s.view.mu.Lock()
	changed := s.view.applyVersionsLocked(versions, s.view.endVersionsReadLocked())
	kept := s.view.taskLocked("cb.new") != nil
	s.view.mu.Unlock()
	require.Empty(t, changed)
	require.True(t, kept, "the task created during the read is in the view")

	// The next read has its row; a task deleted behind the view's back
	// (its row gone, the view not told) is dropped by it, as ever.
	require.NoError(t, db.Where("app = ? AND code = ?", app, "registered").Delete(&store.Task{}).Error)
	require.NoError(t, s.view.syncAllTasks(ctx))
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	require.NotNil(t, s.view.taskLocked("cb.new"))
	require.Nil(t, s.view.taskLocked("registered"), "a row deleted is a task dropped")
}
