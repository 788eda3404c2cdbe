package xtimer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promises of pause on failure (WithPauseOnFailure) and of pause
// notes (PauseWith, ResumeWith), on two replicas sharing a fake clock.

func TestWithPauseOnFailureRefusesOutOfRange(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, nil)
	ok := func(context.Context, *Run) error { return nil }
	for _, c := range []struct {
		n    int
		want string
	}{
		{0, `xtimer: task "job.0": WithPauseOnFailure(0): consecutive failures must be 1-1000`},
		{-3, `xtimer: task "job.-3": WithPauseOnFailure(-3): consecutive failures must be 1-1000`},
		{1001, `xtimer: task "job.1001": WithPauseOnFailure(1001): consecutive failures must be 1-1000`},
		{1, ""},
		{1000, ""},
	} {
		err := s.Register(fmt.Sprintf("job.%d", c.n), "* * * * *", ok, WithPauseOnFailure(c.n))
		if c.want == "" {
			require.NoError(t, err, "n %d", c.n)
			continue
		}
		require.EqualError(t, err, c.want)
	}
}

// pauseFleet starts two replicas on db with the tasks of specs, their
// options opts, alerting into one log with a window of a second (each
// pause is its own alert).
func pauseFleet(t *testing.T, db *gorm.DB, specs map[string]string, opts map[string][]TaskOption) (*editFleet, *alertLog) {
	t.Helper()
	f := newEditFleet(t, db)
	log := &alertLog{clock: f.clock}
	f.fail, f.opts = map[string]bool{}, opts
	f.mod = func(i int, o *Options) {
		o.Notifier = log.notifier(fmt.Sprintf("replica-%d", i))
		o.AlertWindow = time.Second
		o.AlertMissedRuns = -1
	}
	f.start(specs)
	f.start(specs)
	return f, log
}

// setFail makes the handler of code fail (true) or succeed from now on.
func (f *editFleet) setFail(code string, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[code] = fail
}

// waitTask waits until the row of code satisfies cond, and returns it.
func (f *editFleet) waitTask(code string, cond func(store.Task) bool) store.Task {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var row store.Task
		require.NoError(f.t, f.db.Where("app = ? AND code = ?", f.app, code).Take(&row).Error)
		if cond(row) {
			return row
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("task %s: status %s, note %q, version %d", code, row.Status, row.PauseNote, row.Version)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func paused(row store.Task) bool { return row.Status == store.TaskPaused }

// A task failing every fire, run by two replicas: after its third
// consecutive failure it is paused once (one conditional update: version
// 1 to 2), fleet-wide (no fire after runs), with the note, and one
// task.paused alert is sent.
func TestPauseOnFailurePausesOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		f, log := pauseFleet(t, db, map[string]string{"job": "*/10 * * * * *"},
			map[string][]TaskOption{"job": {WithPauseOnFailure(3)}})
		f.setFail("job", true)
		f.runUntil(hms(0, 35))
		f.waitRows("job", hms(0, 30), "12:00:10 failed schedule", "12:00:20 failed schedule", "12:00:30 failed schedule")
		row := f.waitTask("job", paused)
		require.Equal(t, "paused after 3 consecutive failures; last: job fails", row.PauseNote)
		require.Equal(t, int64(2), row.Version, "paused by one update")

		// The fires after the pause are not recorded at all: the next one,
		// 12:00:40, would have been recorded recordAhead before it, after
		// the pause. (One recorded before a pause is skipped when due:
		// TestResumeRunsTheFiresOfMinutesPlannedWhilePaused.)
		f.runUntil(hms(1, 15))
		f.waitRows("job", hms(1, 10), "12:00:10 failed schedule", "12:00:20 failed schedule", "12:00:30 failed schedule")
		alerts := waitAlerts(log, EventTaskPaused, "job", func(got []receivedAlert) bool { return len(got) > 0 })
		require.Len(t, alerts, 1, "one alert: %s", describeAlerts(alerts))
		a := alerts[0]
		require.Equal(t, hms(0, 30), a.ScheduledAt)
		require.Equal(t, "job fails", a.Error)
		require.Equal(t, 3, a.Missed)
		require.Equal(t, "task job paused after 3 consecutive failures; last: job fails", a.Message)

		tasks, err := f.replicas[1].Tasks(context.Background(), TaskFilter{CodePrefix: "job"})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		require.True(t, tasks[0].Paused)
		require.Equal(t, row.PauseNote, tasks[0].PauseNote)
		require.Equal(t, 3, tasks[0].PauseOnFailure)
		require.Len(t, log.of(EventTaskPaused, "job"), 1, "no second alert came meanwhile")
	})
}

