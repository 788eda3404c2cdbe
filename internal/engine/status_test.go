package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The promise: a fire's start and result that the database acknowledged
// and then lost (a failover to an asynchronous standby that had not
// received them) are written again once the database answers again, so
// its row does not say running forever while nothing runs it; what the
// database kept is not written twice, and no handler runs again.
func TestWritesTheDatabaseLostAreWrittenAgainWhenItAnswers(t *testing.T) {
	t.Parallel()
	onPostgresAndSQLite(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s, clock, iv := startEveryMinute(ctx, t, db, "lost", "kept")
		rows := func(t assert.TestingT) map[string]store.Execution { return rowsByTask(t, db, s.opts.App) }

		clock.Advance(59*time.Second + 498*time.Millisecond) // 10:00:59.998: the 10:01 fires are claimed
		var claimed map[string]store.Execution
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			claimed = rows(c)
			assert.Len(c, claimed, 2)
			for _, r := range claimed {
				assert.NotZero(c, r.StartedMs, "claimed")
			}
		}, 10*time.Second, 10*time.Millisecond)
		waitIdle(ctx, t, clock, s)
		clock.Advance(2 * time.Millisecond) // 10:01:00
		iv.next(t, 10*time.Second)
		iv.next(t, 10*time.Second)
		var ended map[string]store.Execution
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			ended = rows(c)
			for _, r := range ended {
				assert.Equal(c, store.StatusSucceeded, r.Status)
			}
		}, 10*time.Second, 10*time.Millisecond)

		// The failover: "lost"'s row, which holds its attempt, is back as
		// it was when it was claimed; "kept"'s is as written.
		lost := claimed["lost"]
		require.NoError(t, db.Save(&lost).Error)
		s.noteDB(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
		s.noteDB(nil)

		require.EventuallyWithT(t, func(c *assert.CollectT) {
			r := rows(c)["lost"]
			assert.Equal(c, store.StatusSucceeded, r.Status)
			assert.Equal(c, 1, r.Attempt)
			assert.Equal(c, ended["lost"].FinishedMs, r.FinishedMs)
			_, attempts, err := s.store.Attempts(ctx, lost.ID)
			if assert.NoError(c, err) && assert.Len(c, attempts, 1, "its attempt recorded again") {
				assert.Equal(c, store.StatusSucceeded, attempts[0].Status)
				assert.Equal(c, ended["lost"].FinishedMs, attempts[0].FinishedMs)
			}
		}, 10*time.Second, 10*time.Millisecond)
		require.Eventually(t, func() bool { return !s.updates.pending() }, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, ended["kept"], rows(t)["kept"], "a row the database kept is not written again")
		iv.mu.Lock()
		defer iv.mu.Unlock()
		for id, calls := range iv.calls {
			require.Len(t, calls, 1, "%s ran once", id)
		}
	})
}

// The promise: what the status writer keeps for a replay is bounded by
// replayWindow, replayMax writes and replayMaxText bytes of output, the
// oldest going first.
func TestWritesKeptForAReplayAreBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	q := &statusWriter{now: func() time.Time { return now }}
	big := strings.Repeat("x", 1<<20)
	finishes := make([]store.Finish, 40)
	for i := range finishes {
		finishes[i] = store.Finish{ID: int64(i + 1), Attempt: 1, Result: store.Result{Status: store.StatusSucceeded, Output: big}}
	}
	q.wrote(nil, nil, finishes, slices.Repeat([]bool{true}, len(finishes)))
	require.Len(t, q.written, replayMaxText>>20, "32 outputs of 1 MiB")
	require.Equal(t, int64(9), q.written[0].finish.ID, "the oldest dropped first")
	require.Equal(t, replayMaxText, q.writtenText)

	starts := make([]store.Start, replayMax+10)
	for i := range starts {
		starts[i] = store.Start{ID: int64(100 + i)}
	}
	now = now.Add(time.Second)
	q.wrote(starts, slices.Repeat([]bool{true}, len(starts)), nil, nil)
	require.Len(t, q.written, replayMax)
	require.Equal(t, int64(110), q.written[0].start.ID)
	require.Zero(t, q.writtenText)

	now = now.Add(replayWindow + time.Millisecond)
	q.wrote(starts[:1], []bool{true}, nil, []bool{})
	require.Len(t, q.written, 1, "older than replayWindow: dropped")
}

// The promise: the queues a round leaves behind have room for as many
// starts and results as the last rounds took, so that an instant's fires
// do not grow them while they start; the room shrinks by an eighth a
// round that took less, and stays within maxQueueRoom after a burst.
func TestStatusQueuesKeepRoomForTheNextInstant(t *testing.T) {
	t.Parallel()
	q := &statusWriter{}
	at := time.Unix(1_800_000_000, 0)
	queue := func(n int) {
		for i := range n {
			r := store.Execution{ID: int64(i + 1)}
			q.started(r, at)
			q.finished(store.Finish{ID: r.ID, Attempt: 1})
		}
	}
	room := func() (int, int) {
		q.mu.Lock()
		defer q.mu.Unlock()
		return cap(q.starts), cap(q.finishes)
	}

	queue(300)
	starts, finishes, _ := q.take()
	require.Len(t, starts, 300)
	require.Len(t, finishes, 300)
	s, f := room()
	require.Equal(t, 300, s, "room for the next instant's starts")
	require.Equal(t, 300, f, "and for its results")
	queue(300)
	s, f = room()
	require.Equal(t, 300, s, "the next instant's starts fit, not grown")
	require.Equal(t, 300, f)

	q.take()
	q.take() // a round that took nothing
	s, f = room()
	require.Equal(t, 300-300/8, s)
	require.Equal(t, 300-300/8, f)

	queue(10_000) // a burst
	q.take()
	s, f = room()
	require.Equal(t, maxQueueRoom, s)
	require.Equal(t, maxQueueRoom, f)
}
