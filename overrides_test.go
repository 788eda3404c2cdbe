package xtimer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise checked here: SetTaskOptions changes a Go task's options on
// every replica within a second, registration (a restart, a redeploy of
// the same code) never undoes it, ResetTaskOptions brings the code's
// options back, and a value an option would refuse is refused, naming the
// field.

func ref[T any](v T) *T { return &v }

// attemptLines reads the rows of code with run times from..through as
// "15:04:05 status attempt/max_attempts".
func attemptLines(t *testing.T, f *editFleet, code string, from, through time.Time) []string {
	t.Helper()
	var rows []store.Execution
	require.NoError(t, f.db.Where("app = ? AND task_code = ? AND run_time >= ? AND run_time <= ?", f.app, code, from.UnixMilli(), through.UnixMilli()).
		Order("run_time").Find(&rows).Error)
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %s %d/%d", time.UnixMilli(r.RunTime).UTC().Format("15:04:05"), r.Status, r.Attempt, r.MaxAttempts))
	}
	return got
}

// waitAttempts moves the fleet's clock a second at a time, each step once
// every replica is idle, until attemptLines reads want or the clock
// reaches end, and fails with what they read instead.
func waitAttempts(t *testing.T, f *editFleet, code string, from, through, end time.Time, want ...string) {
	t.Helper()
	got := attemptLines(t, f, code, from, through)
	for ; !slices.Equal(got, want) && f.clock.Now().Before(end); got = attemptLines(t, f, code, from, through) {
		f.runUntil(f.clock.Now().Add(time.Second))
	}
	require.Equal(t, want, got, "rows of %s", code)
}

// A task that fails, registered WithRetry(1) and run by replica 1 only:
// SetTaskOptions on replica 0 gives the fires recorded from then on 3
// attempts; a restart of the running replica with the same code keeps
// that; ResetTaskOptions brings back 1. Fires are recorded 5 s ahead, and
// keep the attempts they were recorded with.
func TestSetTaskOptionsAppliesFleetWideAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newEditFleet(t, db)
		f.fail = map[string]bool{"flaky": true}
		f.opts = map[string][]TaskOption{"flaky": {WithRetry(1), WithBackoff(time.Second, time.Second)}}
		flaky := map[string]string{"flaky": "*/20 * * * * *"}
		editor := f.start(map[string]string{"idle": "0 0 9 * * *"})
		runner := f.start(flaky)
		f.runUntil(hms(0, 16))
		require.NoError(t, editor.SetTaskOptions(ctx, "flaky", TaskOverrides{MaxAttempts: ref(3)}))

		// The fire of 12:00:20 was recorded at 12:00:15.5, with 1 attempt;
		// the later ones are recorded after the edit, with 3.
		waitAttempts(t, f, "flaky", hms(0, 0), hms(1, 40), hms(2, 30), "12:00:20 failed 1/1", "12:00:40 failed 3/3",
			"12:01:00 failed 3/3", "12:01:20 failed 3/3", "12:01:40 failed 3/3")
		calls := f.callsOf("flaky")
		require.Equal(t, []int{1, 3, 3, 3, 3}, []int{calls["12:00:20"], calls["12:00:40"], calls["12:01:00"], calls["12:01:20"], calls["12:01:40"]})

		stopReplica(t, f, runner)
		f.start(flaky) // the same code registers again, before 12:02:30
		tasks, err := editor.Tasks(ctx, TaskFilter{CodePrefix: "flaky"})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		require.Equal(t, 3, tasks[0].MaxAttempts, "the override applies")
		require.Equal(t, ref(3), tasks[0].Overrides.MaxAttempts)
		require.Equal(t, ref(1), tasks[0].CodeOptions.MaxAttempts)
		// 12:03's fires are recorded from 12:02:55, after the restart.
		waitAttempts(t, f, "flaky", hms(3, 0), hms(3, 40), hms(4, 30),
			"12:03:00 failed 3/3", "12:03:20 failed 3/3", "12:03:40 failed 3/3")

		require.NoError(t, editor.ResetTaskOptions(ctx, "flaky")) // before 12:04:30
		waitAttempts(t, f, "flaky", hms(6, 0), hms(6, 40), hms(7, 30),
			"12:06:00 failed 1/1", "12:06:20 failed 1/1", "12:06:40 failed 1/1")
		tasks, err = editor.Tasks(ctx, TaskFilter{CodePrefix: "flaky"})
		require.NoError(t, err)
		require.Equal(t, 1, tasks[0].MaxAttempts)
		require.Equal(t, TaskOverrides{}, tasks[0].Overrides)
		require.Equal(t, TaskOverrides{}, tasks[0].CodeOptions)
	})
}

