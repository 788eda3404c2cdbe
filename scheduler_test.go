package xtimer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// invocations records every handler call, independently of the execution
// rows (which are unique by construction): duplicates show up here.
type invocations struct {
	mu    sync.Mutex
	calls map[string][]time.Time // run.ID → start instants
	late  []time.Duration
	ch    chan *Run
}

func newInvocations() *invocations {
	return &invocations{calls: map[string][]time.Time{}, ch: make(chan *Run, 10000)}
}

func (iv *invocations) handler(result func(*Run) error) Handler {
	return func(ctx context.Context, run *Run) error {
		now := time.Now()
		iv.mu.Lock()
		iv.calls[run.ID] = append(iv.calls[run.ID], now)
		if run.Attempt == 1 && run.Source == SourceSchedule {
			iv.late = append(iv.late, now.Sub(run.ScheduledAt))
		}
		iv.mu.Unlock()
		select {
		case iv.ch <- run:
		default:
		}
		if result != nil {
			return result(run)
		}
		return nil
	}
}

func (iv *invocations) next(t *testing.T, within time.Duration) *Run {
	t.Helper()
	select {
	case r := <-iv.ch:
		return r
	case <-time.After(within):
		t.Fatalf("no handler call within %s", within)
		return nil
	}
}

type setupOpts struct {
	db    *gorm.DB
	clock Clock
	app   string
}

