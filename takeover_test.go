package xtimer

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// takeOverLog keeps the fire counts of the take-over log lines, in order.
type takeOverLog struct {
	mu    sync.Mutex
	fires []int64
}

func (l *takeOverLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *takeOverLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *takeOverLog) WithGroup(string) slog.Handler            { return l }
func (l *takeOverLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "took over the fires of a slot whose owner stopped refreshing its lock" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "fires" {
			l.mu.Lock()
			l.fires = append(l.fires, a.Value.Int64())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *takeOverLog) counts() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.fires...)
}

// A replica that wins the slot of one that died takes over the dead
// owner's fires due in the next few seconds (already late: the lock ran
// out seconds after its owner died) before the rest of the slot, and runs
// each of them once.
func TestDeadOwnersFiresDueSoonAreTakenOverFirst(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	minute := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := fakeclock.New(minute.Add(5 * time.Second))

	// What the dead replica left: every fire of the minute recorded, none started.
	st := store.New(db)
	require.NoError(t, st.Migrate(ctx))
	var dead []store.Execution
	for i := range 60 {
		dead = append(dead, store.Execution{App: app, TaskCode: "pay", RunTime: minute.Add(time.Duration(i) * time.Second).UnixMilli(), Replica: "dead-1"})
	}
	_, err := st.InsertFires(ctx, dead)
	require.NoError(t, err)

	log := &takeOverLog{}
	iv := newInvocations()
	s := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, func(o *Options) { o.Logger = slog.New(log) })
	require.NoError(t, s.Register("pay", "* * * * * *", iv.handler(nil)))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)

	// The first tick, 10:00:05.5 (tickPhase): the fires due by 10:00:08.5
	// (urgentHorizon) first, nine, then the other 51.
	waitIdle(ctx, t, clock, s)
	clock.Advance(500 * time.Millisecond)
	require.Eventually(t, func() bool { return len(log.counts()) == 2 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []int64{9, 51}, log.counts())

	// The six due by now run at once, the others at their run times, once each.
	for range 6 {
		iv.next(t, 10*time.Second)
	}
	waitIdle(ctx, t, clock, s)
	clock.Advance(2 * time.Second) // 10:00:07.5
	for range 2 {
		iv.next(t, 10*time.Second)
	}
	iv.mu.Lock()
	defer iv.mu.Unlock()
	require.Len(t, iv.calls, 8)
	for id, calls := range iv.calls {
		require.Len(t, calls, 1, "fire %s", id)
	}
}
