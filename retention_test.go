package xtimer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// retentionT0 is the fake clock's start in the retention tests.
var retentionT0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// seedRetention records, 40 days before now, a succeeded, a failed and a
// retrying execution (its next attempt a year away), and one succeeded a day before now.
func seedRetention(t *testing.T, s *Scheduler) {
	t.Helper()
	old := retentionT0.Add(-40 * 24 * time.Hour).UnixMilli()
	rows := []store.Execution{
		{App: s.App(), TaskCode: "report", RunTime: old, Status: store.StatusSucceeded},
		{App: s.App(), TaskCode: "report", RunTime: old + 1000, Status: store.StatusFailed},
		{App: s.App(), TaskCode: "report", RunTime: old + 2000, Status: store.StatusRetrying, NextAttemptMs: retentionT0.AddDate(1, 0, 0).UnixMilli()},
		{App: s.App(), TaskCode: "report", RunTime: retentionT0.Add(-24 * time.Hour).UnixMilli(), Status: store.StatusSucceeded},
	}
	require.NoError(t, s.store.DB().Create(&rows).Error)
}

// statuses returns the statuses of the app's executions, oldest first.
func statuses(t *testing.T, s *Scheduler) []string {
	t.Helper()
	var got []string
	require.NoError(t, s.store.DB().Raw("SELECT status FROM xtimer_executions WHERE app = ? ORDER BY run_time", s.App()).Scan(&got).Error)
	return got
}

// waitStatuses polls until the app's executions have the statuses want.
func waitStatuses(t *testing.T, s *Scheduler, want []string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := statuses(t, s)
		if len(got) == len(want) {
			require.Equal(t, want, got)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("executions are %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRetentionDeletesOldFinalExecutionsOnly(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(retentionT0)
	ctx := context.Background()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, nil)
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	seedRetention(t, s)
	old := store.MinuteOf(retentionT0.Add(-40 * 24 * time.Hour).UnixMilli())
	require.NoError(t, s.store.DB().Create(&store.Slot{App: s.App(), Minute: old, Done: true}).Error)

	waitIdle(ctx, t, clock, s)
	require.Equal(t, 4, len(statuses(t, s)), "nothing is deleted before the first interval")
	clock.Advance(DefaultRetentionInterval)

	waitStatuses(t, s, []string{store.StatusRetrying, store.StatusSucceeded})
	// The sweep deletes the slots after the executions: wait for it too.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var slots int64
		if assert.NoError(c, s.store.DB().Raw("SELECT COUNT(*) FROM xtimer_slots WHERE app = ? AND minute = ?", s.App(), old).Scan(&slots).Error) {
			assert.Zero(c, slots)
		}
	}, 15*time.Second, 20*time.Millisecond, "slots past the retention are deleted")
}

func TestRetentionPerTaskKeepsTheNewest(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(retentionT0)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, func(o *Options) {
		o.Retention = -1 // forever: only the count applies
		o.RetentionPerTask = 2
		o.RetentionBatch = 2
		o.Metrics = reg
	})
	require.NoError(t, s.Register("report", "0 0 * * * *", func(context.Context, *Run) error { return nil }))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	var rows []store.Execution
	for i := 1; i <= 7; i++ {
		rows = append(rows, store.Execution{App: s.App(), TaskCode: "report", RunTime: retentionT0.Add(-time.Duration(i) * time.Hour).UnixMilli(), Status: store.StatusSucceeded})
	}
	require.NoError(t, s.store.DB().Create(&rows).Error)

	waitIdle(ctx, t, clock, s)
	clock.Advance(DefaultRetentionInterval)
	waitStatuses(t, s, []string{store.StatusSucceeded, store.StatusSucceeded})
	var times []int64
	require.NoError(t, s.store.DB().Raw("SELECT run_time FROM xtimer_executions WHERE app = ? ORDER BY run_time", s.App()).Scan(&times).Error)
	require.Equal(t, []int64{rows[1].RunTime, rows[0].RunTime}, times)
	// The sweep counts a batch once its transaction has committed: the
	// rows may be gone a moment before the counter has them.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 5.0, retentionDeleted(t, reg, s.App()), "xtimer_retention_deleted_total")
	}, 15*time.Second, 10*time.Millisecond)
}

// retentionDeleted reads the app's xtimer_retention_deleted_total from the
// registry it was given as Options.Metrics.
func retentionDeleted(t *testing.T, reg *prometheus.Registry, app string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var found []float64
	for _, f := range families {
		if f.GetName() != "xtimer_retention_deleted_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "app" && l.GetValue() == app {
					found = append(found, m.GetCounter().GetValue())
				}
			}
		}
	}
	require.Len(t, found, 1, "one xtimer_retention_deleted_total of app %s", app)
	return found[0]
}

// countingLocker records the holders of the retention lock.
type countingLocker struct {
	Locker
	key      string
	attempts atomic.Int64
	mu       sync.Mutex
	holders  int
	most     int
}

