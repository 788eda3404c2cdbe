package engine

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// Fixtures shared by the engine's tests. The engine is built here as the
// root's New builds it, from a Config with the root's defaults, so that a
// test of a component runs the component as a Scheduler does; the root's
// tests cover what a user sees through the public API.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Handler is a Go task's handler as the engine's tests register it: the
// Attempt the root would make a Run of.
type Handler = func(ctx context.Context, a *Attempt) error

func invokeHandler(ctx context.Context, h any, a *Attempt) error { return h.(Handler)(ctx, a) }

type setupOpts struct {
	db    *gorm.DB
	clock Clock
	app   string
}

// testConfig is the Config the root's New makes of Options{DB, App, Clock}
// with the defaults of Options.
func testConfig(t testing.TB, o setupOpts) Config {
	t.Helper()
	if o.app == "" {
		o.app = "default"
	}
	if o.clock == nil {
		o.clock = SystemClock{}
	}
	caller, err := executor.NewHTTPCaller(executor.HTTPOptions{MaxResponse: 64 << 10})
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("XTIMER_TEST_LOG") == "1" {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return Config{
		App: o.app, Buckets: 16, InstanceID: "test-" + t.Name(), Workers: 64,
		ClaimAhead: 10 * time.Second, CatchUpHorizon: time.Hour,
		HeartbeatInterval: 5 * time.Second, ReplicaTimeout: 30 * time.Second,
		MaxOutput: 64 << 10, HTTPWorkers: 256,
		Retention: 30 * 24 * time.Hour, RetentionBatch: 1000, RetentionInterval: time.Minute,
		AlertWindow: 10 * time.Minute, AlertLateAfter: 30 * time.Second, AlertMissedRuns: 3,
		Store: store.New(o.db, store.WithNow(o.clock.Now)), Clock: o.clock, Locker: NewLocalLocker(o.clock),
		LockMode: "in-process", Logger: log, Caller: caller, Invoke: invokeHandler,
	}
}

// newEngine builds an engine as New(Options) would, mod changing its
// Config first (a Locker, a Notifier, Metrics...). A mod that sets
// Store must build it with the engine's clock.
func newEngine(t testing.TB, o setupOpts, mod func(*Config)) *Engine {
	t.Helper()
	cfg := testConfig(t, o)
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { // the parked workers of an engine never stopped (Stop closes them)
		e.pool.Close()
		e.httpPool.Close()
	})
	return e
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// taskDef is the definition a task registered with no option has (the
// root's newTaskConfig), for mod to change.
func taskDef(spec string) store.Definition {
	return store.Definition{
		Kind: store.KindFunc, Spec: spec, Dialect: string(cron.DialectCron), TimeZone: "UTC",
		TimeoutMs: (10 * time.Minute).Milliseconds(), MaxAttempts: 1,
		BackoffBaseMs: time.Second.Milliseconds(), BackoffMaxMs: (5 * time.Minute).Milliseconds(),
		Misfire: MisfireRunOnce, MisfireWindowMs: time.Hour.Milliseconds(), Overlap: OverlapAllow,
	}
}

// register registers a Go task as the root's Register does, its
// definition the defaults changed by mod (a zone, a policy, retries).
func register(t testing.TB, e *Engine, code, spec string, h Handler, mod ...func(*store.Definition)) error {
	t.Helper()
	def := taskDef(spec)
	for _, m := range mod {
		m(&def)
	}
	loc, err := cron.LoadZone(def.TimeZone)
	require.NoError(t, err)
	sched, err := cron.Parse(spec, cron.WithDialect(cron.Dialect(def.Dialect)), cron.In(loc))
	if err != nil {
		return err
	}
	var endAt time.Time
	if def.EndAtMs != 0 {
		endAt = time.UnixMilli(def.EndAtMs)
	}
	return e.Register(code, h, &Shared{Sched: sched, Def: &def, EndAt: endAt})
}

// mustRegister is register for a task that must be accepted.
func mustRegister(t testing.TB, e *Engine, code, spec string, h Handler, mod ...func(*store.Definition)) {
	t.Helper()
	require.NoError(t, register(t, e, code, spec, h, mod...))
}

func stopOnCleanup(t testing.TB, e *Engine) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
	})
}