func newScheduler(t *testing.T, o setupOpts, mod func(*Options)) *Scheduler {
	t.Helper()
	opts := Options{DB: o.db, App: o.app, Clock: o.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if os.Getenv("XTIMER_TEST_LOG") == "1" {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mod != nil {
		mod(&opts)
	}
	switch opts.Clock.(type) {
	case *fakeclock.Clock, *fakeclock.Lockstep:
		// A fake clock is nowhere near the database's: the tests that move
		// it run on it as it is.
		opts.ClockReference = ClockReferenceOff
	}
	s, err := New(opts)
	require.NoError(t, err)
	return s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func stopOnCleanup(t *testing.T, s *Scheduler) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
}

// waitRow polls the execution until cond holds (rows are written in
// batches, off the hot path).
func waitRow(t *testing.T, s *Scheduler, id int64, cond func(store.Execution) bool) store.Execution {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := s.store.Execution(context.Background(), id)
		require.NoError(t, err)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %d stuck at %+v", id, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRegisterRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t)}, nil)
	ok := func(context.Context, *Run) error { return nil }
	cases := []struct {
		code, spec string
		h          Handler
		opts       []TaskOption
		want       string
	}{
		{"", "* * * * *", ok, nil, `task code "": want 1-128 characters`},
		{"bad code", "* * * * *", ok, nil, `task code "bad code"`},
		{"-x", "* * * * *", ok, nil, `task code "-x"`},
		{"Billing", "* * * * *", ok, nil, `task code "Billing": want 1-128 characters of lower-case letters`},
		{"a.b", "60 * * * *", ok, nil, `task "a.b": spec "60 * * * *": minute field "60"`},
		{"a.b", "* * * * *", nil, nil, `task "a.b": handler is nil`},
		{"a.b", "* * * * *", ok, []TaskOption{WithTimeout(0)}, `WithTimeout(0s): timeout must be positive`},
		{"a.b", "* * * * *", ok, []TaskOption{WithRetry(0)}, `WithRetry(0): attempts must be 1-100`},
		{"a.b", "* * * * *", ok, []TaskOption{WithBackoff(time.Minute, time.Second)}, `WithBackoff(1s): max must be at least base 1m0s`},
		{"a.b", "* * * * *", ok, []TaskOption{WithMisfire("later")}, `WithMisfire("later")`},
		{"a.b", "* * * * *", ok, []TaskOption{WithOverlap("sometimes")}, `WithOverlap("sometimes")`},
		{"a.b", "* * * * *", ok, []TaskOption{WithLocation(nil)}, `WithLocation(<nil>): location is nil`},
		{"a.b", "* * * * *", ok, []TaskOption{WithMaxRuns(0)}, `WithMaxRuns(0)`},
		{"a.b", "0 0 12 * * 2-6", ok, []TaskOption{WithQuartz()}, `quartz: day-of-month and day-of-week both set`},
		{"a.b", "CRON_TZ=Asia/Shanghai 0 9 * * *", ok, []TaskOption{WithLocation(mustZone(t, "Europe/London"))}, `names zone Asia/Shanghai but WithLocation says Europe/London`},
	}
	for _, c := range cases {
		err := s.Register(c.code, c.spec, c.h, c.opts...)
		require.ErrorContains(t, err, c.want, c.code+" "+c.spec)
	}
	require.NoError(t, s.Register("billing.reconcile", "0 0 9 * * *", ok))
	require.ErrorIs(t, s.Register("billing.reconcile", "0 0 9 * * *", ok), ErrDuplicateTask)

	_, err := New(Options{})
	require.ErrorContains(t, err, "Options.DB = <nil>: required")
	_, err = New(Options{DB: testsvc.SQLite(t), Buckets: -1})
	require.ErrorContains(t, err, "Options.Buckets = -1: want 1-4096")
	_, err = New(Options{DB: testsvc.SQLite(t), App: "no spaces"})
	require.ErrorContains(t, err, `Options.App = "no spaces"`)
}

// One replica on each database: fires run once on time, failures retry,
// timeouts and panics are recorded, manual runs and pauses work.
func TestSchedulerLifecycle(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		s := newScheduler(t, setupOpts{db: db, app: testsvc.App(t)}, nil)
		ticks, flaky, slow, boom := newInvocations(), newInvocations(), newInvocations(), newInvocations()
		require.NoError(t, s.Register("tick", "* * * * * *", ticks.handler(func(r *Run) error {
			r.Printf("hello from %s", r.ID)
			return nil
		})))
		require.NoError(t, s.Register("flaky", "0 0 29 2 *", flaky.handler(func(r *Run) error {
			if r.Attempt < 3 {
				return errors.New("not yet")
			}
			return nil
		}), WithRetry(3), WithBackoff(10*time.Millisecond, 20*time.Millisecond)))
		require.NoError(t, s.Register("slow", "0 0 29 2 *", func(ctx context.Context, r *Run) error {
			slow.handler(nil)(ctx, r)
			time.Sleep(2 * time.Second) // ignores ctx on purpose
			return nil
		}, WithTimeout(200*time.Millisecond)))
		require.NoError(t, s.Register("boom", "0 0 29 2 *", func(ctx context.Context, r *Run) error {
			boom.handler(nil)(ctx, r)
			var m map[string]int
			m["x"] = 1 //nolint:govet,staticcheck // nilness, SA5000: the handler panics on purpose, to test that a panic is recorded
			return nil
		}))
		ctx := context.Background()
		require.NoError(t, s.Start(ctx))
		stopOnCleanup(t, s)

		// A scheduled fire: on time, its row settles succeeded with the output.
		run := ticks.next(t, 5*time.Second)
		require.Equal(t, SourceSchedule, run.Source)
		row := waitRow(t, s, run.ExecutionID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
		require.Equal(t, "hello from "+run.ID+"\n", row.Output)
		require.Equal(t, 1, row.Attempt)
		require.Equal(t, s.InstanceID(), row.Replica)

		// Retries: two failures, then success, all on one row with one ID.
		exec, err := s.Trigger(ctx, "flaky")
		require.NoError(t, err)
		require.Equal(t, SourceManual, exec.Source)
		first := flaky.next(t, 5*time.Second)
		second := flaky.next(t, 5*time.Second)
		third := flaky.next(t, 5*time.Second)
		require.Equal(t, []int{1, 2, 3}, []int{first.Attempt, second.Attempt, third.Attempt})
		require.Equal(t, first.ID, third.ID)
		row = waitRow(t, s, exec.ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
		require.Equal(t, 3, row.Attempt)

		// A handler that ignores its context is recorded timed_out at the deadline.
		exec, err = s.Trigger(ctx, "slow")
		require.NoError(t, err)
		slow.next(t, 5*time.Second)
		row = waitRow(t, s, exec.ID, func(r store.Execution) bool { return r.Status == store.StatusTimedOut })
		require.Contains(t, row.Error, "did not return before its timeout (200ms)")

		// A panic is a failure with the stack; the process lives on.
		exec, err = s.Trigger(ctx, "boom")
		require.NoError(t, err)
		boom.next(t, 5*time.Second)
		row = waitRow(t, s, exec.ID, func(r store.Execution) bool { return r.Status == store.StatusFailed })
		require.Contains(t, row.Error, "panic: assignment to entry in nil map")
		require.Contains(t, row.Error, "scheduler_test.go")

		// Pause stops the fires; Resume brings them back.
		require.NoError(t, s.Pause(ctx, "tick"))
		_, err = s.Trigger(ctx, "nope")
		require.ErrorIs(t, err, ErrTaskNotFound)
		require.ErrorIs(t, s.Pause(ctx, "nope"), ErrTaskNotFound)
		time.Sleep(1500 * time.Millisecond) // let a fire armed before the pause ring
		for len(ticks.ch) > 0 {
			<-ticks.ch
		}
		select {
		case r := <-ticks.ch:
			t.Fatalf("paused task ran: %+v", r)
		case <-time.After(2 * time.Second):
		}
		require.NoError(t, s.Resume(ctx, "tick"))
		ticks.next(t, 5*time.Second)

		next, err := s.NextRuns("tick", 3)
		require.NoError(t, err)
		require.Len(t, next, 3)
		require.Equal(t, time.Second, next[1].Sub(next[0]))
		_, err = s.NextRuns("tick", 0)
		require.ErrorContains(t, err, "n must be 1-1000")

		// Every fire ran once.
		ticks.mu.Lock()
		defer ticks.mu.Unlock()
		for id, starts := range ticks.calls {
			require.Len(t, starts, 1, id)
		}
	})
}

// Every replica was down for ten minutes: on start, each task's misfire
// policy decides what runs. The clock is fake, so this is exact.
func TestCatchUpAfterFullOutageFollowsMisfirePolicy(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	app := testsvc.App(t)
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := fakeclock.New(t0)
	ctx := context.Background()
	noop := func(context.Context, *Run) error { return nil }
	register := func(s *Scheduler, h Handler) {
		require.NoError(t, s.Register("once", "0 * * * * *", h))
		require.NoError(t, s.Register("all", "0 * * * * *", h, WithMisfire(MisfireRunAll), WithMisfireWindow(5*time.Minute+30*time.Second)))
		require.NoError(t, s.Register("skip", "0 * * * * *", h, WithMisfire(MisfireSkip)))
	}
	first := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, nil)
	register(first, noop)
	require.NoError(t, first.Start(ctx))
	require.NoError(t, first.Stop(ctx))

	// Ten minutes later (10:10:00) a new replica starts: fires 10:01 ... 10:10 were missed.
	clock.Set(t0.Add(10 * time.Minute))
	iv := newInvocations()
	second := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, nil)
	register(second, iv.handler(nil))
	require.NoError(t, second.Start(ctx))
	stopOnCleanup(t, second)
	waitIdle(ctx, t, clock, second)
	clock.Advance(500 * time.Millisecond) // the first tick, at 10:10:00.5 (tickPhase)

	// Fires 10:00 ... 10:09 were missed; all: 10:05-10:09 are inside the 5m30s window.
	want := map[string]int{"once": 1, "all": 5}
	deadline := time.Now().Add(15 * time.Second)
	for {
		rows, _, err := second.store.ListExecutions(ctx, store.ExecutionFilter{App: app}, store.Cursor{}, 1000)
		require.NoError(t, err)
		got := map[string]map[string]int{}
		for _, r := range rows {
			if got[r.TaskCode] == nil {
				got[r.TaskCode] = map[string]int{}
			}
			got[r.TaskCode][r.Status+"/"+r.Source]++
		}
		ready := got["once"]["succeeded/catchup"] == want["once"] && got["all"]["succeeded/catchup"] == want["all"]
		if ready || time.Now().After(deadline) {
			// 10:10:00 is within the tolerance and runs on schedule.
			require.Equal(t, map[string]int{"succeeded/catchup": 1, "skipped/schedule": 9, "succeeded/schedule": 1}, got["once"])
			require.Equal(t, map[string]int{"succeeded/catchup": 5, "skipped/schedule": 5, "succeeded/schedule": 1}, got["all"])
			require.Equal(t, map[string]int{"skipped/schedule": 10, "succeeded/schedule": 1}, got["skip"])
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, r := range collect(iv) {
		if r.Code == "once" && r.Source == SourceCatchUp {
			require.Equal(t, t0.Add(9*time.Minute), r.ScheduledAt.UTC(), "the latest missed fire runs")
		}
	}
}

func collect(iv *invocations) []*Run {
	var out []*Run
	for {
		select {
		case r := <-iv.ch:
			out = append(out, r)
		default:
			sort.Slice(out, func(i, j int) bool { return out[i].ScheduledAt.Before(out[j].ScheduledAt) })
			return out
		}
	}
}

// A replica died holding a running execution and a recorded fire: another
// replica settles the first by the retry policy and runs the second.
func TestRescueOfALostReplica(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	app := testsvc.App(t)
	ctx := context.Background()
	iv := newInvocations()
	s := newScheduler(t, setupOpts{db: db, app: app}, func(o *Options) {
		o.HeartbeatInterval = 100 * time.Millisecond
		o.ReplicaTimeout = time.Second
	})
	require.NoError(t, s.Register("job", "0 0 29 2 *", iv.handler(nil), WithRetry(2), WithBackoff(10*time.Millisecond, 10*time.Millisecond)))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)

	now := time.Now()
	st := s.store
	// The dead replica's rows: one running attempt, one fire it recorded but never started.
	rows, err := st.InsertFires(ctx, []store.Execution{
		{App: app, TaskCode: "job", RunTime: now.Add(-time.Minute).UnixMilli(), MaxAttempts: 2, Replica: "dead-1"},
		// Manual: "0 0 29 2 *" has no fire 3 s ago, and a scheduled fire
		// the schedule lacks is skipped as rescheduled.
		{App: app, TaskCode: "job", RunTime: now.Add(-3 * time.Second).UnixMilli(), MaxAttempts: 2, Replica: "dead-1", Source: store.SourceManual},
	})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	ok, err := st.StartAttempt(ctx, rows[0].ID, 1, "dead-1", now.Add(-time.Minute).UnixMilli())
	require.NoError(t, err)
	require.True(t, ok)

	got := map[int64]*Run{}
	for len(got) < 2 {
		r := iv.next(t, 10*time.Second)
		got[r.ExecutionID] = r
	}
	require.Equal(t, 2, got[rows[0].ID].Attempt, "the lost attempt is retried as attempt 2")
	require.Equal(t, 1, got[rows[1].ID].Attempt, "the orphaned fire runs as its first attempt")
	lost := waitRow(t, s, rows[0].ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
	require.Equal(t, s.InstanceID(), lost.Replica)
	waitRow(t, s, rows[1].ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
}

// An operator's pause is stored: a redeploy registering the same task does
// not resume it. Tasks registered after Start run too.
func TestPauseSurvivesRedeployAndLateRegistrationRuns(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	first := newScheduler(t, setupOpts{db: db, app: app}, nil)
	require.NoError(t, first.Register("report", "* * * * * *", func(context.Context, *Run) error { return nil }))
	require.NoError(t, first.Start(ctx))
	require.NoError(t, first.Pause(ctx, "report"))
	require.NoError(t, first.Stop(ctx))
	require.ErrorIs(t, first.Start(ctx), ErrStopped)

	iv, late := newInvocations(), newInvocations()
	second := newScheduler(t, setupOpts{db: db, app: app}, nil)
	require.NoError(t, second.Register("report", "* * * * * *", iv.handler(nil), WithDescription("new build")))
	require.NoError(t, second.Start(ctx))
	stopOnCleanup(t, second)
	row, err := second.store.Task(ctx, app, "report")
	require.NoError(t, err)
	require.Equal(t, store.TaskPaused, row.Status)
	require.Equal(t, "new build", row.Description, "code-defined fields follow the code")

	require.NoError(t, second.Register("added.later", "* * * * * *", late.handler(nil)))
	run := late.next(t, 5*time.Second)
	require.Equal(t, "added.later", run.Code)
	require.Empty(t, iv.ch, "the paused task stayed paused")
}

// The classic fencing bug: a replica that slept past its run time (a GC
// pause, SIGSTOP) wakes up with a fire armed that another replica has
// meanwhile taken over. The late start must lose the conditional update
// and never run the handler.
func TestLateReplicaDoesNotRunAFireTakenOver(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC)
	clock := fakeclock.New(t0)
	iv := newInvocations()
	s := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, nil)
	require.NoError(t, s.Register("pay", "0 * * * * *", iv.handler(nil)))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	waitIdle(ctx, t, clock, s)
	clock.Advance(54*time.Second + 500*time.Millisecond) // 10:00:55: the 10:01 slot is claimed and recorded

	runAt := time.Date(2026, 11, 30, 10, 1, 0, 0, time.UTC).UnixMilli()
	var row store.Execution
	require.Eventually(t, func() bool {
		rows, _, err := s.store.ListExecutions(ctx, store.ExecutionFilter{App: app, TaskCode: "pay"}, store.Cursor{}, 10)
		if err == nil && len(rows) == 1 && rows[0].RunTime == runAt {
			row = rows[0]
			return true
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, s.InstanceID(), row.Replica)

	// While "asleep", another (live) replica took the fire over and started it.
	awake := time.Date(2026, 11, 30, 10, 1, 5, 0, time.UTC).UnixMilli()
	require.NoError(t, s.store.Heartbeat(ctx, store.Replica{App: app, ID: "replica-that-stayed-awake", StartedMs: awake, HeartbeatMs: awake}))
	ok, err := s.store.StartAttempt(ctx, row.ID, 1, "replica-that-stayed-awake", t0.UnixMilli())
	require.NoError(t, err)
	require.True(t, ok)

	waitIdle(ctx, t, clock, s)
	clock.Advance(10 * time.Second) // wake up 4.5s after the run time
	select {
	case r := <-iv.ch:
		t.Fatalf("the late replica ran a fire another replica owns: %+v", r)
	case <-time.After(time.Second):
	}
	got, err := s.store.Execution(ctx, row.ID)
	require.NoError(t, err)
	require.Equal(t, "replica-that-stayed-awake", got.Replica)
	require.Equal(t, store.StatusRunning, got.Status)
}

// eachBackend runs body in parallel on SQLite, MySQL/MariaDB and
// PostgreSQL, each on a fresh database.
func eachBackend(t *testing.T, body func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for _, b := range testsvc.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			body(t, b.Open(t))
		})
	}
}