// Overlap set to OverlapSkip from a replica that does not run the task:
// the fire due while a run goes is skipped, whichever replica holds it.
func TestSetTaskOptionsOverlapSkipAppliesFleetWide(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		f, release := startHeldJob(t, db, false)
		editor := f.start(map[string]string{"idle": "0 0 9 * * *"})
		f.runUntil(hms(0, 5))
		require.NoError(t, editor.SetTaskOptions(context.Background(), "job", TaskOverrides{Overlap: ref(OverlapSkip)}))
		want := []string{"12:00:10 running schedule", "12:00:20 skipped schedule overlap"}
		runUntilRows(t, f, "job", hms(0, 20), hms(0, 29), want, hms(0, 10), time.Time{})
		close(release)
		waitAttempts(t, f, "job", hms(0, 40), hms(0, 40), hms(0, 50), "12:00:40 succeeded 1/1")
	})
}

// Every field is checked with its option's rules; the error names the
// field, and nothing is stored.
func TestSetTaskOptionsRefusesWhatTheOptionsRefuse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := fakeclock.New(hms(0, 0))
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, allowLoopback)
	nop := func(context.Context, *Run) error { return nil }
	require.NoError(t, s.Register("every10s", "*/10 * * * * *", nop, WithBackoff(time.Second, 5*time.Second)))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "hook", Spec: "0 * * * *", Target: HTTPTarget{Method: "GET", URL: "http://127.0.0.1:9/"}}))

	for _, tc := range []struct {
		o    TaskOverrides
		want string
	}{
		{TaskOverrides{Timeout: ref(time.Duration(0))}, `TaskOverrides.Timeout = 0s: timeout must be positive`},
		{TaskOverrides{Timeout: ref(time.Microsecond)}, `TaskOverrides.Timeout = 1µs: must be at least 1ms`},
		{TaskOverrides{MaxAttempts: ref(0)}, `TaskOverrides.MaxAttempts = 0: attempts must be 1-100 (1 means no retry)`},
		{TaskOverrides{MaxAttempts: ref(101)}, `TaskOverrides.MaxAttempts = 101: attempts must be 1-100 (1 means no retry)`},
		{TaskOverrides{BackoffBase: ref(-time.Second)}, `TaskOverrides.BackoffBase = -1s: base must be positive`},
		{TaskOverrides{BackoffMax: ref(time.Duration(0))}, `TaskOverrides.BackoffMax = 0s: max must be positive`},
		{TaskOverrides{BackoffMax: ref(500 * time.Millisecond)}, `TaskOverrides.BackoffMax = 500ms: max must be at least base 1s`},
		{TaskOverrides{BackoffBase: ref(10 * time.Second)}, `TaskOverrides.BackoffBase = 10s: base must be at most the code's max 5s`},
		{TaskOverrides{Misfire: ref(MisfirePolicy("often"))}, `TaskOverrides.Misfire = "often": want MisfireRunOnce, MisfireRunAll or MisfireSkip`},
		{TaskOverrides{MisfireWindow: ref(-time.Minute)}, `TaskOverrides.MisfireWindow = -1m0s: window must be positive`},
		{TaskOverrides{Overlap: ref(OverlapPolicy("never"))}, `TaskOverrides.Overlap = "never": want OverlapAllowAll, OverlapSkip, OverlapBufferOne, OverlapBufferAll or OverlapCancelOther`},
		{TaskOverrides{Jitter: ref(2 * time.Minute)}, `TaskOverrides.Jitter = 2m0s: jitter must be at most 1m0s`},
		{TaskOverrides{Jitter: ref(10 * time.Second)}, `TaskOverrides.Jitter = 10s: jitter must be below the schedule's shortest interval, 10s`},
		{TaskOverrides{PauseOnFailure: ref(-1)}, `TaskOverrides.PauseOnFailure = -1: consecutive failures must be 1-1000`},
		{TaskOverrides{Params: json.RawMessage(`{"a":`)}, `TaskOverrides.Params = "{\"a\":": not valid JSON`},
		{TaskOverrides{Params: make(json.RawMessage, maxParams+1)}, `TaskOverrides.Params = 65537 bytes: at most 65536 bytes of JSON`},
	} {
		err := s.SetTaskOptions(ctx, "every10s", tc.o)
		var oe *TaskOverridesError
		require.ErrorAs(t, err, &oe, tc.want)
		require.Contains(t, err.Error(), `xtimer: set options of task "every10s": `+tc.want)
	}
	tasks, err := s.Tasks(ctx, TaskFilter{CodePrefix: "every10s"})
	require.NoError(t, err)
	require.Equal(t, TaskOverrides{}, tasks[0].Overrides, "nothing stored")

	require.ErrorIs(t, s.SetTaskOptions(ctx, "missing", TaskOverrides{MaxAttempts: ref(2)}), ErrTaskNotFound)
	require.ErrorIs(t, s.SetTaskOptions(ctx, "hook", TaskOverrides{MaxAttempts: ref(2)}), ErrHTTPTaskOptions)
	require.ErrorIs(t, s.ResetTaskOptions(ctx, "missing"), ErrTaskNotFound)

	// Zeros that turn an option off, and values the options take.
	o := TaskOverrides{Jitter: ref(time.Duration(0)), PauseOnFailure: ref(0), Timeout: ref(3 * time.Second),
		BackoffMax: ref(time.Minute), Misfire: ref(MisfireSkip), Params: json.RawMessage(` {"region": "eu"} `)}
	require.NoError(t, s.SetTaskOptions(ctx, "every10s", o))
	tasks, err = s.Tasks(ctx, TaskFilter{CodePrefix: "every10s"})
	require.NoError(t, err)
	got := tasks[0]
	require.Equal(t, 3*time.Second, got.Timeout)
	require.Equal(t, time.Minute, got.BackoffMax)
	require.Equal(t, time.Second, got.BackoffBase)
	require.Equal(t, MisfireSkip, got.Misfire)
	require.Equal(t, json.RawMessage(`{"region":"eu"}`), got.Params)
	require.Equal(t, ref(3*time.Second), got.Overrides.Timeout)
	require.Equal(t, ref(DefaultTimeout), got.CodeOptions.Timeout)
	require.Nil(t, got.Overrides.MaxAttempts)
	require.Nil(t, got.CodeOptions.MaxAttempts)
	require.Equal(t, ref(5*time.Second), got.CodeOptions.BackoffMax)
	require.Nil(t, got.CodeOptions.Params, "the code has none")
	require.NoError(t, s.SetTaskOptions(ctx, "every10s", TaskOverrides{}), "nothing set is a reset")
	tasks, err = s.Tasks(ctx, TaskFilter{CodePrefix: "every10s"})
	require.NoError(t, err)
	require.Equal(t, TaskOverrides{}, tasks[0].Overrides)
	require.Equal(t, DefaultTimeout, tasks[0].Timeout)
}
