package xtimer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// startWith starts one more replica of the fleet with the task code, spec
// and handler h, instead of the fleet's own handler.
func (f *editFleet) startWith(code, spec string, h Handler, opts ...TaskOption) *Scheduler {
	f.t.Helper()
	s := newScheduler(f.t, setupOpts{db: f.pool(), app: f.app, clock: f.clock}, func(o *Options) {
		o.Locker = f.locker
		o.InstanceID = fmt.Sprintf("replica-%d", len(f.replicas))
	})
	require.NoError(f.t, s.Register(code, spec, h, opts...))
	require.NoError(f.t, s.Start(context.Background()))
	stopOnCleanup(f.t, s)
	f.replicas = append(f.replicas, s)
	return s
}

// pool is the database handle of the next replica: a pool of its own, but
// on SQLite, whose in-memory database is one connection's.
func (f *editFleet) pool() *gorm.DB {
	if len(f.replicas) > 0 && f.db.Dialector.Name() != "sqlite" {
		return testsvc.Reopen(f.t, f.db)
	}
	return f.db
}

// A fire that fails both of its attempts (WithRetry(2)) keeps both in its
// history; a Retry from another replica than the one that ran it gives it
// attempt 3, run by a replica with the handler, which succeeds: the
// execution ends succeeded at attempt 3 of 3, with the three attempts
// listed.
func TestRetryRunsOneMoreAttemptOfAFailedExecution(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newEditFleet(t, db)
		var mu sync.Mutex
		ran := map[int]string{} // attempt → replica
		handler := func(_ context.Context, run *Run) error {
			mu.Lock()
			ran[run.Attempt] = run.Replica
			mu.Unlock()
			run.Printf("attempt %d of %d", run.Attempt, run.MaxAttempts)
			if run.Attempt < 3 {
				return fmt.Errorf("boom %d", run.Attempt)
			}
			return nil
		}
		const code = "report.flaky"
		opts := []TaskOption{WithRetry(2), WithBackoff(2*time.Second, 2*time.Second)}
		a := f.startWith(code, "0 1 12 * * *", handler, opts...)
		b := f.startWith(code, "0 1 12 * * *", handler, opts...)
		f.runUntil(hms(1, 10))
		f.waitRows(code, hms(2, 0), "12:01:00 failed schedule")
		var row store.Execution
		require.NoError(t, db.Where("app = ? AND task_code = ?", f.app, code).Take(&row).Error)

		got, err := b.Attempts(ctx, row.ID)
		require.NoError(t, err)
		require.Len(t, got, 2)
		for i, at := range got {
			n := i + 1
			require.Equal(t, n, at.Number)
			require.Equal(t, StatusFailed, at.Status)
			require.Equal(t, fmt.Sprintf("attempt %d of 2\n", n), at.Output)
			require.Equal(t, fmt.Sprintf("boom %d", n), at.Error)
			require.Equal(t, ran[n], at.Replica)
			require.False(t, at.StartedAt.IsZero())
			require.False(t, at.FinishedAt.Before(at.StartedAt))
		}

		// Retry from the replica that did not run the last attempt.
		other := a
		if ran[2] == a.opts.InstanceID {
			other = b
		}
		e, err := other.Retry(ctx, row.ID)
		require.NoError(t, err)
		require.Equal(t, StatusRetrying, e.Status)
		require.Equal(t, 2, e.Attempt)
		require.Equal(t, 3, e.MaxAttempts)
		_, err = other.Retry(ctx, row.ID)
		require.ErrorIs(t, err, ErrNotRetryable, "retried once")

		f.runUntil(hms(1, 12))
		done := waitRow(t, a, row.ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
		require.Equal(t, 3, done.Attempt)
		require.Equal(t, 3, done.MaxAttempts)
		require.Equal(t, store.ReasonRetried, done.Reason)
		final, err := a.Execution(ctx, row.ID)
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, final.Status)
		require.Equal(t, "attempt 3 of 3\n", final.Output)

		got, err = a.Attempts(ctx, row.ID)
		require.NoError(t, err)
		require.Len(t, got, 3)
		require.Equal(t, 3, got[2].Number)
		require.Equal(t, StatusSucceeded, got[2].Status)
		require.Equal(t, "attempt 3 of 3\n", got[2].Output)
		require.Empty(t, got[2].Error)
		require.Equal(t, ran[3], got[2].Replica)

		_, err = a.Retry(ctx, row.ID)
		require.ErrorIs(t, err, ErrNotRetryable, "a succeeded execution")
		_, err = a.Retry(ctx, row.ID+1000)
		require.ErrorIs(t, err, ErrExecutionNotFound)
		_, err = a.Attempts(ctx, row.ID+1000)
		require.ErrorIs(t, err, ErrExecutionNotFound)
	})
}

// A retried execution that fails again alerts again, as a new failure:
// past the alert window, a fresh alert of attempt 2 of the same execution.
func TestRetryThatFailsAgainAlertsAgain(t *testing.T) {
	t.Parallel()
	f, log := alertFleet(t, func(o *Options) { o.AlertMissedRuns = -1 })
	f.fail = map[string]bool{"bad": true}
	s := f.start(map[string]string{"bad": "0 1 12 * * *"})
	f.runUntil(hms(1, 5))
	f.waitRows("bad", hms(2, 0), "12:01:00 failed schedule")
	first := waitAlerts(log, EventFailed, "bad", func(got []receivedAlert) bool { return len(got) == 1 })
	require.Len(t, first, 1)
	require.Equal(t, 1, first[0].Attempt)

	f.runUntil(hms(3, 0)) // past the window
	e, err := s.Retry(context.Background(), first[0].ExecutionID)
	require.NoError(t, err)
	f.runUntil(hms(3, 5))
	f.waitRows("bad", hms(2, 0), "12:01:00 failed schedule retried")
	alerts := waitAlerts(log, EventFailed, "bad", func(got []receivedAlert) bool { return len(got) == 2 })
	require.Len(t, alerts, 2, "alerts: %s", describeAlerts(alerts))
	require.Equal(t, e.ID, alerts[1].ExecutionID)
	require.Equal(t, 2, alerts[1].Attempt)
	require.Zero(t, alerts[1].Suppressed)
	require.False(t, alerts[1].Digest)
}