// waitIdle waits until every loop of the engines that sleeps on clock has
// armed its timer, as the running components declare them (ClockTimers):
// moving the clock before that would leave a loop's period unfired.
func waitIdle(ctx context.Context, t testing.TB, clock *fakeclock.Clock, es ...*Engine) {
	t.Helper()
	n := 0
	for _, e := range es {
		n += e.ClockTimers()
	}
	require.NoError(t, clock.BlockUntil(ctx, n))
}

// waitSettled is waitIdle, and then also waits until no engine has a
// fire armed and not yet seen by its dispatcher, or writes queued
// (WakePending): moving the clock before that makes those fires start at
// the moved clock, late by the move.
func waitSettled(ctx context.Context, t testing.TB, clock *fakeclock.Clock, es ...*Engine) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		waitIdle(ctx, t, clock, es...)
		settled := true
		for _, e := range es {
			settled = settled && !e.WakePending()
		}
		if settled {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("engines still busy at %s", clock.Now())
		}
		time.Sleep(time.Millisecond)
	}
}

// onPostgresAndSQLite runs test as parallel subtests, on PostgreSQL and
// on SQLite.
func onPostgresAndSQLite(t *testing.T, test func(t *testing.T, db *gorm.DB)) {
	for name, open := range map[string]func(testing.TB) *gorm.DB{"postgres": testsvc.Postgres, "sqlite": testsvc.SQLite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, open(t))
		})
	}
}

// rowsByTask reads the execution rows of app by task code, for tests
// whose tasks have one row each.
func rowsByTask(t assert.TestingT, db *gorm.DB, app string) map[string]store.Execution {
	var rows []store.Execution
	assert.NoError(t, db.Where("app = ?", app).Find(&rows).Error)
	byTask := map[string]store.Execution{}
	for _, r := range rows {
		byTask[r.TaskCode] = r
	}
	return byTask
}

// startEveryMinute starts an engine on db and a fake clock at
// 2026-11-30 10:00:00.500 with one task firing at every minute's second 0
// per code, whose handler calls iv records, and waits until it is idle.
func startEveryMinute(ctx context.Context, t testing.TB, db *gorm.DB, codes ...string) (*Engine, *fakeclock.Clock, *invocations) {
	t.Helper()
	return startTasks(ctx, t, db, "0 * * * * *", codes...)
}

// startTasks is startEveryMinute with tasks of another spec.
func startTasks(ctx context.Context, t testing.TB, db *gorm.DB, spec string, codes ...string) (*Engine, *fakeclock.Clock, *invocations) {
	t.Helper()
	clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
	iv := newInvocations()
	s := newEngine(t, setupOpts{db: db, app: testsvc.App(t), clock: clock}, nil)
	for _, code := range codes {
		mustRegister(t, s, code, spec, iv.handler(nil))
	}
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	waitIdle(ctx, t, clock, s)
	return s, clock, iv
}

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}

// invocations records every handler call, independently of the
// execution rows (which are unique by construction): duplicates show up
// here. It is the root tests' invocations, for the engine's Attempt.
type invocations struct {
	mu    sync.Mutex
	calls map[string][]time.Time // Attempt.ID → start instants
	ch    chan *Attempt
}

func newInvocations() *invocations {
	return &invocations{calls: map[string][]time.Time{}, ch: make(chan *Attempt, 10000)}
}

func (iv *invocations) handler(result func(*Attempt) error) Handler {
	return func(ctx context.Context, a *Attempt) error {
		now := time.Now()
		iv.mu.Lock()
		iv.calls[a.ID] = append(iv.calls[a.ID], now)
		iv.mu.Unlock()
		select {
		case iv.ch <- a:
		default:
		}
		if result != nil {
			return result(a)
		}
		return nil
	}
}

func (iv *invocations) next(t *testing.T, within time.Duration) *Attempt {
	t.Helper()
	select {
	case a := <-iv.ch:
		return a
	case <-time.After(within):
		t.Fatalf("no handler call within %s", within)
		return nil
	}
}
