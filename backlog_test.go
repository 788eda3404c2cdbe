package xtimer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/testsvc"
	"github.com/xtimer-go/xtimer/store"
)

// The promise: a fire is claimed for a start only when a worker is about
// to start it (free, or one pool's worth behind the busy ones). Fires
// waiting beyond that keep unclaimed rows, which another replica takes
// over if this one dies; a claimed fire waiting in the pool would die with
// the replica.
func TestFiresWaitingForAWorkerStayUnclaimed(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
	iv := newInvocations()
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	var calls atomic.Int32
	s := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, func(o *Options) { o.Workers = 1 })
	block := iv.handler(func(*Run) error {
		if calls.Add(1) == 1 {
			<-release
		}
		return nil
	})
	for _, code := range []string{"a", "b", "c", "d"} {
		require.NoError(t, s.Register(code, "0 * * * * *", block))
	}
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	t.Cleanup(free) // before the Stop above: a failed assertion must not leave the handler blocked

	rows := func() []store.Execution {
		var out []store.Execution
		require.NoError(t, db.Where("app = ?", app).Order("id").Find(&out).Error)
		return out
	}
	require.NoError(t, clock.BlockUntil(ctx, 3))
	clock.Advance(54*time.Second + 500*time.Millisecond) // 10:00:55: the 10:01 fires are recorded
	require.Eventually(t, func() bool { return len(rows()) == 4 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, clock.BlockUntil(ctx, 3))
	clock.Advance(5 * time.Second) // 10:01:00: all four are due, one worker

	first := iv.next(t, 10*time.Second)
	claimed := func() (n int) {
		for _, r := range rows() {
			if r.StartedMs > 0 {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return claimed() == 2 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // room for a wrong claim to land
	require.Equal(t, 2, claimed(), "the running fire and one behind it are claimed, the other two wait unclaimed")
	for _, r := range rows() {
		if r.TaskCode == first.Code {
			require.NotZero(t, r.StartedMs, "the running fire is claimed")
		}
		if r.StartedMs == 0 {
			require.Equal(t, store.StatusScheduled, r.Status)
		}
	}

	free()
	ran := map[string]int{first.Code: 1}
	for range 3 {
		ran[iv.next(t, 10*time.Second).Code]++
	}
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, ran)
	require.Eventually(t, func() bool {
		for _, r := range rows() {
			if r.Status != store.StatusSucceeded {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
}

// A replica whose app ran handlers before it started (their run times are
// in the database) claims a burst of quick fires ahead in one round, the
// first time too: with one worker and the app's handlers taking under a
// millisecond, all four fires of the instant are claimed while the first
// one runs, where a replica with no history claims two (above).
func TestRecentRunTimesLetAFreshReplicaClaimABurstInOneRound(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
	st := store.New(db)
	require.NoError(t, st.Migrate(ctx))
	var history []store.Execution
	for i := range 20 {
		at := time.Date(2026, 11, 29, 10, i, 0, 0, time.UTC).UnixMilli()
		history = append(history, store.Execution{App: app, TaskCode: "yesterday", RunTime: at, Status: store.StatusSucceeded,
			Attempt: 1, StartedMs: at, FinishedMs: at})
	}
	require.NoError(t, db.Create(&history).Error)

	iv := newInvocations()
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	var calls atomic.Int32
	s := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, func(o *Options) { o.Workers = 1 })
	block := iv.handler(func(*Run) error {
		if calls.Add(1) == 1 {
			<-release
		}
		return nil
	})
	codes := []string{"a", "b", "c", "d"}
	for _, code := range codes {
		require.NoError(t, s.Register(code, "0 * * * * *", block))
	}
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	t.Cleanup(free)

	claimed := func() (n int) {
		var rows []store.Execution
		require.NoError(t, db.Where("app = ? AND task_code IN ?", app, codes).Find(&rows).Error)
		for _, r := range rows {
			if r.StartedMs > 0 {
				n++
			}
		}
		return n
	}
	require.NoError(t, clock.BlockUntil(ctx, 3))
	clock.Advance(54*time.Second + 500*time.Millisecond) // 10:00:55: the 10:01 fires are recorded
	require.Eventually(t, func() bool {
		var n int64
		require.NoError(t, db.Model(&store.Execution{}).Where("app = ? AND task_code IN ?", app, codes).Count(&n).Error)
		return n == 4
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, clock.BlockUntil(ctx, 3))
	clock.Advance(5 * time.Second) // 10:01:00: all four are due, one worker

	iv.next(t, 10*time.Second) // the first runs, and holds the only worker
	require.Eventually(t, func() bool { return claimed() == 4 }, 10*time.Second, 10*time.Millisecond,
		"the whole instant claimed in one round")
	free()
	for range 3 {
		iv.next(t, 10*time.Second)
	}
}