// A success resets the count; a manual run neither counts nor resets it.
// Task "reset" fails, succeeds, then fails twice: paused only after the
// last two. Task "manual" fails at 12:00:10, a manual run of it succeeds
// and one fails before 12:00:20, which fails too: paused at 12:00:20, the
// manual runs having changed nothing.
func TestPauseOnFailureCountsConsecutiveScheduledFiresOnly(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f, _ := pauseFleet(t, db, map[string]string{"reset": "*/10 * * * * *", "manual": "*/10 * * * * *"},
			map[string][]TaskOption{"reset": {WithPauseOnFailure(2)}, "manual": {WithPauseOnFailure(2)}})
		f.setFail("reset", true)
		f.setFail("manual", true)
		f.runUntil(hms(0, 12))
		f.waitRows("reset", hms(0, 10), "12:00:10 failed schedule")
		f.waitRows("manual", hms(0, 10), "12:00:10 failed schedule")

		// 12:00:12: the manual runs of "manual", one succeeding, one failing.
		f.setFail("manual", false)
		ok, err := f.replicas[0].Trigger(ctx, "manual")
		require.NoError(t, err)
		f.runUntil(hms(0, 13))
		waitRow(t, f.replicas[0], ok.ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
		f.setFail("manual", true)
		bad, err := f.replicas[1].Trigger(ctx, "manual")
		require.NoError(t, err)
		f.runUntil(hms(0, 14))
		waitRow(t, f.replicas[0], bad.ID, func(r store.Execution) bool { return r.Status == store.StatusFailed })

		f.setFail("reset", false)
		f.runUntil(hms(0, 25))
		f.waitRows("reset", hms(0, 20), "12:00:10 failed schedule", "12:00:20 succeeded schedule")
		f.waitRows("manual", hms(0, 20), "12:00:10 failed schedule", "12:00:12 succeeded manual",
			"12:00:13 failed manual", "12:00:20 failed schedule")
		f.waitTask("manual", paused)

		f.setFail("reset", true)
		f.runUntil(hms(0, 35))
		f.waitRows("reset", hms(0, 30), "12:00:10 failed schedule", "12:00:20 succeeded schedule", "12:00:30 failed schedule")
		require.Equal(t, store.TaskActive, f.waitTask("reset", func(store.Task) bool { return true }).Status,
			"one failure since the success")
		f.runUntil(hms(0, 45))
		f.waitRows("reset", hms(0, 40), "12:00:10 failed schedule", "12:00:20 succeeded schedule",
			"12:00:30 failed schedule", "12:00:40 failed schedule")
		f.waitTask("reset", paused)
	})
}

// A fire that fails and succeeds on its retry is no failure; one whose
// retry fails too is, once, after its last attempt.
func TestPauseOnFailureCountsAFireAfterItsRetries(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		f, _ := pauseFleet(t, db, map[string]string{"job": "*/10 * * * * *"},
			map[string][]TaskOption{"job": {WithPauseOnFailure(1), WithRetry(2), WithBackoff(2*time.Second, 2*time.Second)}})
		f.setFail("job", true)
		f.runUntil(hms(0, 11))
		f.waitRows("job", hms(0, 10), "12:00:10 retrying schedule")
		f.setFail("job", false)
		f.runUntil(hms(0, 15))
		f.waitRows("job", hms(0, 10), "12:00:10 succeeded schedule")

		f.setFail("job", true)
		f.runUntil(hms(0, 21))
		f.waitRows("job", hms(0, 20), "12:00:10 succeeded schedule", "12:00:20 retrying schedule")
		require.Equal(t, store.TaskActive, f.waitTask("job", func(store.Task) bool { return true }).Status,
			"a failed attempt with a retry to come is no failure")
		f.runUntil(hms(0, 25))
		f.waitRows("job", hms(0, 20), "12:00:10 succeeded schedule", "12:00:20 failed schedule")
		row := f.waitTask("job", paused)
		require.Equal(t, "paused after 1 consecutive failure; last: job fails", row.PauseNote)
	})
}

