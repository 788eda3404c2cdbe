package xtimer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// offsetClock is the system clock set off by an offset, as the clock of a
// host whose NTP failed: Now is shifted, durations are not. The offset
// may be changed while it runs (a host's clock being set).
type offsetClock struct {
	Clock
	offset atomic.Int64
}

func newOffsetClock(d time.Duration) *offsetClock {
	c := &offsetClock{Clock: SystemClock()}
	c.offset.Store(int64(d))
	return c
}

func (c *offsetClock) Now() time.Time { return c.Clock.Now().Add(time.Duration(c.offset.Load())) }

func TestClockOptionsAreValidated(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	s, err := New(Options{DB: db})
	require.NoError(t, err)
	require.Equal(t, ClockReferenceDatabase, s.Options().ClockReference, "on by default")
	require.Equal(t, DefaultMaxClockSkew, s.Options().MaxClockSkew)

	var oe *OptionsError
	_, err = New(Options{DB: db, MaxClockSkew: -time.Minute})
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "xtimer: Options.MaxClockSkew = -1m0s: want at least 1s (0 for the default, 10m)", err.Error())
	_, err = New(Options{DB: db, MaxClockSkew: time.Millisecond})
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "MaxClockSkew", oe.Field)
	_, err = New(Options{DB: db, ClockReference: 7})
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "xtimer: Options.ClockReference = 7: want ClockReferenceDatabase (0) or ClockReferenceOff (1)", err.Error())
}

// fleetRuns counts the handler calls of a fleet per fire, and which
// replica made them.
type fleetRuns struct {
	mu    sync.Mutex
	calls map[string][]string // "code@run time" → replicas
	times []time.Time         // Run.ScheduledAt of every call
}

func (f *fleetRuns) handler(replica string) Handler {
	return func(_ context.Context, r *Run) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		k := r.Code + "@" + r.ScheduledAt.UTC().Format(time.RFC3339Nano)
		f.calls[k] = append(f.calls[k], replica)
		f.times = append(f.times, r.ScheduledAt)
		return nil
	}
}

// clockFleet starts one replica per clock on db and Redis, each running
// tasks every second, the clock reference on.
func clockFleet(t *testing.T, db *gorm.DB, app string, tasks int, clocks ...Clock) (*fleetRuns, []*Scheduler) {
	t.Helper()
	runs := &fleetRuns{calls: map[string][]string{}}
	rdb := testsvc.Redis(t)
	var ss []*Scheduler
	for i, clock := range clocks {
		id := fmt.Sprintf("replica-%d", i)
		s, err := New(Options{DB: db, Redis: rdb, App: app, InstanceID: id, Clock: clock,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		for j := range tasks {
			require.NoError(t, s.Register(fmt.Sprintf("clock.t%d", j), "* * * * * *", runs.handler(id)))
		}
		require.NoError(t, s.Start(context.Background()))
		stopOnCleanup(t, s)
		ss = append(ss, s)
	}
	return runs, ss
}

// waitFires waits until every fire of tasks in [from, to] (whole seconds)
// is final, and returns the rows.
func waitFires(t *testing.T, s *Scheduler, tasks int, from, to time.Time) []store.Execution {
	t.Helper()
	want := tasks * int(to.Sub(from)/time.Second+1)
	var rows []store.Execution
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		all, _, err := s.store.ListExecutions(context.Background(), store.ExecutionFilter{App: s.opts.App,
			Source: store.SourceSchedule, FromMs: from.UnixMilli(), ToMs: to.UnixMilli() + 1}, store.Cursor{}, 1000)
		require.NoError(t, err)
		rows = rows[:0]
		for _, r := range all {
			if r.Status != store.StatusScheduled && r.Status != store.StatusRunning {
				rows = append(rows, r)
			}
		}
		if len(rows) < want {
			c.Errorf("%d of %d fires final", len(rows), want)
		}
	}, 90*time.Second, 100*time.Millisecond)
	return rows
}

// Three replicas whose clocks disagree by a minute (one 30 s fast, one
// 30 s slow, one in step), measuring against the database, run every fire
// once, at its instant, and none is recorded skipped.
func TestReplicasWithWrongClocksRunEveryFireOnce(t *testing.T) {
	t.Parallel()
	const tasks = 5
	db := testsvc.Postgres(t)
	app := testsvc.App(t)
	runs, ss := clockFleet(t, db, app, tasks, newOffsetClock(30*time.Second), newOffsetClock(-30*time.Second), SystemClock())

	// The database runs on this machine: its time is the system clock's.
	from := time.Now().Truncate(time.Second).Add(3 * time.Second)
	to := from.Add(6 * time.Second)
	rows := waitFires(t, ss[2], tasks, from, to)
	require.Len(t, rows, tasks*7)
	for _, r := range rows {
		require.Equal(t, store.StatusSucceeded, r.Status, "%s at %s: %s %s", r.TaskCode, time.UnixMilli(r.RunTime).UTC(), r.Status, r.Reason)
	}
	runs.mu.Lock()
	defer runs.mu.Unlock()
	for at := from; !at.After(to); at = at.Add(time.Second) {
		for j := range tasks {
			k := fmt.Sprintf("clock.t%d@%s", j, at.UTC().Format(time.RFC3339Nano))
			require.Len(t, runs.calls[k], 1, "fire %s ran on %v", k, runs.calls[k])
		}
	}
	for _, at := range runs.times {
		require.Equal(t, at.Truncate(time.Second), at, "Run.ScheduledAt is the fire's whole second")
	}

	replicas, err := ss[2].Replicas(context.Background())
	require.NoError(t, err)
	require.Len(t, replicas, 3)
	for i, want := range []time.Duration{-30 * time.Second, 30 * time.Second, 0} {
		require.InDelta(t, want.Milliseconds(), replicas[i].ClockOffset.Milliseconds(), 500, "replica %d", i)
		require.False(t, replicas[i].ClockRefused)
	}
}

