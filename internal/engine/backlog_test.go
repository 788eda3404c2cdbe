package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// oneWorkerBurst is a replica with one worker and four tasks, a to d, due
// together at 10:01, whose first handler call holds the worker until free.
type oneWorkerBurst struct {
	s     *Engine
	db    *gorm.DB
	app   string
	clock *fakeclock.Clock
	iv    *invocations
	free  func()
}

// startOneWorkerBurst starts the replica at 10:00:00.5, on db.
func startOneWorkerBurst(t *testing.T, db *gorm.DB, app string) *oneWorkerBurst {
	f := &oneWorkerBurst{db: db, app: app, clock: fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC)), iv: newInvocations()}
	release := make(chan struct{})
	var releaseOnce sync.Once
	f.free = func() { releaseOnce.Do(func() { close(release) }) }
	var calls atomic.Int32
	s := newEngine(t, setupOpts{db: db, app: app, clock: f.clock}, func(c *Config) { c.Workers = 1 })
	block := f.iv.handler(func(*Attempt) error {
		if calls.Add(1) == 1 {
			<-release
		}
		return nil
	})
	for _, code := range []string{"a", "b", "c", "d"} {
		mustRegister(t, s, code, "0 * * * * *", block)
	}
	require.NoError(t, s.Start(context.Background()))
	stopOnCleanup(t, s)
	t.Cleanup(f.free) // before the Stop above: a failed assertion must not leave the handler blocked
	f.s = s
	return f
}

// rows returns the fires of the four tasks. A failed read is reported to t
// (an Eventually's CollectT too) and returns none.
func (f *oneWorkerBurst) rows(t assert.TestingT) []store.Execution {
	var out []store.Execution
	assert.NoError(t, f.db.Where("app = ? AND task_code IN ?", f.app, []string{"a", "b", "c", "d"}).Order("id").Find(&out).Error)
	return out
}

// claimed counts the fires claimed for a start.
func (f *oneWorkerBurst) claimed(t assert.TestingT) (n int) {
	for _, r := range f.rows(t) {
		if r.StartedMs > 0 {
			n++
		}
	}
	return n
}

// toTheRunTime moves the clock to 10:00:55, when the 10:01 fires are
// recorded, and on to 10:01, when all four are due.
func (f *oneWorkerBurst) toTheRunTime(t *testing.T) {
	ctx := context.Background()
	waitIdle(ctx, t, f.clock, f.s)
	f.clock.Advance(54*time.Second + 500*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, f.rows(c), 4) }, 10*time.Second, 10*time.Millisecond)
	waitIdle(ctx, t, f.clock, f.s)
	f.clock.Advance(5 * time.Second)
}

// The promise: a fire is claimed for a start only when a worker is about
// to start it (free, or one pool's worth behind the busy ones). Fires
// waiting beyond that keep unclaimed rows, which another replica takes
// over if this one dies; a claimed fire waiting in the pool would die with
// the replica.
func TestFiresWaitingForAWorkerStayUnclaimed(t *testing.T) {
	t.Parallel()
	f := startOneWorkerBurst(t, testsvc.SQLite(t), testsvc.App(t))
	f.toTheRunTime(t)

	first := f.iv.next(t, 10*time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, 2, f.claimed(c)) }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // room for a wrong claim to land
	require.Equal(t, 2, f.claimed(t), "the running fire and one behind it are claimed, the other two wait unclaimed")
	for _, r := range f.rows(t) {
		if r.TaskCode == first.Code {
			require.NotZero(t, r.StartedMs, "the running fire is claimed")
		}
		if r.StartedMs == 0 {
			require.Equal(t, store.StatusScheduled, r.Status)
		}
	}

	f.free()
	ran := map[string]int{first.Code: 1}
	for range 3 {
		ran[f.iv.next(t, 10*time.Second).Code]++
	}
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, ran)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, r := range f.rows(c) {
			assert.Equal(c, store.StatusSucceeded, r.Status, "task %s", r.TaskCode)
		}
	}, 10*time.Second, 10*time.Millisecond)
}

// A worker coming free wakes the dispatcher only while fires wait in its
// backlog for one: woken for every attempt that ended, it went round its
// loop for each fire of an instant while the rest were starting. The
// second function runs on the first one's worker, after it came free.
func TestAFreedWorkerWakesTheDispatcherOnlyForItsBacklog(t *testing.T) {
	t.Parallel()
	for _, backlog := range []bool{false, true} {
		s := newEngine(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, func(c *Config) { c.Workers = 1 })
		s.dispatcher.wantRoom.Store(backlog) // as fenceNow leaves it
		release, woken := make(chan struct{}), make(chan bool, 1)
		s.pool.Submit(func() { <-release })
		s.pool.Submit(func() { woken <- s.dispatcher.wakePending() })
		close(release)
		require.Equal(t, backlog, <-woken, "backlog %v", backlog)
	}
}

// A replica whose app ran handlers before it started (their run times are
// in the database) claims a burst of quick fires ahead in one round, the
// first time too: with one worker and the app's handlers taking under a
// millisecond, all four fires of the instant are claimed while the first
// one runs, where a replica with no history claims two (above).
func TestRecentRunTimesLetAFreshReplicaClaimABurstInOneRound(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	require.NoError(t, store.New(db).Migrate(context.Background()))
	recordQuickRuns(t, db, app, "yesterday", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))

	f := startOneWorkerBurst(t, db, app)
	f.toTheRunTime(t)
	f.iv.next(t, 10*time.Second) // the first runs, and holds the only worker
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, 4, f.claimed(c)) }, 10*time.Second, 10*time.Millisecond,
		"the whole instant claimed in one round")
	f.free()
	for range 3 {
		f.iv.next(t, 10*time.Second)
	}
}

// A replica that started before its app had any history learns the run
// times later (reseed), while its own pool has run nothing: here the
// history lands after Start, as another replica's runs would, and the
// burst is still claimed in one round.
func TestRunTimesRecordedAfterStartReachAnIdleReplica(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	f := startOneWorkerBurst(t, db, app)
	recordQuickRuns(t, db, app, "elsewhere", time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	_, seeded := f.s.pool.MeanRun()
	require.False(t, seeded, "nothing to read at Start")

	// 10:00:55: the tick records the 10:01 fires and reads the run times.
	ctx := context.Background()
	waitIdle(ctx, t, f.clock, f.s)
	f.clock.Advance(54*time.Second + 500*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, seeded := f.s.pool.MeanRun()
		assert.True(c, seeded, "mean run time read")
		assert.Len(c, f.rows(c), 4)
	}, 10*time.Second, 10*time.Millisecond, "seeded by the tick")
	waitIdle(ctx, t, f.clock, f.s)
	f.clock.Advance(5 * time.Second)
	f.iv.next(t, 10*time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, 4, f.claimed(c)) }, 10*time.Second, 10*time.Millisecond,
		"the whole instant claimed in one round")
	f.free()
	for range 3 {
		f.iv.next(t, 10*time.Second)
	}
}

// recordQuickRuns writes the history of 20 attempts of a task, a minute
// apart from `from` on, that succeeded in under a millisecond.
func recordQuickRuns(t *testing.T, db *gorm.DB, app, code string, from time.Time) {
	t.Helper()
	var history []store.Execution
	for i := range 20 {
		at := from.Add(time.Duration(i) * time.Minute).UnixMilli()
		history = append(history, store.Execution{App: app, TaskCode: code, RunTime: at, Status: store.StatusSucceeded,
			Attempt: 1, StartedMs: at, FinishedMs: at})
	}
	require.NoError(t, db.Create(&history).Error)
}
