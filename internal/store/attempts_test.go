package store_test

import (
	"math"
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

func TestEveryAttemptIsKeptWithItsFinishAndDeletedWithItsExecution(t *testing.T) {
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
			{ExecutionID: e.ID, Attempt: 1, Replica: "r1", StartedMs: t0 + 5, FinishedMs: t0 + 105, DurationMs: 100,
				Status: store.StatusTimedOut, Output: "half", Error: "deadline"},
			{ExecutionID: e.ID, Attempt: 2, Replica: "r2", StartedMs: t0 + 1010, FinishedMs: t0 + 1060, DurationMs: 50,
				Status: store.StatusFailed, Output: "again", Error: "boom", HTTPStatus: 502},
		}
		require.Equal(t, want, attemptRows(t, b, e.ID))
		row, rows, err := b.store.Attempts(b.ctx, e.ID)
		require.NoError(t, err)
		require.Equal(t, e.ID, row.ID)
		require.Len(t, rows, 2)

		// A first attempt whose start and result are one write is kept too.
		quick := insertOne(t, b, "a", t0+60_000)
		started, err := b.store.StartFires(b.ctx, b.app, []int64{quick.ID}, "", t0+60_000)
		require.NoError(t, err)
		require.Equal(t, []int64{quick.ID}, started)
		oks, err = b.store.MarkRunning(b.ctx, []store.Start{{ID: quick.ID, StartedMs: t0 + 60_000,
			Finish: &store.Result{Status: store.StatusSucceeded, Output: "ok", FinishedMs: t0 + 60_025}}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, oks)
		require.Equal(t, []store.Attempt{{ExecutionID: quick.ID, Attempt: 1, StartedMs: t0 + 60_000, FinishedMs: t0 + 60_025,
			DurationMs: 25, Status: store.StatusSucceeded, Output: "ok"}}, attemptRows(t, b, quick.ID))

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