func (c *countingLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (Lock, error) {
	l, err := c.Locker.Obtain(ctx, key, ttl)
	if key != c.key {
		return l, err
	}
	c.attempts.Add(1)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.holders++
	c.most = max(c.most, c.holders)
	c.mu.Unlock()
	return &countedLock{Lock: l, c: c}, nil
}

type countedLock struct {
	Lock
	c *countingLocker
}

func (l *countedLock) Release(ctx context.Context) error {
	l.c.mu.Lock()
	l.c.holders--
	l.c.mu.Unlock()
	return l.Lock.Release(ctx)
}

func TestRetentionSweepsOnOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(retentionT0)
	ctx := context.Background()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	locker := &countingLocker{Locker: NewLocalLocker(clock), key: "xtimer:" + app + ":retention"}
	var replicas []*Scheduler
	for range 2 {
		s := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, func(o *Options) { o.Locker = locker })
		require.NoError(t, s.Start(ctx))
		stopOnCleanup(t, s)
		replicas = append(replicas, s)
	}
	seedRetention(t, replicas[0])

	// Someone else sweeps: both replicas skip the round.
	held, err := locker.Locker.Obtain(ctx, locker.key, time.Hour)
	require.NoError(t, err)
	waitIdle(ctx, t, clock, replicas...)
	clock.Advance(DefaultRetentionInterval)
	require.Eventually(t, func() bool { return locker.attempts.Load() == 2 }, 15*time.Second, 10*time.Millisecond)
	require.Len(t, statuses(t, replicas[0]), 4, "a replica without the lock deletes nothing")

	require.NoError(t, held.Release(ctx))
	for round := 0; round < 3; round++ {
		waitIdle(ctx, t, clock, replicas...)
		clock.Advance(DefaultRetentionInterval)
	}
	waitStatuses(t, replicas[0], []string{store.StatusRetrying, store.StatusSucceeded})
	locker.mu.Lock()
	defer locker.mu.Unlock()
	require.Equal(t, 1, locker.most, "two replicas never sweep at once")
}

func TestStopEndsRetention(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(retentionT0)
	ctx := context.Background()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, nil)
	require.NoError(t, s.Start(ctx))
	waitIdle(ctx, t, clock, s)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(stopCtx))
	require.Zero(t, clock.Timers(), "every loop, retention included, stopped its timer")
}

func TestRetentionOptionsAreValidated(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	for _, c := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.Retention = time.Minute }, "xtimer: Options.Retention = 1m0s: want at least 1h"},
		{func(o *Options) { o.RetentionPerTask = -1 }, "xtimer: Options.RetentionPerTask = -1"},
		{func(o *Options) { o.RetentionBatch = -1 }, "xtimer: Options.RetentionBatch = -1: want 1-100000"},
		{func(o *Options) { o.RetentionInterval = time.Millisecond }, "xtimer: Options.RetentionInterval = 1ms: want at least 1s"},
	} {
		opts := Options{DB: db}
		c.mod(&opts)
		_, err := New(opts)
		require.ErrorContains(t, err, c.want)
	}
	s, err := New(Options{DB: db, Retention: -1})
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), s.Options().Retention, "negative keeps executions forever")
	s, err = New(Options{DB: db})
	require.NoError(t, err)
	require.Equal(t, DefaultRetention, s.Options().Retention)
	require.Equal(t, DefaultRetentionBatch, s.Options().RetentionBatch)
	require.Equal(t, DefaultRetentionInterval, s.Options().RetentionInterval)
}