// Resuming a task paused for failing starts its count afresh: the
// failures before the resume never count again. The resume's note
// replaces the pause's, and the next pause's replaces the resume's.
func TestPauseOnFailureCountsAfreshAfterResume(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f, log := pauseFleet(t, db, map[string]string{"job": "*/10 * * * * *"},
			map[string][]TaskOption{"job": {WithPauseOnFailure(2)}})
		f.setFail("job", true)
		f.runUntil(hms(0, 35))
		f.waitTask("job", paused)
		// 12:00:30 is not recorded: the task was paused before its tick
		// recorded it, recordAhead before its run time.
		f.waitRows("job", hms(0, 30), "12:00:10 failed schedule", "12:00:20 failed schedule")

		require.NoError(t, f.replicas[1].ResumeWith(ctx, "job", PauseOptions{Note: "fixed the credentials"}))
		require.Equal(t, "fixed the credentials", f.waitTask("job", func(store.Task) bool { return true }).PauseNote)
		f.runUntil(hms(0, 45))
		f.waitRows("job", hms(0, 40), "12:00:10 failed schedule", "12:00:20 failed schedule",
			"12:00:40 failed schedule")
		row := f.waitTask("job", func(store.Task) bool { return true })
		require.Equal(t, store.TaskActive, row.Status, "one failure since the resume")
		require.Equal(t, "fixed the credentials", row.PauseNote)

		f.runUntil(hms(0, 55))
		row = f.waitTask("job", paused)
		require.Equal(t, "paused after 2 consecutive failures; last: job fails", row.PauseNote)
		alerts := waitAlerts(log, EventTaskPaused, "job", func(got []receivedAlert) bool { return len(got) == 2 })
		require.Len(t, alerts, 2, "one alert per pause: %s", describeAlerts(alerts))
		require.Equal(t, hms(0, 50), alerts[1].ScheduledAt)
	})
}

// PauseWith and ResumeWith store their note, Tasks shows it, and a note
// the databases cannot all store is refused, naming PauseOptions.Note,
// with nothing changed.
func TestPauseWithStoresTheNote(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := newScheduler(t, setupOpts{db: db, app: testsvc.App(t)}, nil)
		require.NoError(t, s.Register("report", "0 0 9 * * *", func(context.Context, *Run) error { return nil }))
		require.NoError(t, s.Start(ctx))
		stopOnCleanup(t, s)
		show := func() Task {
			t.Helper()
			tasks, err := s.Tasks(ctx, TaskFilter{CodePrefix: "report"})
			require.NoError(t, err)
			require.Len(t, tasks, 1)
			return tasks[0]
		}

		note := "db migration, back at 14:00 — ops/Zoë"
		require.NoError(t, s.PauseWith(ctx, "report", PauseOptions{Note: note}))
		got := show()
		require.True(t, got.Paused)
		require.Equal(t, note, got.PauseNote)
		require.Zero(t, got.PauseOnFailure)

		for _, c := range []struct{ note, want string }{
			{"a\x00b", `xtimer: resume task "report": PauseOptions.Note = "a\x00b": contains a NUL byte`},
			{"bad \xff", `xtimer: resume task "report": PauseOptions.Note = "bad \xff": not valid UTF-8`},
			{strings.Repeat("x", MaxPauseNote+1), `xtimer: resume task "report": PauseOptions.Note = 1025 bytes: at most 1024 bytes`},
		} {
			require.EqualError(t, s.ResumeWith(ctx, "report", PauseOptions{Note: c.note}), c.want)
		}
		require.True(t, show().Paused, "a refused note changes nothing")

		long := strings.Repeat("é", MaxPauseNote/2)
		require.NoError(t, s.ResumeWith(ctx, "report", PauseOptions{Note: long}))
		got = show()
		require.False(t, got.Paused)
		require.Equal(t, long, got.PauseNote, "the resume's note replaces the pause's")

		require.NoError(t, s.Pause(ctx, "report"))
		require.Empty(t, show().PauseNote, "Pause is PauseWith without a note")
		require.ErrorIs(t, s.PauseWith(ctx, "nope", PauseOptions{Note: "x"}), ErrTaskNotFound)
	})
}