// A replica of more than engine.BigHandlerList tasks writes its handler list
// apart from the heartbeat, off Start, and it lands in its row, sorted
// (they are registered here in reverse order).
func TestABigHandlerListReachesTheReplicaRow(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	s := newScheduler(t, setupOpts{db: db, app: testsvc.App(t)}, nil)
	n := engine.BigHandlerList + 1
	for i := range n {
		require.NoError(t, s.Register(fmt.Sprintf("job.%05d", n-1-i), "0 0 3 * * *", func(context.Context, *Run) error { return nil }))
	}
	require.NoError(t, s.Start(context.Background()))
	stopOnCleanup(t, s)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		live, err := s.store.LiveReplicas(context.Background(), s.App(), 0)
		if assert.NoError(c, err) && assert.Len(c, live, 1) {
			assert.Equal(c, n, len(live[0].Handlers), "handlers in the row")
		}
	}, 20*time.Second, 20*time.Millisecond)
	live, err := s.store.LiveReplicas(context.Background(), s.App(), 0)
	require.NoError(t, err)
	require.Equal(t, "job.00000", live[0].Handlers[0])
	require.Equal(t, fmt.Sprintf("job.%05d", n-1), live[0].Handlers[n-1])
	require.True(t, sort.StringsAreSorted(live[0].Handlers), "sorted")
}