// A replica whose clock is 11 minutes ahead, beyond MaxClockSkew, claims
// nothing: another replica runs every fire, a manual run triggered on it
// included, and its Health and row say why.
func TestReplicaBeyondMaxClockSkewClaimsNothing(t *testing.T) {
	t.Parallel()
	const tasks = 3
	db := testsvc.Postgres(t)
	app := testsvc.App(t)
	runs, ss := clockFleet(t, db, app, tasks, newOffsetClock(11*time.Minute), SystemClock())
	far, near := ss[0], ss[1]

	h := far.Health(context.Background())
	require.False(t, h.OK)
	require.False(t, h.Clock.OK)
	require.Contains(t, h.Clock.Detail, "fast off the database's clock")
	require.Contains(t, h.Clock.Detail, "beyond MaxClockSkew 10m0s: claiming nothing")
	require.True(t, near.Health(context.Background()).Clock.OK)

	manual, err := far.Trigger(context.Background(), "clock.t0")
	require.NoError(t, err)
	require.Empty(t, manual.Replica, "recorded for a replica that claims")

	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	to := from.Add(4 * time.Second)
	rows := waitFires(t, near, tasks, from, to)
	for _, r := range rows {
		require.Equal(t, store.StatusSucceeded, r.Status)
		require.Equal(t, "replica-1", r.Replica, "%s at %s", r.TaskCode, time.UnixMilli(r.RunTime).UTC())
	}
	got := waitRow(t, near, manual.ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
	require.Equal(t, "replica-1", got.Replica)
	runs.mu.Lock()
	for k, by := range runs.calls {
		require.Equal(t, []string{"replica-1"}, by, "fire %s", k)
	}
	runs.mu.Unlock()

	replicas, err := near.Replicas(context.Background())
	require.NoError(t, err)
	require.Len(t, replicas, 2)
	require.True(t, replicas[0].ClockRefused)
	require.InDelta(t, (-11 * time.Minute).Milliseconds(), replicas[0].ClockOffset.Milliseconds(), 500)
	require.False(t, replicas[1].ClockRefused)
}

// A replica whose clock is 30 s off raises replica.clock_skew once for
// the episode, and the gauge shows the offset; once its clock is set
// right the episode ends, and a new one raises the alert again.
func TestClockSkewRaisesOneAlertPerEpisodeAndShowsInTheGauge(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var events []Event
	clock := newOffsetClock(30 * time.Second)
	s, err := New(Options{DB: db, App: testsvc.App(t), Clock: clock, Metrics: reg,
		HeartbeatInterval: 100 * time.Millisecond, AlertWindow: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Notifier: NotifierFunc(func(_ context.Context, e Event) error {
			mu.Lock()
			defer mu.Unlock()
			if e.Kind == EventClockSkew {
				events = append(events, e)
			}
			return nil
		})})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	stopOnCleanup(t, s)

	gauge := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "xtimer_clock_offset_seconds" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no xtimer_clock_offset_seconds")
		return 0
	}
	require.InDelta(t, -30, gauge(), 0.5)
	require.Equal(t, 1, testutil.CollectAndCount(reg, "xtimer_clock_offset_seconds"))
	alerts := func() []Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]Event(nil), events...)
	}
	require.Eventually(t, func() bool { return len(alerts()) == 1 }, 30*time.Second, 20*time.Millisecond)
	first := alerts()[0]
	require.Equal(t, s.InstanceID(), first.Replica)
	require.InDelta(t, (-30 * time.Second).Seconds(), first.ClockOffset.Seconds(), 0.5)
	// The measure is as good as its round trip: 29.998s or 30.002s.
	require.Regexp(t, `by (29\.9\d*|30(\.0\d*)?)s fast`, first.Message)

	// Many heartbeats of the same episode, past the damping window: still
	// one alert.
	beats := func(n int) {
		start := heartbeatOf(t, s)
		require.Eventually(t, func() bool { return heartbeatOf(t, s) >= start+int64(n)*100 }, 30*time.Second, 20*time.Millisecond)
	}
	beats(20)
	require.Len(t, alerts(), 1)

	clock.offset.Store(0) // the host's clock is set right
	require.Eventually(t, func() bool { return gauge() > -0.5 && gauge() < 0.5 }, 30*time.Second, 20*time.Millisecond)
	beats(15)
	require.Len(t, alerts(), 1, "the end of an episode sends nothing")
	clock.offset.Store(int64(-45 * time.Second)) // and goes wrong again
	require.Eventually(t, func() bool { return len(alerts()) == 2 }, 30*time.Second, 20*time.Millisecond)
	require.InDelta(t, 45, alerts()[1].ClockOffset.Seconds(), 0.5)
	require.Contains(t, alerts()[1].Message, "slow")
}

// heartbeatOf is the replica's last heartbeat in Unix ms.
func heartbeatOf(t *testing.T, s *Scheduler) int64 {
	t.Helper()
	rows, err := s.store.LiveReplicas(context.Background(), s.opts.App, 0)
	require.NoError(t, err)
	for _, r := range rows {
		if r.ID == s.InstanceID() {
			return r.HeartbeatMs
		}
	}
	return 0
}
