package xtimer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise checked here (Backfill): the past fires of a range that have
// no row are recorded once, with source backfill, within the bounds that
// keep a fire that ran from running again; they run exactly once each,
// one at a time and in run-time order across the fleet, beside the task's
// scheduled fires, and outlive the replica that held them.

// backfillNow is the clock of the bounds' tests.
var backfillNow = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// startBackfillScheduler starts one replica at backfillNow on SQLite, with
// Retention 48h and the tasks "hourly" (every hour) and "fast" (every
// second) doing nothing.
func startBackfillScheduler(t *testing.T, mod func(*Options), opts ...TaskOption) (*Scheduler, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New(backfillNow)
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, func(o *Options) {
		o.Retention = 48 * time.Hour
		if mod != nil {
			mod(o)
		}
	})
	nop := func(context.Context, *Run) error { return nil }
	require.NoError(t, s.Register("hourly", "0 0 * * * *", nop, opts...))
	require.NoError(t, s.Register("fast", "* * * * * *", nop))
	require.NoError(t, s.Start(context.Background()))
	stopOnCleanup(t, s)
	return s, clock
}

func TestBackfillRefusesARangeOutOfBounds(t *testing.T) {
	t.Parallel()
	s, _ := startBackfillScheduler(t, nil)
	h := func(d time.Duration) time.Time { return backfillNow.Add(d * time.Hour) }
	for _, c := range []struct {
		name, code string
		from, to   time.Time
		field      string
		want       string
	}{
		{"to after now", "hourly", h(-2), time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), "to",
			`xtimer: Backfill of "hourly": to 2026-12-03T00:00:00Z is after now 2026-12-02T10:00:00Z`},
		{"from before the retention", "hourly", h(-49), h(-1), "from",
			`xtimer: Backfill of "hourly": from 2026-11-30T09:00:00Z is before the retention of 48h0m0s (2026-11-30T10:00:00Z): older rows may have been deleted`},
		{"empty range", "hourly", h(-2), h(-2), "from",
			`xtimer: Backfill of "hourly": from 2026-12-02T08:00:00Z is not before to 2026-12-02T08:00:00Z`},
		{"range backwards", "hourly", h(-1), h(-2), "from",
			`xtimer: Backfill of "hourly": from 2026-12-02T09:00:00Z is not before to 2026-12-02T08:00:00Z`},
		{"no from", "hourly", time.Time{}, h(-2), "from",
			`xtimer: Backfill of "hourly": from 0001-01-01T00:00:00Z is not set: want the start of the range`},
		{"no to", "hourly", h(-2), time.Time{}, "to",
			`xtimer: Backfill of "hourly": to 0001-01-01T00:00:00Z is not set: want the end of the range`},
		{"over 10,000 fires", "fast", h(-3), h(0), "range",
			`xtimer: Backfill of "fast": range 2026-12-02T07:00:00Z/2026-12-02T10:00:00Z holds 10800 fires: want at most 10000 a call`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := s.Backfill(context.Background(), c.code, c.from, c.to)
			require.EqualError(t, err, c.want)
			require.Zero(t, n)
			var be *BackfillError
			require.ErrorAs(t, err, &be)
			require.Equal(t, c.field, be.Field)
			require.Equal(t, c.code, be.Task)
		})
	}
	var rows int64
	require.NoError(t, s.store.DB().Model(&store.Execution{}).Where("app = ? AND source = ?", s.App(), store.SourceBackfill).Count(&rows).Error)
	require.Zero(t, rows, "a refused range records nothing")

	_, err := s.Backfill(context.Background(), "nobody", h(-2), h(-1))
	require.ErrorIs(t, err, ErrTaskNotFound)
	require.ErrorContains(t, err, `"nobody"`)
	var be *BackfillError
	require.False(t, errors.As(err, &be))
}

