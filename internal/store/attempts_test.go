package store_test

import (
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// attemptRows returns the rows of xtimer_attempts of execution id, in
// order, without the app.
func attemptRows(t *testing.T, b *bundle, id int64) []store.Attempt {
	t.Helper()
	var got []store.Attempt
	require.NoError(t, b.db.Where("execution_id = ?", id).Order("attempt").Find(&got).Error)
	for i := range got {
		require.Equal(t, b.app, got[i].App)
		got[i].App = ""
	}
	return got
}

// addTask writes the row of task code, active or paused.
func addTask(t *testing.T, b *bundle, code, status string) {
	t.Helper()
	require.NoError(t, b.db.Create(&store.Task{App: b.app, Code: code, Spec: "* * * * *", Status: status}).Error)
}

func TestEveryAttemptIsKeptAndDeletedWithItsExecution(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		// Attempt 1 times out and is retried, attempt 2 fails.
		e := insertOne(t, b, "a", t0)
		ok, err := b.store.StartAttempt(b.ctx, e.ID, 1, "r1", t0+5)
		require.NoError(t, err)
		require.True(t, ok)
		_, rows, err := b.store.Attempts(b.ctx, e.ID)
		require.NoError(t, err)
		require.Equal(t, []store.Attempt{{App: b.app, ExecutionID: e.ID, Attempt: 1, Replica: "r1", StartedMs: t0 + 5, Status: store.StatusRunning}}, rows,
			"the attempt running now, from the execution's row")
		ok, err = b.store.FinishAttempt(b.ctx, e.ID, 1, store.Result{Status: store.StatusRetrying, TimedOut: true,
			Output: "half", Error: "deadline", FinishedMs: t0 + 105, NextAttemptMs: t0 + 1000})
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.StartAttempt(b.ctx, e.ID, 2, "r2", t0+1010)
		require.NoError(t, err)
		require.True(t, ok)
		oks, err := b.store.FinishAttempts(b.ctx, []store.Finish{{ID: e.ID, Attempt: 2, Result: store.Result{Status: store.StatusFailed,
			Output: "again", Error: "boom", HTTPStatus: 502, FinishedMs: t0 + 1060}}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, oks)
		// A late result of attempt 1 is neither recorded nor kept.
		ok, err = b.store.FinishAttempt(b.ctx, e.ID, 1, store.Result{Status: store.StatusSucceeded, FinishedMs: t0 + 2000})
		require.NoError(t, err)
		require.False(t, ok)
		want := []store.Attempt{
			{App: b.app, ExecutionID: e.ID, Attempt: 1, Replica: "r1", StartedMs: t0 + 5, FinishedMs: t0 + 105, DurationMs: 100,
				Status: store.StatusTimedOut, Output: "half", Error: "deadline"},
			{App: b.app, ExecutionID: e.ID, Attempt: 2, Replica: "r2", StartedMs: t0 + 1010, FinishedMs: t0 + 1060, DurationMs: 50,
				Status: store.StatusFailed, Output: "again", Error: "boom", HTTPStatus: 502},
		}
		row, rows, err := b.store.Attempts(b.ctx, e.ID)
		require.NoError(t, err)
		require.Equal(t, e.ID, row.ID)
		require.Equal(t, want, rows)
		retried := want[0]
		retried.App = ""
		require.Equal(t, []store.Attempt{retried}, attemptRows(t, b, e.ID), "the final attempt stays on its row")

		// A first attempt whose start and result are one write is kept on
		// its row.
		quick := insertOne(t, b, "a", t0+60_000)
		started, err := b.store.StartFires(b.ctx, b.app, []int64{quick.ID}, "", t0+60_000)
		require.NoError(t, err)
		require.Equal(t, []int64{quick.ID}, started)
		oks, err = b.store.MarkRunning(b.ctx, []store.Start{{ID: quick.ID, StartedMs: t0 + 60_000,
			Finish: &store.Result{Status: store.StatusSucceeded, Output: "ok", FinishedMs: t0 + 60_025}}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, oks)
		_, rows, err = b.store.Attempts(b.ctx, quick.ID)
		require.NoError(t, err)
		require.Equal(t, []store.Attempt{{App: b.app, ExecutionID: quick.ID, Attempt: 1, StartedMs: t0 + 60_000, FinishedMs: t0 + 60_025,
			DurationMs: 25, Status: store.StatusSucceeded, Output: "ok"}}, rows)
		require.Empty(t, attemptRows(t, b, quick.ID))

		// A final attempt that an earlier version copied into the table
		// is listed once.
		copied := rows[0]
		require.NoError(t, b.db.Create(&copied).Error)
		_, again, err := b.store.Attempts(b.ctx, quick.ID)
		require.NoError(t, err)
		require.Equal(t, rows, again)

		_, _, err = b.store.Attempts(b.ctx, quick.ID+1000)
		require.ErrorIs(t, err, store.ErrNotFound)

		// Retention deletes the attempts with their executions: by age,
		n, _, err := b.store.DeleteExecutionsBefore(b.ctx, b.app, math.MinInt64, t0+1, 10)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.Empty(t, attemptRows(t, b, e.ID))
		require.Len(t, attemptRows(t, b, quick.ID), 1)
		// and by count.
		insertOne(t, b, "a", t0+120_000)
		n, err = b.store.DeleteBeyondCount(b.ctx, b.app, "a", 1, 10)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.Empty(t, attemptRows(t, b, quick.ID))
	})
}

func TestRetryExecutionGivesAFailedRowOneMoreAttemptOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		addTask(t, b, "a", store.TaskActive)
		addTask(t, b, "p", store.TaskPaused)
		rows := []store.Execution{
			{App: b.app, TaskCode: "a", RunTime: t0, Status: store.StatusFailed, Attempt: 2, MaxAttempts: 2, Error: "boom"},
			{App: b.app, TaskCode: "a", RunTime: t0 + 1000, Status: store.StatusTimedOut, Attempt: 1, MaxAttempts: 1},
			{App: b.app, TaskCode: "a", RunTime: t0 + 2000, Status: store.StatusSucceeded, Attempt: 1, MaxAttempts: 1},
			{App: b.app, TaskCode: "a", RunTime: t0 + 3000, Status: store.StatusRunning, Attempt: 1, MaxAttempts: 1},
			{App: b.app, TaskCode: "a", RunTime: t0 + 4000, Status: store.StatusSkipped, Reason: store.ReasonPaused},
			{App: b.app, TaskCode: "p", RunTime: t0, Status: store.StatusFailed, Attempt: 1, MaxAttempts: 1},
			{App: b.app, TaskCode: "gone", RunTime: t0, Status: store.StatusFailed, Attempt: 1, MaxAttempts: 1},
		}
		require.NoError(t, b.db.Create(&rows).Error)
		failed, timedOut := rows[0], rows[1]

		// Two at once: exactly one wins.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = b.store.RetryExecution(b.ctx, failed.ID, t0+10_000)
			}()
		}
		wg.Wait()
		if errs[0] == nil {
			require.ErrorIs(t, errs[1], store.ErrNotRetryable)
		} else {
			require.ErrorIs(t, errs[0], store.ErrNotRetryable)
			require.NoError(t, errs[1])
		}
		got, err := b.store.Execution(b.ctx, failed.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusRetrying, got.Status)
		require.Equal(t, store.ReasonRetried, got.Reason)
		require.Equal(t, 2, got.Attempt)
		require.Equal(t, 3, got.MaxAttempts)
		require.Equal(t, t0+10_000, got.NextAttemptMs)

		// Any replica finds it due, and starts attempt 3 once.
		due, err := b.store.DueRetries(b.ctx, b.app, t0+10_000, 10)
		require.NoError(t, err)
		require.Len(t, due, 1)
		require.Equal(t, failed.ID, due[0].ID)
		ok, err := b.store.StartAttempt(b.ctx, failed.ID, 3, "r2", t0+10_500)
		require.NoError(t, err)
		require.True(t, ok)
		// The attempt that made it final was kept as the next one took
		// its place on the row.
		_, attempts, err := b.store.Attempts(b.ctx, failed.ID)
		require.NoError(t, err)
		require.Equal(t, []store.Attempt{
			{App: b.app, ExecutionID: failed.ID, Attempt: 2, Status: store.StatusFailed, Error: "boom"},
			{App: b.app, ExecutionID: failed.ID, Attempt: 3, Replica: "r2", StartedMs: t0 + 10_500, Status: store.StatusRunning},
		}, attempts)

		retried, err := b.store.RetryExecution(b.ctx, timedOut.ID, t0+10_000)
		require.NoError(t, err)
		require.Equal(t, store.StatusRetrying, retried.Status)
		require.Equal(t, 2, retried.MaxAttempts)
		require.Equal(t, []store.Attempt{{ExecutionID: timedOut.ID, Attempt: 1, Status: store.StatusTimedOut}},
			attemptRows(t, b, timedOut.ID), "kept timed_out while its row is retrying")

		for _, r := range rows[2:] {
			_, err = b.store.RetryExecution(b.ctx, r.ID, t0+10_000)
			require.ErrorIs(t, err, store.ErrNotRetryable, "%s of task %s", r.Status, r.TaskCode)
			again, readErr := b.store.Execution(b.ctx, r.ID)
			require.NoError(t, readErr)
			require.Equal(t, r.Status, again.Status, "unchanged")
		}
		_, err = b.store.RetryExecution(b.ctx, failed.ID, t0+10_000) // running now
		require.ErrorIs(t, err, store.ErrNotRetryable)
		require.ErrorContains(t, err, "is running")
		_, err = b.store.RetryExecution(b.ctx, rows[5].ID, t0+10_000)
		require.ErrorContains(t, err, `task "p" is paused`)
		_, err = b.store.RetryExecution(b.ctx, rows[6].ID+1000, t0+10_000)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

