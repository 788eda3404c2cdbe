package xtimer

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The buffer policies, fleet-wide: a fire due while an earlier run of its
// task is still going waits for it in the database's eyes, not one
// process's, and starts within a second of that run's final status.
// OverlapBufferOne lets one fire wait and skips the next; OverlapBufferAll
// lets them all wait and runs them in run-time order. Two replicas, every
// backend, the fake clock.
func TestBufferPoliciesWaitForTheRunningFire(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy  OverlapPolicy
		waiting []string // the rows while 12:00:10 runs, at 12:00:35
		done    []string // the rows once it has returned
	}{
		{OverlapBufferOne,
			[]string{"12:00:10 running schedule", "12:00:20 scheduled schedule", "12:00:30 skipped schedule overlap"},
			[]string{"12:00:10 succeeded schedule", "12:00:20 succeeded schedule", "12:00:30 skipped schedule overlap"}},
		{OverlapBufferAll,
			[]string{"12:00:10 running schedule", "12:00:20 scheduled schedule", "12:00:30 scheduled schedule"},
			[]string{"12:00:10 succeeded schedule", "12:00:20 succeeded schedule", "12:00:30 succeeded schedule"}},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, db *gorm.DB) {
				f, release := startHeldJob(t, db, false, WithOverlap(c.policy))
				f.runUntil(hms(0, 35))
				f.waitRows("job", hms(0, 30), c.waiting...)
				require.Empty(t, f.callsOf("job"), "12:00:10 is still in its handler; nothing else started")

				close(release)
				f.waitRows("job", hms(0, 10), "12:00:10 succeeded schedule")
				// Each waiting fire starts at the next step of the clock
				// after the run before it has its final status; the clock
				// moves on only once what started in a step has settled,
				// as a second of a real clock outlasts a quick handler.
				runUntilRows(t, f, "job", hms(0, 30), hms(0, 40), c.done, time.Time{}, time.Time{})
				calls := f.callsOf("job")
				for _, line := range c.done {
					want := 1
					if strings.Contains(line, "skipped") {
						want = 0
					}
					require.Equal(t, want, calls[line[:8]], "handler calls of %s", line[:8])
				}

				// A waiting fire started within a second (of the fake
				// clock) of the final status of the run before it.
				var rows []store.Execution
				require.NoError(t, db.Where("app = ? AND task_code = ? AND run_time <= ? AND status = ?", f.app, "job",
					hms(0, 30).UnixMilli(), store.StatusSucceeded).Order("run_time").Find(&rows).Error)
				for i := 1; i < len(rows); i++ {
					gap := time.Duration(rows[i].StartedMs-rows[i-1].FinishedMs) * time.Millisecond
					require.GreaterOrEqual(t, gap, time.Duration(0), "%s started before the run before it ended", time.UnixMilli(rows[i].RunTime).UTC())
					require.LessOrEqual(t, gap, time.Second, "%s started %s after the run before it ended", time.UnixMilli(rows[i].RunTime).UTC(), gap)
				}
			})
		})
	}
}

// startHeldJob starts two replicas of a fleet with the task "job", every
// 10 s with opts, whose 12:00:10 run is held in its handler until release
// is closed (the test's end closes it); deaf, the handler ignores its
// context meanwhile.
func startHeldJob(t *testing.T, db *gorm.DB, deaf bool, opts ...TaskOption) (f *editFleet, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	f = newEditFleet(t, db)
	f.opts = map[string][]TaskOption{"job": opts}
	held := map[string]chan struct{}{"job 12:00:10": release}
	if deaf {
		f.stubborn = held
	} else {
		f.hold = held
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	specs := map[string]string{"job": "*/10 * * * * *"}
	f.start(specs)
	f.start(specs)
	return f, release
}

// waitSettled waits until no run of code has started without reaching a
// final status, but the held run (run time, zero for none) until a later
// fire asks it to stop, and the deaf one (zero for none) at all: the
// status writer has written what the handlers did.
func waitSettled(t *testing.T, f *editFleet, code string, held, deaf time.Time) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int64
		assert.NoError(c, f.db.Model(&store.Execution{}).
			Where("app = ? AND task_code = ? AND (status IN ? OR status = ? AND started_ms > 0)",
				f.app, code, []string{store.StatusRunning, store.StatusRetrying}, store.StatusScheduled).
			Where("NOT (run_time = ? AND cancel_ms = 0) AND run_time <> ?", held.UnixMilli(), deaf.UnixMilli()).
			Count(&n).Error)
		assert.Zero(c, n, "runs of %s not settled", code)
	}, 15*time.Second, 10*time.Millisecond)
}

