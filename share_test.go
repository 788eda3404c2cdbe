package xtimer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/testsvc"
	"github.com/xtimer-go/xtimer/store"
)

// The promise: the next minute's slots are shared out among the live
// replicas, so that a minute's fires are recorded, claimed and run by all
// of them, not by whichever reaches Redis first; a replica that does not
// claim its share (dead, not yet known dead) leaves it to the others
// shareWait later, still ahead of the minute.
//
// The replicas are not started: the test calls plan at chosen instants of
// the injected clock, with the live list the heartbeat would have read.
func TestNextMinuteIsSharedOutAmongLiveReplicas(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := fakeclock.New(t0)
	locker := NewLocalLocker(clock) // one lock for both, as Redis would be
	live := []string{"replica-a", "replica-b"}
	replica := func(id string) *Scheduler {
		s := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, func(o *Options) {
			o.InstanceID, o.Locker = id, locker
		})
		for i := range 64 {
			s.adoptTask(store.Task{ID: int64(i + 1), App: app, Code: fmt.Sprintf("report.%02d", i), Kind: store.KindFunc,
				Spec: "0 * * * * *", TimeZone: "UTC", Status: store.TaskActive, MaxAttempts: 1,
				CreatedMs: t0.UnixMilli(), Version: 1})
		}
		s.live = live
		return s
	}
	a, b := replica("replica-a"), replica("replica-b")
	require.NoError(t, a.store.Migrate(ctx))
	require.Equal(t, 5*time.Second, a.shareWait(), "half of ClaimAhead (10s)")

	// held returns the buckets of minute m whose lock s holds.
	held := func(s *Scheduler, m time.Time) map[int]bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		out := map[int]bool{}
		for k, st := range s.slots {
			if k.minute == m.Unix()/60 && st.lock != nil {
				out[k.bucket] = true
			}
		}
		return out
	}
	withFires := map[int]bool{}
	for i := range 64 {
		withFires[bucketOf(fmt.Sprintf("report.%02d", i), a.opts.Buckets)] = true
	}
	share := func(s *Scheduler, m time.Time) map[int]bool {
		out := map[int]bool{}
		for bucket := range withFires {
			s.mu.Lock()
			mine := s.sharesLocked(slotKey{m.Unix() / 60, bucket})
			s.mu.Unlock()
			if mine {
				out[bucket] = true
			}
		}
		return out
	}
	recorded := func(m time.Time) (n int64) {
		require.NoError(t, db.Model(&store.Execution{}).Where("app = ? AND run_time = ?", app, m.UnixMilli()).Count(&n).Error)
		return n
	}

	// Both alive: at ClaimAhead, each takes its share and only that.
	next := t0.Add(time.Minute)
	clock.Set(next.Add(-10 * time.Second))
	require.NoError(t, a.plan(ctx, clock.Now()))
	require.NoError(t, b.plan(ctx, clock.Now()))
	require.NotEmpty(t, share(a, next))
	require.NotEmpty(t, share(b, next))
	require.Equal(t, share(a, next), held(a, next), "replica-a holds its share of 10:01")
	require.Equal(t, share(b, next), held(b, next), "replica-b holds its share of 10:01")
	require.Len(t, withFires, len(held(a, next))+len(held(b, next)), "every slot with fires is held once")
	require.EqualValues(t, 64, recorded(next))

	// replica-b is dead but still listed: replica-a leaves b's share alone
	// until shareWait has passed, then records it, ahead of the minute.
	next = t0.Add(2 * time.Minute)
	for _, at := range []time.Duration{-10 * time.Second, -8 * time.Second, -6 * time.Second} {
		clock.Set(next.Add(at))
		require.NoError(t, a.plan(ctx, clock.Now()))
		require.Equal(t, share(a, next), held(a, next), "at %s, replica-a holds its share of 10:02 only", clock.Now().Format(time.TimeOnly))
	}
	require.Less(t, recorded(next), int64(64))
	clock.Set(next.Add(-5 * time.Second))
	require.NoError(t, a.plan(ctx, clock.Now()))
	require.Equal(t, withFires, held(a, next), "at 10:01:55, replica-a holds every slot of 10:02")
	require.EqualValues(t, 64, recorded(next))

	// Alone in the list (or not in it yet), a replica claims every slot at
	// ClaimAhead.
	a.mu.Lock()
	a.live = []string{"replica-a"}
	a.mu.Unlock()
	next = t0.Add(3 * time.Minute)
	clock.Set(next.Add(-10 * time.Second))
	require.NoError(t, a.plan(ctx, clock.Now()))
	require.Equal(t, withFires, held(a, next))
	require.EqualValues(t, 64, recorded(next))
}

func TestShareWaitLeavesTheOthersTimeToClaim(t *testing.T) {
	t.Parallel()
	for ahead, want := range map[time.Duration]time.Duration{
		time.Second: 0, 1500 * time.Millisecond: 0, 2 * time.Second: time.Second,
		3 * time.Second: time.Second, 10 * time.Second: 5 * time.Second, 50 * time.Second: 25 * time.Second,
	} {
		s := &Scheduler{opts: Options{ClaimAhead: ahead}}
		require.Equal(t, want, s.shareWait(), "ClaimAhead %s", ahead)
	}
}
