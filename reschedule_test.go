package xtimer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise checked here: a schedule changed at runtime (SetSchedule,
// ResetSchedule, a redeploy with a new spec) applies from the moment it is
// adopted, although the engine records the fires of the current and the
// next minute ahead. No fire of the old schedule that the new one lacks
// runs after the change; every fire of the new one after it runs, once
// across the replicas.

// hms is 12:mm:ss on the day the tests of this file run.
func hms(minute, second int) time.Time {
	return time.Date(2026, 11, 30, 12, minute, second, 0, time.UTC)
}

// editFleet is replicas of one app on one database, sharing a fake clock
// and one in-process lock (as replicas share Redis), started at 12:00:00.5.
// It counts handler calls per fire, independently of the execution rows.
type editFleet struct {
	t        *testing.T
	db       *gorm.DB
	app      string
	clock    *fakeclock.Lockstep
	locker   Locker
	replicas []*Scheduler

	// mod, when set, adjusts the options of replica i before it starts.
	mod func(i int, o *Options)
	// fail, when set, makes the handler of the codes it holds fail.
	fail map[string]bool
	// opts, when set, are the task options of the codes it holds.
	opts map[string][]TaskOption
	// hold, when set, makes the handler of a fire ("code 15:04:05") wait
	// until the channel is closed or its context ends (then it returns
	// the context's error, uncounted); stubborn, the same but deaf to its
	// context.
	hold, stubborn map[string]chan struct{}

	mu    sync.Mutex
	calls map[string]map[string]int // code → "15:04:05" run time → handler calls
}

func newEditFleet(t *testing.T, db *gorm.DB) *editFleet {
	clock := fakeclock.NewLockstep(hms(0, 0).Add(500 * time.Millisecond))
	return &editFleet{t: t, db: db, app: testsvc.App(t), clock: clock, locker: NewLocalLocker(clock),
		calls: map[string]map[string]int{}}
}

// start starts one more replica with the tasks of specs (code → spec).
func (f *editFleet) start(specs map[string]string) *Scheduler {
	f.t.Helper()
	pool := f.db
	if len(f.replicas) > 0 && f.db.Dialector.Name() != "sqlite" {
		pool = testsvc.Reopen(f.t, f.db)
	}
	s := newScheduler(f.t, setupOpts{db: pool, app: f.app, clock: f.clock}, func(o *Options) {
		o.Locker = f.locker
		o.InstanceID = fmt.Sprintf("replica-%d", len(f.replicas))
		if f.mod != nil {
			f.mod(len(f.replicas), o)
		}
	})
	for _, code := range slices.Sorted(maps.Keys(specs)) {
		require.NoError(f.t, s.Register(code, specs[code], f.handle, f.opts[code]...))
	}
	require.NoError(f.t, s.Start(context.Background()))
	stopOnCleanup(f.t, s)
	f.replicas = append(f.replicas, s)
	return s
}

func (f *editFleet) handle(ctx context.Context, run *Run) error {
	at := run.ScheduledAt.UTC().Format("15:04:05")
	if hold := f.hold[run.Code+" "+at]; hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if hold := f.stubborn[run.Code+" "+at]; hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls[run.Code] == nil {
		f.calls[run.Code] = map[string]int{}
	}
	f.calls[run.Code][at]++
	if f.fail[run.Code] {
		return fmt.Errorf("%s fails", run.Code)
	}
	return nil
}

// callsOf returns the handler calls of a task per run time.
func (f *editFleet) callsOf(code string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls[code])
}

// runUntil moves the clock to at a second at a time, each step once every
// replica is idle, so that every replica ticks and dispatches on every
// second, as on a real clock.
func (f *editFleet) runUntil(at time.Time) {
	f.t.Helper()
	for now := f.clock.Now(); now.Before(at); now = f.clock.Now() {
		f.waitIdle()
		f.clock.Advance(min(time.Second, at.Sub(now)))
	}
	f.waitIdle()
}