// handlerListLog keeps what the handler publisher logs.
type handlerListLog struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *handlerListLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *handlerListLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *handlerListLog) WithGroup(string) slog.Handler            { return l }
func (l *handlerListLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "handler list") {
		l.mu.Lock()
		l.records = append(l.records, r.Clone())
		l.mu.Unlock()
	}
	return nil
}

// said returns the level and attributes of what was logged, in order.
func (l *handlerListLog) said() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		line := r.Level.String()
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "failures" || a.Key == "retry_in" {
				line += " " + a.String()
			}
			return true
		})
		out = append(out, line)
	}
	return out
}

// A replica whose big handler list the database refuses says so as an
// error, with when it tries again, and writes the list at a later
// heartbeat once the database takes it.
func TestAHandlerListNotWrittenIsAnErrorAndIsWrittenLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.SQLite(t)
	require.NoError(t, store.New(db).Migrate(ctx))
	require.NoError(t, db.Exec(`CREATE TRIGGER refuse_handler_chunks BEFORE INSERT ON xtimer_handler_chunks
BEGIN SELECT RAISE(ABORT, 'no room for the list'); END`).Error)
	clock := fakeclock.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	log := &handlerListLog{}
	s := newScheduler(t, setupOpts{db: db, app: testsvc.App(t), clock: clock}, func(o *Options) { o.Logger = slog.New(log) })
	n := engine.BigHandlerList + 1
	for i := range n {
		require.NoError(t, s.Register(fmt.Sprintf("job.%05d", i), "0 0 3 * * *", func(context.Context, *Run) error { return nil }))
	}
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)

	require.Eventually(t, func() bool { return len(log.said()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"ERROR failures=1 retry_in=5s"}, log.said())

	require.NoError(t, db.Exec("DROP TRIGGER refuse_handler_chunks").Error)
	// The heartbeat every 5 s (DefaultHeartbeatInterval), at the ticks.
	for range 6 {
		waitIdle(ctx, t, clock, s)
		clock.Advance(time.Second)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		live, err := s.store.LiveReplicas(ctx, s.App(), 0)
		if assert.NoError(c, err) && assert.Len(c, live, 1) {
			assert.Equal(c, n, len(live[0].Handlers), "handlers in the row")
		}
	}, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return len(log.said()) == 2 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"ERROR failures=1 retry_in=5s", "INFO failures=1"}, log.said())
}

