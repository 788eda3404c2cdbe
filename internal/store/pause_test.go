package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The streak counts the final fires of the schedule (sources schedule and
// catchup) newest first, after the task's last change; skipped fires,
// manual and backfill runs, and runs cancelled by the next fire are
// passed over, neither counting nor breaking it.
func TestFailureStreakCountsScheduledFinalFiresOnly(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		_, err := b.store.UpsertTask(b.ctx, reconcile(b.app)) // updated_ms t0
		require.NoError(t, err)
		row := func(sec int64, status, source, reason, errText string) store.Execution {
			return store.Execution{App: b.app, TaskCode: "billing.reconcile", RunTime: t0 + sec*1000,
				Status: status, Source: source, Reason: reason, Error: errText, Attempt: 1, MaxAttempts: 1}
		}
		rows := []store.Execution{
			row(-20, store.StatusFailed, store.SourceSchedule, "", "before the task's last change"),
			row(10, store.StatusFailed, store.SourceSchedule, "", "first"),
			row(20, store.StatusSucceeded, store.SourceManual, "", ""),
			row(30, store.StatusFailed, store.SourceCatchup, "", "caught up"),
			row(40, store.StatusSkipped, store.SourceSchedule, store.ReasonPaused, ""),
			row(50, store.StatusSucceeded, "backfill", "", ""),
			row(60, store.StatusFailed, store.SourceSchedule, store.ReasonCancelled, "cancelled by next fire"),
			row(70, store.StatusTimedOut, store.SourceSchedule, "", "deadline"),
			row(80, store.StatusRunning, store.SourceSchedule, "", ""),
			row(90, store.StatusScheduled, store.SourceSchedule, "", ""),
		}
		require.NoError(t, b.db.Create(&rows).Error)

		st, err := b.store.FailureStreak(b.ctx, b.app, "billing.reconcile", 5)
		require.NoError(t, err)
		require.True(t, st.Active)
		require.Equal(t, int64(1), st.Version)
		require.Equal(t, 3, st.Failures, "70 timed out, 30 and 10 failed; 20, 40, 50, 60 passed over; -20 before the change")
		require.Equal(t, rows[7].ID, st.Last.ID)
		require.Equal(t, "deadline", st.Last.Error)

		st, err = b.store.FailureStreak(b.ctx, b.app, "billing.reconcile", 2)
		require.NoError(t, err)
		require.Equal(t, 2, st.Failures, "at most n")

		// A success breaks it.
		require.NoError(t, b.db.Create(&[]store.Execution{row(75, store.StatusSucceeded, store.SourceSchedule, "", "")}).Error)
		st, err = b.store.FailureStreak(b.ctx, b.app, "billing.reconcile", 5)
		require.NoError(t, err)
		require.Zero(t, st.Failures)

		// A change to the task (a resume, here) starts it afresh.
		b.set(t0 + 100_000)
		require.NoError(t, b.store.SetTaskStatusNote(b.ctx, b.app, "billing.reconcile", store.TaskActive, "resumed"))
		require.NoError(t, b.db.Create(&[]store.Execution{row(110, store.StatusFailed, store.SourceSchedule, "", "after")}).Error)
		st, err = b.store.FailureStreak(b.ctx, b.app, "billing.reconcile", 5)
		require.NoError(t, err)
		require.Equal(t, 1, st.Failures)
		require.Equal(t, "after", st.Last.Error)

		_, err = b.store.FailureStreak(b.ctx, b.app, "none", 5)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

// Of two pauses on the version read, one wins; a paused task has no
// streak; the note is stored and the version and task generation move.
func TestPauseFailingPausesOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		_, err := b.store.UpsertTask(b.ctx, reconcile(b.app))
		require.NoError(t, err)
		gen, err := b.store.TaskGen(b.ctx, b.app)
		require.NoError(t, err)

		row, paused, err := b.store.PauseFailing(b.ctx, b.app, "billing.reconcile", 1, "paused after 3 consecutive failures; last: x")
		require.NoError(t, err)
		require.True(t, paused)
		require.Equal(t, store.TaskPaused, row.Status)
		require.Equal(t, "paused after 3 consecutive failures; last: x", row.PauseNote)
		require.Equal(t, int64(2), row.Version)
		after, err := b.store.TaskGen(b.ctx, b.app)
		require.NoError(t, err)
		require.Equal(t, gen+1, after)

		_, paused, err = b.store.PauseFailing(b.ctx, b.app, "billing.reconcile", 1, "again")
		require.NoError(t, err)
		require.False(t, paused, "the second pause on the same version loses")
		st, err := b.store.FailureStreak(b.ctx, b.app, "billing.reconcile", 3)
		require.NoError(t, err)
		require.Equal(t, store.Streak{}, st, "a paused task has no streak")

		require.NoError(t, b.store.SetTaskStatusNote(b.ctx, b.app, "billing.reconcile", store.TaskActive, ""))
		_, paused, err = b.store.PauseFailing(b.ctx, b.app, "billing.reconcile", 2, "stale")
		require.NoError(t, err)
		require.False(t, paused, "resumed since the read")
		got, err := b.store.Task(b.ctx, b.app, "billing.reconcile")
		require.NoError(t, err)
		require.Equal(t, store.TaskActive, got.Status)
		require.Empty(t, got.PauseNote, "the resume's empty note replaced the pause's")
	})
}