// backfillRows reads the rows of code with source backfill, as
// "15:04:05 status".
func backfillRows(t *testing.T, s *Scheduler, code string) []string {
	t.Helper()
	var rows []store.Execution
	require.NoError(t, s.store.DB().Where("app = ? AND task_code = ? AND source = ?", s.App(), code, store.SourceBackfill).
		Order("run_time").Find(&rows).Error)
	var out []string
	for _, r := range rows {
		out = append(out, time.UnixMilli(r.RunTime).UTC().Format("15:04:05"))
	}
	return out
}

func TestBackfillRecordsTheFiresOfTheRangeOnce(t *testing.T) {
	t.Parallel()
	s, _ := startBackfillScheduler(t, nil)
	ctx := context.Background()
	n, err := s.Backfill(ctx, "hourly", backfillNow.Add(-4*time.Hour-time.Minute), backfillNow.Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, 3, n, "06:00, 07:00, 08:00: [from, to) leaves 09:00 out")
	require.Equal(t, []string{"06:00:00", "07:00:00", "08:00:00"}, backfillRows(t, s, "hourly"))

	n, err = s.Backfill(ctx, "hourly", backfillNow.Add(-5*time.Hour), backfillNow)
	require.NoError(t, err)
	require.Equal(t, 2, n, "05:00 and 09:00: the others have rows")
	n, err = s.Backfill(ctx, "hourly", backfillNow.Add(-5*time.Hour), backfillNow)
	require.NoError(t, err)
	require.Zero(t, n, "a second call records nothing")
	require.Equal(t, []string{"05:00:00", "06:00:00", "07:00:00", "08:00:00", "09:00:00"}, backfillRows(t, s, "hourly"))

	// The range may start at the retention's edge, and reach now.
	n, err = s.Backfill(ctx, "fast", backfillNow.Add(-2*time.Second), backfillNow)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

func TestBackfillFollowsTheEffectiveScheduleAndItsEnd(t *testing.T) {
	t.Parallel()
	s, _ := startBackfillScheduler(t, nil, WithEndAt(backfillNow.Add(-2*time.Hour)))
	ctx := context.Background()
	require.NoError(t, s.SetSchedule(ctx, "hourly", "0 30 * * * *", DialectCron, ""))
	n, err := s.Backfill(ctx, "hourly", backfillNow.Add(-5*time.Hour), backfillNow)
	require.NoError(t, err)
	require.Equal(t, 3, n, "05:30, 06:30, 07:30: the console's schedule, up to the end at 08:00")
	require.Equal(t, []string{"05:30:00", "06:30:00", "07:30:00"}, backfillRows(t, s, "hourly"))
}

func TestBackfillWithoutRetentionHasNoLowerBound(t *testing.T) {
	t.Parallel()
	s, _ := startBackfillScheduler(t, func(o *Options) { o.Retention = -1 })
	n, err := s.Backfill(context.Background(), "hourly", backfillNow.AddDate(-1, 0, 0), backfillNow.AddDate(-1, 0, 0).Add(24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 24, n)
}

// backfillLog is a handler that records when each run of a task's
// backfilled fires starts and ends, holding each until released, and
// counts the calls of every fire.
type backfillLog struct {
	mu       sync.Mutex
	timeline []string                 // "start 11:59:10", "end 11:59:10", backfilled fires only
	going    int                      // backfilled runs in their handler
	overlaps []string                 // run times that started while another backfilled run went
	calls    map[string]int           // "15:04:05 source" → handler calls
	release  map[string]chan struct{} // backfilled run time → closed to let it return
	hold     map[string]chan struct{} // scheduled run time → closed to let it return
}

func newBackfillLog() *backfillLog {
	return &backfillLog{calls: map[string]int{}, release: map[string]chan struct{}{}, hold: map[string]chan struct{}{}}
}

func (l *backfillLog) handle(ctx context.Context, run *Run) error {
	at := run.ScheduledAt.UTC().Format("15:04:05")
	l.mu.Lock()
	l.calls[at+" "+string(run.Source)]++
	if run.Source != SourceBackfill {
		hold := l.hold[at]
		l.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	if l.going > 0 {
		l.overlaps = append(l.overlaps, at)
	}
	l.going++
	l.timeline = append(l.timeline, "start "+at)
	rel := l.release[at]
	if rel == nil {
		rel = make(chan struct{})
		l.release[at] = rel
	}
	l.mu.Unlock()
	var err error
	select {
	case <-rel:
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.mu.Lock()
	l.going--
	l.timeline = append(l.timeline, "end "+at)
	l.mu.Unlock()
	return err
}

// let releases the backfilled run of at, before or after it starts.
func (l *backfillLog) let(at string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.release[at] == nil {
		l.release[at] = make(chan struct{})
	}
	close(l.release[at])
}

func (l *backfillLog) snapshot() (timeline, overlaps []string, calls map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.timeline), slices.Clone(l.overlaps), func() map[string]int {
		out := map[string]int{}
		for k, v := range l.calls {
			out[k] = v
		}
		return out
	}()
}

// startWith starts one more replica of f with the task "job" every 10 s,
// handled by h, with opts.
func startWith(f *editFleet, h Handler, opts ...TaskOption) *Scheduler {
	f.t.Helper()
	pool := f.db
	if len(f.replicas) > 0 && f.db.Dialector.Name() != "sqlite" {
		pool = testsvc.Reopen(f.t, f.db)
	}
	s := newScheduler(f.t, setupOpts{db: pool, app: f.app, clock: f.clock}, func(o *Options) {
		o.Locker = f.locker
		o.InstanceID = fmt.Sprintf("replica-%d", len(f.replicas))
	})
	require.NoError(f.t, s.Register("job", "*/10 * * * * *", h, opts...))
	require.NoError(f.t, s.Start(context.Background()))
	stopOnCleanup(f.t, s)
	f.replicas = append(f.replicas, s)
	return s
}

// backfillGoing reads the backfilled fires of job that have started and
// have no final status, as "15:04:05".
func backfillGoing(t *testing.T, f *editFleet) []string {
	t.Helper()
	going, err := readBackfillGoing(f)
	require.NoError(t, err)
	return going
}

func readBackfillGoing(f *editFleet) ([]string, error) {
	var rows []store.Execution
	err := f.db.Where("app = ? AND task_code = ? AND source = ? AND (status IN ? OR status = ? AND started_ms > 0)",
		f.app, "job", store.SourceBackfill, []string{store.StatusRunning, store.StatusRetrying}, store.StatusScheduled).
		Order("run_time").Find(&rows).Error
	var out []string
	for _, r := range rows {
		out = append(out, time.UnixMilli(r.RunTime).UTC().Format("15:04:05"))
	}
	return out, err
}

// runBackfillInTurn moves the fleet's clock until each of the backfilled
// fires ats has started in turn, checking while it is held that no other
// backfilled fire started, then lets it return.
func runBackfillInTurn(t *testing.T, f *editFleet, l *backfillLog, ats ...string) {
	t.Helper()
	for _, at := range ats {
		end := f.clock.Now().Add(30 * time.Second)
		for going := backfillGoing(t, f); !slices.Equal(going, []string{at}); going = backfillGoing(t, f) {
			require.Empty(t, going, "%s is due next, and nothing else may run before it", at)
			require.True(t, f.clock.Now().Before(end), "%s never started", at)
			f.runUntil(f.clock.Now().Add(100 * time.Millisecond))
		}
		// Held in its handler for three seconds of the clock: nothing
		// else of the backfill starts, wherever it is owned.
		f.runUntil(f.clock.Now().Add(3 * time.Second))
		require.Equal(t, []string{at}, backfillGoing(t, f), "while %s runs", at)
		// Once it returns, its final status is written (in real time,
		// off the fire path) before the clock moves on, as a second of a
		// real clock outlasts a quick handler's write.
		l.let(at)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			going, err := readBackfillGoing(f)
			assert.NoError(c, err)
			assert.NotContains(c, going, at)
		}, 15*time.Second, 5*time.Millisecond, "%s settled", at)
	}
}

// Backfilled fires recorded by a scheduler that is not started (the rows
// have no owner) run on the fleet's two replicas exactly once each, one at
// a time, in run-time order, more than a misfire window late, whatever the
// task's overlap policy, beside its scheduled fires: a scheduled run held
// in its handler neither holds them back nor is held back by them. Every
// backend.
func TestBackfillRunsOneAtATimeInOrderAcrossTheFleet(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		f := newEditFleet(t, db)
		l := newBackfillLog()
		l.hold["12:00:10"] = make(chan struct{})
		startWith(f, l.handle, WithOverlap(OverlapSkip))
		startWith(f, l.handle, WithOverlap(OverlapSkip))
		t.Cleanup(func() { close(l.hold["12:00:10"]) }) // before the replicas stop
		f.runUntil(hms(0, 12))
		f.waitRows("job", hms(0, 10), "12:00:10 running schedule")

		// An operator's process: it shares the database and runs nothing.
		ops := newScheduler(t, setupOpts{db: db, app: f.app, clock: f.clock}, nil)
		from, to := hms(0, 0).Add(-time.Minute), hms(0, 0).Add(-20*time.Second) // 11:59:00 to 11:59:40
		n, err := ops.Backfill(context.Background(), "job", from, to)
		require.NoError(t, err)
		require.Equal(t, 4, n)
		require.Equal(t, []string{"11:59:00", "11:59:10", "11:59:20", "11:59:30"}, backfillRows(t, f.replicas[0], "job"))

		runBackfillInTurn(t, f, l, "11:59:00", "11:59:10", "11:59:20", "11:59:30")
		timeline, overlaps, calls := l.snapshot()
		require.Empty(t, overlaps)
		require.Equal(t, []string{"start 11:59:00", "end 11:59:00", "start 11:59:10", "end 11:59:10",
			"start 11:59:20", "end 11:59:20", "start 11:59:30", "end 11:59:30"}, timeline)
		for _, at := range []string{"11:59:00", "11:59:10", "11:59:20", "11:59:30"} {
			require.Equal(t, 1, calls[at+" backfill"], "calls of %s", at)
		}
		require.Equal(t, 1, calls["12:00:10 schedule"])
		waitRows := func(want ...string) { f.waitRows("job", hms(0, 10), want...) }
		waitRows("11:59:00 succeeded backfill", "11:59:10 succeeded backfill", "11:59:20 succeeded backfill",
			"11:59:30 succeeded backfill", "12:00:10 running schedule")
		// The scheduled fires keep their own policy: 12:00:20 overlapped
		// 12:00:10, held all along, not a backfilled run.
		f.waitRows("job", hms(0, 20), append(f.rowLines("job", hms(0, 10)), "12:00:20 skipped schedule overlap")...)

		// Each started within about a second of the final status of the
		// one before it (the clock stands still while that is written):
		// a poll of its queue (bufferPoll), one more when the database
		// was busy, and a step of the clock.
		var rows []store.Execution
		require.NoError(t, db.Where("app = ? AND task_code = ? AND source = ?", f.app, "job", store.SourceBackfill).
			Order("run_time").Find(&rows).Error)
		require.Len(t, rows, 4)
		for i := 1; i < len(rows); i++ {
			gap := time.Duration(rows[i].StartedMs-rows[i-1].FinishedMs) * time.Millisecond
			require.GreaterOrEqual(t, gap, time.Duration(0), "%s started before the one before it ended", time.UnixMilli(rows[i].RunTime).UTC())
			require.LessOrEqual(t, gap, 1500*time.Millisecond, "%s started %s after the one before it ended", time.UnixMilli(rows[i].RunTime).UTC(), gap)
		}

		n, err = f.replicas[1].Backfill(context.Background(), "job", from, to)
		require.NoError(t, err)
		require.Zero(t, n, "every fire of the range has its row")
	})
}