// A retried row leaves its rolled-up day's counts with its old status and
// comes back with its new one; retention keeps it while it is not final.
func TestRetryCorrectsTheRollupOfItsDay(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		addTask(t, b, "a", store.TaskActive)
		addTask(t, b, "b", store.TaskActive)
		rows := dayRows(b, -1, "a", store.StatusFailed, 2)
		rows = append(rows, dayRows(b, -1, "a", store.StatusSucceeded, 1)...)
		rows = append(rows, dayRows(b, 0, "a", store.StatusTimedOut, 1)...) // a day not rolled up
		rows = append(rows, dayRows(b, -1, "b", store.StatusFailed, 1)...)
		for i := range rows {
			rows[i].Attempt, rows[i].MaxAttempts = 1, 1
		}
		require.NoError(t, b.db.Create(&rows).Error)
		_, err := b.store.RollupDay(b.ctx, b.app, day0-1)
		require.NoError(t, err)

		now := store.DayStartMs(day0 + 1)
		_, err = b.store.RetryExecution(b.ctx, rows[0].ID, now)
		require.NoError(t, err)
		require.Equal(t, []store.Rollup{
			{TaskCode: "", Day: -1, Status: "", Count: 4},
			{TaskCode: "a", Day: -1, Status: store.StatusFailed, Count: 1},
			{TaskCode: "a", Day: -1, Status: store.StatusSucceeded, Count: 1},
			{TaskCode: "b", Day: -1, Status: store.StatusFailed, Count: 1},
		}, rollups(t, b), "the retried row left its failed count")

		// A retried row that a later fire's cancel_other ends before it
		// starts is counted again, failed.
		_, err = b.store.RetryExecution(b.ctx, rows[4].ID, now)
		require.NoError(t, err)
		n, err := b.store.RequestCancel(b.ctx, b.app, "b", -1, math.MaxInt64, now+5)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		got, err := b.store.Execution(b.ctx, rows[4].ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusFailed, got.Status)
		counts, err := b.store.DailyCounts(b.ctx, b.app, "b", day0-1, day0-1)
		require.NoError(t, err)
		require.Equal(t, []store.Rollup{{App: b.app, TaskCode: "b", Day: day0 - 1, Status: store.StatusFailed, Count: 1}}, counts)
		// Retention does not delete it while it is not final.
		n, _, err = b.store.DeleteExecutionsBefore(b.ctx, b.app, math.MinInt64, store.DayStartMs(day0), 10)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		_, err = b.store.Execution(b.ctx, rows[0].ID)
		require.NoError(t, err)

		ok, err := b.store.StartAttempt(b.ctx, rows[0].ID, 2, "r1", now+10)
		require.NoError(t, err)
		require.True(t, ok)
		oks, err := b.store.FinishAttempts(b.ctx, []store.Finish{{ID: rows[0].ID, Attempt: 2, Retried: true,
			Result: store.Result{Status: store.StatusSucceeded, Reason: store.ReasonRetried, FinishedMs: now + 20}}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, oks)
		require.Equal(t, []store.Rollup{
			{TaskCode: "", Day: -1, Status: "", Count: 4},
			{TaskCode: "a", Day: -1, Status: store.StatusFailed, Count: 1},
			{TaskCode: "a", Day: -1, Status: store.StatusSucceeded, Count: 2},
			{TaskCode: "b", Day: -1, Status: store.StatusFailed, Count: 1},
		}, rollups(t, b), "its new status counted")
		counts, err = b.store.DailyCounts(b.ctx, b.app, "a", day0-1, day0-1)
		require.NoError(t, err)
		require.Equal(t, []store.Rollup{
			{App: b.app, TaskCode: "a", Day: day0 - 1, Status: store.StatusFailed, Count: 1},
			{App: b.app, TaskCode: "a", Day: day0 - 1, Status: store.StatusSucceeded, Count: 2},
		}, counts)

		// A day not rolled up is refused while the row is retried, and
		// counts it once it is final again.
		_, err = b.store.RetryExecution(b.ctx, rows[3].ID, now)
		require.NoError(t, err)
		_, err = b.store.RollupDay(b.ctx, b.app, day0)
		require.ErrorIs(t, err, store.ErrDayNotFinal)
		ok, err = b.store.StartAttempt(b.ctx, rows[3].ID, 2, "r1", now+10)
		require.NoError(t, err)
		require.True(t, ok)
		oks, err = b.store.FinishAttempts(b.ctx, []store.Finish{{ID: rows[3].ID, Attempt: 2, Retried: true,
			Result: store.Result{Status: store.StatusFailed, Reason: store.ReasonRetried, Error: "again", FinishedMs: now + 20}}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, oks)
		counted, err := b.store.RollupDay(b.ctx, b.app, day0)
		require.NoError(t, err)
		require.Equal(t, int64(1), counted)
		counts, err = b.store.DailyCounts(b.ctx, b.app, "a", day0, day0)
		require.NoError(t, err)
		require.Equal(t, []store.Rollup{{App: b.app, TaskCode: "a", Day: day0, Status: store.StatusFailed, Count: 1}}, counts)
	})
}