// The retention sweep on every database: it rolls up each settled day
// before deleting it, counts what it deletes from a day it cannot roll up
// yet, and a second sweep doubles nothing.
func TestRetentionRollsUpEveryDayItDeletes(t *testing.T) {
	t.Parallel()
	for _, backend := range testsvc.Backends() {
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			clock := fakeclock.New(retentionT0)
			ctx := context.Background()
			s := newScheduler(t, setupOpts{db: backend.Open(t), app: testsvc.App(t), clock: clock}, nil)
			require.NoError(t, s.Start(ctx))
			stopOnCleanup(t, s)

			day := func(daysAgo int, hour int) int64 {
				return time.Date(2026, 11, 30-daysAgo, hour, 0, 0, 0, time.UTC).UnixMilli()
			}
			var rows []store.Execution
			add := func(code string, at int64, status string, n int) {
				for range n {
					rows = append(rows, store.Execution{App: s.App(), TaskCode: code, RunTime: at + int64(len(rows))*1000, Status: status})
				}
			}
			// 40 days ago: final rows and one stuck retrying: the day is
			// never rolled up, its final rows are counted as deleted.
			add("report", day(40, 3), store.StatusSucceeded, 5)
			add("report", day(40, 3), store.StatusFailed, 2)
			add("report", day(40, 3), store.StatusTimedOut, 1)
			add("report", day(40, 3), store.StatusSkipped, 1)
			rows = append(rows, store.Execution{App: s.App(), TaskCode: "report", RunTime: day(40, 4), Status: store.StatusRetrying,
				NextAttemptMs: retentionT0.AddDate(1, 0, 0).UnixMilli()})
			// 35 days ago, all final: rolled up, then deleted.
			add("report", day(35, 12), store.StatusSucceeded, 4)
			add("report", day(35, 12), store.StatusFailed, 1)
			add("sync", day(35, 13), store.StatusSucceeded, 2)
			// 30 days ago, across the cut (10:00): rolled up whole, the
			// morning deleted, the afternoon kept.
			add("report", day(30, 8), store.StatusSucceeded, 3)
			add("report", day(30, 14), store.StatusSucceeded, 2)
			// Recent days: rolled up and kept; today: neither.
			add("report", day(2, 9), store.StatusSucceeded, 3)
			add("report", day(2, 9), store.StatusFailed, 1)
			add("report", day(0, 9), store.StatusSucceeded, 2)
			require.NoError(t, s.store.DB().Create(&rows).Error)

			waitIdle(ctx, t, clock, s)
			clock.Advance(DefaultRetentionInterval)
			// Left: the retrying row, the afternoon of day 30, days 2 and 0.
			waitCount(t, s, 1+2+4+2)

			want := []store.Rollup{
				{TaskCode: "", Day: 35, Count: 7},
				{TaskCode: "", Day: 30, Count: 5},
				{TaskCode: "", Day: 2, Count: 4},
				{TaskCode: "report", Day: 40, Status: store.StatusFailed, Count: 2},
				{TaskCode: "report", Day: 40, Status: store.StatusSkipped, Count: 1},
				{TaskCode: "report", Day: 40, Status: store.StatusSucceeded, Count: 5},
				{TaskCode: "report", Day: 40, Status: store.StatusTimedOut, Count: 1},
				{TaskCode: "report", Day: 35, Status: store.StatusFailed, Count: 1},
				{TaskCode: "report", Day: 35, Status: store.StatusSucceeded, Count: 4},
				{TaskCode: "report", Day: 30, Status: store.StatusSucceeded, Count: 5},
				{TaskCode: "report", Day: 2, Status: store.StatusFailed, Count: 1},
				{TaskCode: "report", Day: 2, Status: store.StatusSucceeded, Count: 3},
				{TaskCode: "sync", Day: 35, Status: store.StatusSucceeded, Count: 2},
			}
			require.Equal(t, want, rollupRows(t, s))

			// The console's daily counts: roll-ups, and today live.
			today := store.DayOf(retentionT0.UnixMilli())
			daily, err := s.store.DailyCounts(ctx, s.App(), "report", today-45, today)
			require.NoError(t, err)
			got := map[int64]map[string]int64{}
			for _, r := range daily {
				if got[today-r.Day] == nil {
					got[today-r.Day] = map[string]int64{}
				}
				got[today-r.Day][r.Status] = r.Count
			}
			require.Equal(t, map[int64]map[string]int64{
				40: {store.StatusSucceeded: 5, store.StatusFailed: 2, store.StatusTimedOut: 1, store.StatusSkipped: 1},
				35: {store.StatusSucceeded: 4, store.StatusFailed: 1},
				30: {store.StatusSucceeded: 5},
				2:  {store.StatusSucceeded: 3, store.StatusFailed: 1},
				0:  {store.StatusSucceeded: 2},
			}, got)

			// The stuck row finishes: the second sweep rolls its day up,
			// which counts it (the marker's 1), then deletes it; nothing
			// else changes.
			require.NoError(t, s.store.DB().Model(&store.Execution{}).Where("app = ? AND status = ?", s.App(), store.StatusRetrying).
				Update("status", store.StatusFailed).Error)
			waitIdle(ctx, t, clock, s)
			clock.Advance(DefaultRetentionInterval)
			waitCount(t, s, 2+4+2)
			want[3].Count = 3 // report, day 40, failed
			want = append([]store.Rollup{{TaskCode: "", Day: 40, Count: 1}}, want...)
			require.Equal(t, want, rollupRows(t, s), "the day is rolled up now; nothing is counted twice")
		})
	}
}

// waitCount polls until the app has n executions.
func waitCount(t *testing.T, s *Scheduler, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var got int64
		if assert.NoError(c, s.store.DB().Model(&store.Execution{}).Where("app = ?", s.App()).Count(&got).Error) {
			assert.Equal(c, int64(n), got)
		}
	}, 15*time.Second, 10*time.Millisecond, "want %d executions", n)
}

// rollupRows returns the app's roll-ups, markers first, days as days
// before retentionT0, newest last within each task.
func rollupRows(t *testing.T, s *Scheduler) []store.Rollup {
	t.Helper()
	var rows []store.Rollup
	require.NoError(t, s.store.DB().Where("app = ?", s.App()).Order("task_code, day, status").Find(&rows).Error)
	today := store.DayOf(retentionT0.UnixMilli())
	for i := range rows {
		rows[i].App, rows[i].Day = "", today-rows[i].Day
	}
	return rows
}

func TestRetentionWithNoRollupsWritesNone(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(retentionT0)
	ctx := context.Background()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, func(o *Options) { o.NoRollups = true })
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	seedRetention(t, s)

	waitIdle(ctx, t, clock, s)
	clock.Advance(DefaultRetentionInterval)
	waitStatuses(t, s, []string{store.StatusRetrying, store.StatusSucceeded})
	require.Empty(t, rollupRows(t, s), "no day rolled up, no deletion counted")
}
