package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

func httpTask(app, code, target string) *store.Task {
	return &store.Task{App: app, Code: code, Kind: store.KindHTTP, Spec: "* * * * *", HTTPTarget: &target}
}

func TestCreateReplaceDeleteHTTPTask(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		got, err := b.store.CreateTask(b.ctx, httpTask(b.app, "cb", `{"url":"a"}`))
		require.NoError(t, err)
		require.Equal(t, int64(1), got.Version)
		require.Equal(t, store.TaskActive, got.Status)
		require.Equal(t, "UTC", got.TimeZone)
		require.Equal(t, 1, got.MaxAttempts)

		// A code taken, by any kind, is refused and nothing changes.
		_, err = b.store.CreateTask(b.ctx, httpTask(b.app, "cb", `{"url":"b"}`))
		require.ErrorIs(t, err, store.ErrExists)
		_, err = b.store.UpsertTask(b.ctx, &store.Task{App: b.app, Code: "cb", Spec: "* * * * *"})
		require.ErrorIs(t, err, store.ErrExists, "code must not turn an http task into a func task")
		_, err = b.store.UpsertTask(b.ctx, &store.Task{App: b.app, Code: "go", Spec: "* * * * *"})
		require.NoError(t, err)
		_, err = b.store.CreateTask(b.ctx, httpTask(b.app, "go", `{}`))
		require.ErrorIs(t, err, store.ErrExists)

		// Replace keeps the status, drops overrides, bumps the version.
		require.NoError(t, b.store.SetTaskStatus(b.ctx, b.app, "cb", store.TaskPaused))
		require.NoError(t, b.store.SetOverride(b.ctx, b.app, "cb", store.Override{Spec: "0 * * * *"}))
		cur, err := b.store.Task(b.ctx, b.app, "cb")
		require.NoError(t, err)
		next := httpTask(b.app, "cb", `{"url":"c"}`)
		next.Spec = "*/5 * * * *"
		_, err = b.store.ReplaceTask(b.ctx, next, cur.Version-1)
		require.ErrorIs(t, err, store.ErrStale)
		got, err = b.store.ReplaceTask(b.ctx, next, cur.Version)
		require.NoError(t, err)
		require.Equal(t, cur.Version+1, got.Version)
		require.Equal(t, store.TaskPaused, got.Status)
		require.Nil(t, got.SpecOverride)
		require.Equal(t, "*/5 * * * *", got.Spec)
		require.Equal(t, `{"url":"c"}`, *got.HTTPTarget)
		_, err = b.store.ReplaceTask(b.ctx, httpTask(b.app, "go", `{}`), 1)
		require.ErrorIs(t, err, store.ErrStale, "not of kind http")
		_, err = b.store.ReplaceTask(b.ctx, httpTask(b.app, "none", `{}`), 1)
		require.ErrorIs(t, err, store.ErrNotFound)

		// Delete skips what has not started, leaves history and other kinds alone.
		rows, err := b.store.InsertFires(b.ctx, fires(b.app, "cb", t0, t0+1000, t0+2000))
		require.NoError(t, err)
		ok, err := b.store.StartAttempt(b.ctx, rows[0].ID, 1, "r1", t0)
		require.NoError(t, err)
		require.True(t, ok)
		require.ErrorIs(t, b.store.DeleteTask(b.ctx, b.app, "go", store.KindHTTP, "task deleted"), store.ErrNotFound)
		require.NoError(t, b.store.DeleteTask(b.ctx, b.app, "cb", store.KindHTTP, "task deleted"))
		_, err = b.store.Task(b.ctx, b.app, "cb")
		require.ErrorIs(t, err, store.ErrNotFound)
		running, err := b.store.Execution(b.ctx, rows[0].ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusRunning, running.Status)
		for _, r := range rows[1:] {
			e, err := b.store.Execution(b.ctx, r.ID)
			require.NoError(t, err)
			require.Equal(t, store.StatusSkipped, e.Status)
			require.Equal(t, "task deleted", e.Reason)
		}
		require.ErrorIs(t, b.store.DeleteTask(b.ctx, b.app, "cb", store.KindHTTP, "task deleted"), store.ErrNotFound)
	})
}

// An attempt that waited in the replica's queues records when it really
// started: its lateness includes the wait, its duration does not.
func TestFinishRecordsHTTPStatusAndALaterStart(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		e := insertOne(t, b, "a", t0)
		ok, err := b.store.StartAttempt(b.ctx, e.ID, 1, "r1", t0+5)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.FinishAttempt(b.ctx, e.ID, 1, store.Result{Status: store.StatusRetrying, HTTPStatus: 503,
			FinishedMs: t0 + 2500, NextAttemptMs: t0 + 10_000, StartedMs: t0 + 2000, LatenessMs: 2000})
		require.NoError(t, err)
		require.True(t, ok)
		got, err := b.store.Execution(b.ctx, e.ID)
		require.NoError(t, err)
		require.Equal(t, 503, got.HTTPStatus)
		require.Equal(t, t0+2000, got.StartedMs)
		require.Equal(t, int64(2000), got.LatenessMs)
		require.Equal(t, int64(500), got.DurationMs)

		// Without a later start, the recorded one stands.
		ok, err = b.store.StartAttempt(b.ctx, e.ID, 2, "r1", t0+10_020)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.FinishAttempt(b.ctx, e.ID, 2, store.Result{Status: store.StatusSucceeded, HTTPStatus: 200, FinishedMs: t0 + 10_120})
		require.NoError(t, err)
		require.True(t, ok)
		got, err = b.store.Execution(b.ctx, e.ID)
		require.NoError(t, err)
		require.Equal(t, 200, got.HTTPStatus)
		require.Equal(t, t0+10_020, got.StartedMs)
		require.Equal(t, int64(20), got.LatenessMs)
		require.Equal(t, int64(100), got.DurationMs)

		// A first attempt started and finished in one write (MarkRunning).
		inserted, err := b.store.InsertFires(b.ctx, []store.Execution{{App: b.app, TaskCode: "b", RunTime: t0, Replica: "r1"}})
		require.NoError(t, err)
		f := inserted[0]
		ids, err := b.store.StartFires(b.ctx, b.app, []int64{f.ID}, "r1", t0+3)
		require.NoError(t, err)
		require.Equal(t, []int64{f.ID}, ids)
		oks, err := b.store.MarkRunning(b.ctx, []store.Start{{ID: f.ID, Replica: "r1", StartedMs: t0 + 3,
			Finish: &store.Result{Status: store.StatusFailed, Error: "HTTP 500", HTTPStatus: 500, FinishedMs: t0 + 900, StartedMs: t0 + 800, LatenessMs: 800}}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, oks)
		got, err = b.store.Execution(b.ctx, f.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusFailed, got.Status)
		require.Equal(t, 500, got.HTTPStatus)
		require.Equal(t, t0+800, got.StartedMs)
		require.Equal(t, int64(800), got.LatenessMs)
		require.Equal(t, int64(100), got.DurationMs)
	})
}