// waitIdle waits until the loops of every replica wait for their timers,
// with no fire armed and not yet seen by its dispatcher.
func (f *editFleet) waitIdle() {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		loops := 0
		for _, s := range f.replicas {
			loops += s.clockTimers()
		}
		idle := f.clock.Idle(loops)
		for _, s := range f.replicas {
			idle = idle && !s.eng.WakePending()
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

// waitRows waits until the execution rows of a task with run times up to
// through read want, one "15:04:05 status source [reason]" line per row in
// run-time order (rows are written in batches, off the fire path), and
// fails with what they read instead.
func (f *editFleet) waitRows(code string, through time.Time, want ...string) {
	f.t.Helper()
	var got []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		got = f.rowLines(code, through)
		if slices.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(f.t, want, got, "rows of %s", code)
}

// rowLines reads the rows of code through a run time, each as
// "15:04:05 status source reason".
func (f *editFleet) rowLines(code string, through time.Time) []string {
	f.t.Helper()
	var rows []store.Execution
	require.NoError(f.t, f.db.Where("app = ? AND task_code = ? AND run_time <= ?", f.app, code, through.UnixMilli()).
		Order("run_time").Find(&rows).Error)
	var got []string // nil for none, as a waitRows that wants none says
	for _, r := range rows {
		got = append(got, strings.TrimSpace(fmt.Sprintf("%s %s %s %s",
			time.UnixMilli(r.RunTime).UTC().Format("15:04:05"), r.Status, r.Source, r.Reason)))
	}
	return got
}

// nextMinuteRecorded is the tick at which the fleet's 12:01:00 fires are recorded,
// recordAhead (5 s) before them: the edits of these tests come after it.
var nextMinuteRecorded = hms(0, 55).Add(500 * time.Millisecond)

// lines returns "15:04:05 suffix" for each run time from..to (inclusive)
// every step.
func lines(from, to time.Time, step time.Duration, suffix string) []string {
	var out []string
	for at := from; !at.After(to); at = at.Add(step) {
		out = append(out, at.Format("15:04:05")+" "+suffix)
	}
	return out
}

// once returns the handler calls of lines: one per run time.
func once(lines []string) map[string]int {
	out := map[string]int{}
	for _, l := range lines {
		out[l[:8]] = 1
	}
	return out
}

// An every-minute task edited at 12:00:55.5, after its 12:01:00 fire was
// recorded: to a schedule without that instant, the recorded fire ends
// skipped (rescheduled) and its handler never runs; to one that has later
// instants, those run.
func TestRescheduleSkipsRecordedFiresTheNewScheduleLacks(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx, end := context.Background(), hms(2, 0)
		f := newEditFleet(t, db)
		s := f.start(map[string]string{"report.daily": "0 * * * * *", "report.even": "0 * * * * *"})
		f.runUntil(nextMinuteRecorded)
		f.waitRows("report.daily", end, "12:01:00 scheduled schedule")
		f.waitRows("report.even", end, "12:01:00 scheduled schedule")

		require.NoError(t, s.SetSchedule(ctx, "report.daily", "0 0 9 * * *", "", ""))
		require.NoError(t, s.SetSchedule(ctx, "report.even", "0 */2 * * * *", "", ""))
		f.runUntil(end.Add(time.Second))
		f.waitRows("report.daily", end, "12:01:00 skipped schedule rescheduled")
		f.waitRows("report.even", end, "12:01:00 skipped schedule rescheduled", "12:02:00 succeeded schedule")
		require.Empty(t, f.callsOf("report.daily"))
		require.Equal(t, map[string]int{"12:02:00": 1}, f.callsOf("report.even"))
	})
}

// Two tasks edited to every 10 seconds at 12:00:55.5, after the 12:01 slots
// were claimed and 12:01:00 recorded: one every minute (its slot is held by the replica that
// recorded 12:01:00), one daily (its slot had no fire, so nobody holds it).
// The fires of 12:01 run, each once, and none before the edit is
// back-filled.
func TestRescheduleRecordsTheNewFiresOfMinutesAlreadyPlanned(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, engine.BucketOf("sync.minutely", DefaultBuckets), engine.BucketOf("sync.daily", DefaultBuckets),
		"the two tasks must be in different slots")
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx, end := context.Background(), hms(2, 0)
		f := newEditFleet(t, db)
		s := f.start(map[string]string{"sync.minutely": "0 * * * * *", "sync.daily": "0 0 9 * * *"})
		f.runUntil(nextMinuteRecorded)
		f.waitRows("sync.minutely", end, "12:01:00 scheduled schedule")
		f.waitRows("sync.daily", end)

		for _, code := range []string{"sync.minutely", "sync.daily"} {
			require.NoError(t, s.SetSchedule(ctx, code, "*/10 * * * * *", DialectCron, "UTC"))
		}
		f.runUntil(end.Add(time.Second))
		want := lines(hms(1, 0), end, 10*time.Second, "succeeded schedule")
		for _, code := range []string{"sync.minutely", "sync.daily"} {
			f.waitRows(code, end, want...)
			require.Equal(t, once(want), f.callsOf(code), code)
		}
	})
}