// runUntilRows moves the fleet's clock a second at a time, each step once
// what started in the step before has settled (waitSettled), until the
// rows of code through at are want, or the clock reaches end.
func runUntilRows(t *testing.T, f *editFleet, code string, at, end time.Time, want []string, held, deaf time.Time) {
	t.Helper()
	for !slices.Equal(f.rowLines(code, at), want) && f.clock.Now().Before(end) {
		f.runUntil(f.clock.Now().Add(time.Second))
		waitSettled(t, f, code, held, deaf)
	}
	f.waitRows(code, at, want...)
}

// OverlapCancelOther, fleet-wide: the fire due while an earlier run goes
// cancels that run's context, wherever it runs; the run ends failed,
// reason "cancelled by next fire", without the retry its task allows, and
// the new fire starts once it has ended. A handler deaf to its context
// holds the new fire back 5 s at most. Two replicas, every backend.
func TestCancelOtherStopsTheRunningFire(t *testing.T) {
	t.Parallel()
	for _, deaf := range []bool{false, true} {
		t.Run(map[bool]string{false: "handler stops", true: "handler deaf to its context"}[deaf], func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, db *gorm.DB) {
				f, release := startHeldJob(t, db, deaf, WithOverlap(OverlapCancelOther), WithRetry(3))
				f.runUntil(hms(0, 15))
				f.waitRows("job", hms(0, 10), "12:00:10 running schedule")
				if !deaf {
					runUntilRows(t, f, "job", hms(0, 20), hms(0, 30), []string{
						"12:00:10 failed schedule cancelled by next fire", "12:00:20 succeeded schedule"}, hms(0, 10), time.Time{})
					require.Equal(t, map[string]int{"12:00:20": 1}, f.callsOf("job"), "12:00:10 returned at its cancel, uncounted")
				} else {
					runUntilRows(t, f, "job", hms(0, 20), hms(0, 30), []string{
						"12:00:10 running schedule", "12:00:20 succeeded schedule"}, time.Time{}, hms(0, 10))
					close(release)
					f.waitRows("job", hms(0, 20), "12:00:10 failed schedule cancelled by next fire", "12:00:20 succeeded schedule")
					require.Equal(t, map[string]int{"12:00:10": 1, "12:00:20": 1}, f.callsOf("job"))
				}
				var rows []store.Execution
				require.NoError(t, db.Where("app = ? AND task_code = ? AND run_time <= ?", f.app, "job", hms(0, 20).UnixMilli()).
					Order("run_time").Find(&rows).Error)
				require.Len(t, rows, 2)
				cancelled, next := rows[0], rows[1]
				require.Equal(t, 1, cancelled.Attempt, "no retry of a cancelled run")
				require.Positive(t, cancelled.CancelMs)
				wait := time.Duration(next.StartedMs-cancelled.CancelMs) * time.Millisecond
				require.LessOrEqual(t, wait, 5*time.Second, "12:00:20 started %s after it asked 12:00:10 to stop", wait)
				if deaf {
					require.GreaterOrEqual(t, wait, 4*time.Second, "12:00:20 waited for the deaf handler")
				} else {
					require.LessOrEqual(t, wait, 2*time.Second, "12:00:20 started once 12:00:10 had stopped: at most a tick and a poll")
					require.GreaterOrEqual(t, next.StartedMs, cancelled.FinishedMs, "12:00:20 started after 12:00:10 ended")
				}
			})
		})
	}
}