func TestNewRefusesAnOptionWithATypedError(t *testing.T) {
	t.Parallel()
	_, err := New(Options{DB: testsvc.SQLite(t), Buckets: 5000})
	require.EqualError(t, err, "xtimer: Options.Buckets = 5000: want 1-4096")
	var optErr *OptionsError
	require.ErrorAs(t, err, &optErr)
	require.Equal(t, "Buckets", optErr.Field)
	require.Equal(t, "5000", optErr.Value)
	require.Equal(t, "want 1-4096", optErr.Reason)
	require.NoError(t, errors.Unwrap(err), "a plain option error has no cause")
}

// A Start whose deadline passes fails naming the step, and says that the
// deadline is what to change: with a million tasks to record, "context
// deadline exceeded" alone left users guessing.
func TestStartPastItsDeadlineSaysToGiveItALaterOne(t *testing.T) {
	t.Parallel()
	s, err := New(Options{DB: testsvc.SQLite(t)})
	require.NoError(t, err)
	require.NoError(t, s.Register("deadline.task", "@every 1m", func(context.Context, *Run) error { return nil }))
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err = s.Start(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "xtimer: start: ")
	require.ErrorContains(t, err, "Start's deadline passed: give Start a context with a later deadline")

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err = s.Start(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	require.NotContains(t, err.Error(), "deadline", "a cancelled Start is not told about deadlines")
}