// A replica stopped while it runs a backfill hands the fires it has not
// started to the others, which run them in turn; the run it had going
// ends there, once.
func TestBackfillOfAStoppedReplicaIsHandedOver(t *testing.T) {
	t.Parallel()
	f := newEditFleet(t, testsvc.SQLite(t))
	l := newBackfillLog()
	first := startWith(f, l.handle)
	startWith(f, l.handle)
	f.runUntil(hms(0, 2))
	n, err := first.Backfill(context.Background(), "job", hms(0, 0).Add(-time.Minute), hms(0, 0).Add(-20*time.Second))
	require.NoError(t, err)
	require.Equal(t, 4, n)
	var owners []string
	require.NoError(t, f.db.Model(&store.Execution{}).Where("app = ? AND source = ?", f.app, store.SourceBackfill).
		Distinct("replica").Pluck("replica", &owners).Error)
	require.Equal(t, []string{first.InstanceID()}, owners, "recorded by a replica that runs the task: its own")

	runBackfillInTurn(t, f, l, "11:59:00")
	for end := f.clock.Now().Add(10 * time.Second); len(backfillGoing(t, f)) == 0; {
		require.True(t, f.clock.Now().Before(end), "11:59:10 never started")
		f.runUntil(f.clock.Now().Add(time.Second))
	}
	require.Equal(t, []string{"11:59:10"}, backfillGoing(t, f))

	// Stop waits for the run it has going; meanwhile it has released the
	// fires it recorded and not started.
	f.waitIdle()
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- first.Stop(ctx)
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var unowned int64
		assert.NoError(c, f.db.Model(&store.Execution{}).Where("app = ? AND source = ? AND replica = ''", f.app, store.SourceBackfill).
			Count(&unowned).Error)
		assert.EqualValues(c, 2, unowned, "11:59:20 and 11:59:30 released")
	}, 15*time.Second, 10*time.Millisecond)
	l.let("11:59:10")
	require.NoError(t, <-stopped)
	f.replicas = slices.DeleteFunc(f.replicas, func(r *Scheduler) bool { return r == first })
	f.clock.ForgetStopped()

	runBackfillInTurn(t, f, l, "11:59:20", "11:59:30")
	f.waitRows("job", hms(0, 0).Add(-20*time.Second), "11:59:00 succeeded backfill", "11:59:10 succeeded backfill",
		"11:59:20 succeeded backfill", "11:59:30 succeeded backfill")
	timeline, overlaps, _ := l.snapshot()
	require.Empty(t, overlaps)
	require.Equal(t, []string{"start 11:59:00", "end 11:59:00", "start 11:59:10", "end 11:59:10",
		"start 11:59:20", "end 11:59:20", "start 11:59:30", "end 11:59:30"}, timeline)
	var rows []store.Execution
	require.NoError(t, f.db.Where("app = ? AND source = ?", f.app, store.SourceBackfill).Order("run_time").Find(&rows).Error)
	for _, r := range rows[2:] {
		require.Equal(t, f.replicas[0].InstanceID(), r.Replica, "run by the replica that stayed")
		require.Equal(t, 1, r.Attempt)
	}
}

// The days a task excludes, its own and its calendar's, have no fires to
// backfill: a holiday stays a holiday when a range is run again.
func TestBackfillLeavesExcludedDaysOut(t *testing.T) {
	t.Parallel()
	s, _ := startBackfillScheduler(t, nil, WithExclude("2026-12-01"), WithCalendar("ops"))
	ctx := context.Background()
	require.NoError(t, s.SetCalendar(ctx, "ops", []string{"2026-11-30"}))
	n, err := s.Backfill(ctx, "hourly", time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, 2, n, "00:00 and 01:00 on the 2nd: the 30th is the calendar's, the 1st the task's")
	require.Equal(t, []string{"00:00:00", "01:00:00"}, backfillRows(t, s, "hourly"))
}