// Three replicas share the database and the lock; one of them edits six
// every-minute tasks at 12:00:55.5, whichever replicas recorded their next
// minute: three to every 10 seconds, three to daily. Every new fire runs
// exactly once across the replicas, and no fire of the old schedule runs.
func TestRescheduleAcrossReplicasRunsEveryNewFireOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx, end := context.Background(), hms(2, 0)
		f := newEditFleet(t, db)
		specs := map[string]string{}
		for i := range 6 {
			specs[fmt.Sprintf("fleet.%d", i)] = "0 * * * * *"
		}
		for range 3 {
			f.start(specs)
		}
		f.runUntil(nextMinuteRecorded)
		for code := range specs {
			f.waitRows(code, end, "12:01:00 scheduled schedule")
		}

		editor := f.replicas[1]
		for i := range 6 {
			spec := "*/10 * * * * *"
			if i%2 == 1 {
				spec = "0 0 9 * * *"
			}
			require.NoError(t, editor.SetSchedule(ctx, fmt.Sprintf("fleet.%d", i), spec, "", ""))
		}
		f.runUntil(end.Add(time.Second))
		want := lines(hms(1, 0), end, 10*time.Second, "succeeded schedule")
		for i := range 6 {
			code := fmt.Sprintf("fleet.%d", i)
			if i%2 == 1 {
				f.waitRows(code, end, "12:01:00 skipped schedule rescheduled")
				require.Empty(t, f.callsOf(code), code)
				continue
			}
			f.waitRows(code, end, want...)
			require.Equal(t, once(want), f.callsOf(code), code)
		}
	})
}

// ResetSchedule at 12:01:15.5 brings the code-defined spec back over an
// override, both ways: a fire of the override recorded (12:01:20, recorded
// recordAhead before it) that the code's spec lacks is skipped, and the
// code's fires of 12:01 that the override lacked are recorded and run.
func TestResetScheduleRestoresTheCodeSpecInMinutesAlreadyPlanned(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, engine.BucketOf("digest", DefaultBuckets), engine.BucketOf("digest.off", DefaultBuckets),
		"the two tasks must be in different slots")
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx, end := context.Background(), hms(2, 0)
		f := newEditFleet(t, db)
		s := f.start(map[string]string{"digest": "0 * * * * *", "digest.off": "*/30 * * * * *"})
		require.NoError(t, s.SetSchedule(ctx, "digest", "*/20 * * * * *", "", ""))
		require.NoError(t, s.SetSchedule(ctx, "digest.off", "0 0 9 * * *", "", ""))
		f.runUntil(hms(1, 15).Add(500 * time.Millisecond))
		f.waitRows("digest", end, "12:00:20 succeeded schedule", "12:00:40 succeeded schedule",
			"12:01:00 succeeded schedule", "12:01:20 scheduled schedule")
		f.waitRows("digest.off", end)

		require.NoError(t, s.ResetSchedule(ctx, "digest"))
		require.NoError(t, s.ResetSchedule(ctx, "digest.off"))
		f.runUntil(end.Add(time.Second))
		f.waitRows("digest", end, "12:00:20 succeeded schedule", "12:00:40 succeeded schedule",
			"12:01:00 succeeded schedule", "12:01:20 skipped schedule rescheduled", "12:02:00 succeeded schedule")
		require.Equal(t, map[string]int{"12:00:20": 1, "12:00:40": 1, "12:01:00": 1, "12:02:00": 1}, f.callsOf("digest"))
		want := lines(hms(1, 30), end, 30*time.Second, "succeeded schedule")
		f.waitRows("digest.off", end, want...)
		require.Equal(t, once(want), f.callsOf("digest.off"))
	})
}

// A redeploy that changes a task's spec in code (UpsertTasks bumps the
// row's version) applies like an edit: the replica still running the old
// build, which holds the task's slots, adopts the new spec and records its
// fires in the minute it had planned already.
func TestRedeployWithANewSpecAppliesToMinutesAlreadyPlanned(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		end := hms(2, 0)
		f := newEditFleet(t, db)
		f.start(map[string]string{"export": "*/30 * * * * *"})
		f.runUntil(nextMinuteRecorded)
		f.waitRows("export", end, "12:00:30 succeeded schedule", "12:01:00 scheduled schedule")

		f.start(map[string]string{"export": "*/15 * * * * *"}) // the new build
		f.runUntil(end.Add(time.Second))
		want := append([]string{"12:00:30 succeeded schedule"}, lines(hms(1, 0), end, 15*time.Second, "succeeded schedule")...)
		f.waitRows("export", end, want...)
		require.Equal(t, once(want), f.callsOf("export"))
	})
}

// A task paused at 12:00:46, once its 12:00:50 fire was recorded
// (recordAhead before it), and resumed at 12:00:55.5, when its next minute
// is claimed, runs from the resume on, in that minute too; the fire
// recorded before the pause and due while it was paused stays skipped.
func TestResumeRunsTheFiresOfMinutesPlannedWhilePaused(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx, end := context.Background(), hms(2, 0)
		f := newEditFleet(t, db)
		s := f.start(map[string]string{"poll": "*/10 * * * * *"})
		f.runUntil(hms(0, 46))
		require.NoError(t, s.Pause(ctx, "poll"))
		f.runUntil(nextMinuteRecorded)
		f.waitRows("poll", end, append(lines(hms(0, 10), hms(0, 40), 10*time.Second, "succeeded schedule"),
			"12:00:50 skipped schedule paused")...)

		require.NoError(t, s.Resume(ctx, "poll"))
		f.runUntil(end.Add(time.Second))
		want := append(lines(hms(0, 10), hms(0, 40), 10*time.Second, "succeeded schedule"), "12:00:50 skipped schedule paused")
		want = append(want, lines(hms(1, 0), end, 10*time.Second, "succeeded schedule")...)
		f.waitRows("poll", end, want...)
		require.Equal(t, once(append(want[:4:4], want[5:]...)), f.callsOf("poll"))
	})
}

// A task a new replica registers at 12:00:55.5, in a slot another replica
// holds for the minute to come, runs from then on, in that minute too: the
// holder records its fires.
func TestTaskAddedByAnotherReplicaRunsInMinutesAlreadyPlanned(t *testing.T) {
	t.Parallel()
	added := ""
	for i := 0; added == ""; i++ {
		if code := fmt.Sprintf("added.%d", i); engine.BucketOf(code, DefaultBuckets) == engine.BucketOf("resident", DefaultBuckets) {
			added = code
		}
	}
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		end := hms(2, 0)
		f := newEditFleet(t, db)
		f.start(map[string]string{"resident": "0 * * * * *"})
		f.runUntil(nextMinuteRecorded)
		f.waitRows("resident", end, "12:01:00 scheduled schedule")

		f.start(map[string]string{"resident": "0 * * * * *", added: "*/10 * * * * *"})
		f.runUntil(end.Add(time.Second))
		want := lines(hms(1, 0), end, 10*time.Second, "succeeded schedule")
		f.waitRows(added, end, want...)
		require.Equal(t, once(want), f.callsOf(added))
		f.waitRows("resident", end, "12:01:00 succeeded schedule", "12:02:00 succeeded schedule")
	})
}

// Manual runs are the operator's own: they run whatever the schedule says,
// at instants it never had, before and after an edit.
func TestManualRunIsNeverSkippedAsRescheduled(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx, end := context.Background(), hms(0, 30)
		f := newEditFleet(t, db)
		s := f.start(map[string]string{"adhoc": "0 0 9 * * *"})
		// A manual run recorded for 12:00:30, then the schedule edited.
		rows, err := s.store.InsertFires(ctx, []store.Execution{{App: f.app, TaskCode: "adhoc",
			RunTime: end.UnixMilli(), Source: store.SourceManual}})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.NoError(t, s.SetSchedule(ctx, "adhoc", "0 0 10 * * *", "", ""))
		exec, err := s.Trigger(ctx, "adhoc")
		require.NoError(t, err)
		require.Equal(t, SourceManual, exec.Source)
		f.runUntil(end.Add(time.Second))
		f.waitRows("adhoc", end, "12:00:00 succeeded manual", "12:00:30 succeeded manual")
		require.Equal(t, map[string]int{"12:00:00": 1, "12:00:30": 1}, f.callsOf("adhoc"))
	})
}
