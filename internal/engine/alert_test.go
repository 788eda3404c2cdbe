package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The alerter's hooks, called as the engine calls them. The root's
// alert_test.go covers the alerts a user sees through Options.Notifier.

// alertHMS is 12:mm:ss on the day the tests of this file run.
func alertHMS(minute, second int) time.Time {
	return time.Date(2026, 11, 30, 12, minute, second, 0, time.UTC)
}

// alertLog records the alerts the notifier received, with the fake time
// of delivery.
type alertLog struct {
	mu    sync.Mutex
	clock Clock
	got   []alertReceived
}

type alertReceived struct {
	Event
	at time.Time // fake time of delivery
}

func (l *alertLog) notifier() Notify {
	return func(_ context.Context, e Event) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.got = append(l.got, alertReceived{Event: e, at: l.clock.Now()})
		return nil
	}
}

// of returns the alerts of a kind and task received so far, in order.
func (l *alertLog) of(kind EventKind, task string) []alertReceived {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []alertReceived
	for _, a := range l.got {
		if a.Kind == kind && a.Task == task {
			out = append(out, a)
		}
	}
	return out
}

// alertFleetEngine starts, at 12:00:00.5 on a fake clock, the one replica
// of an app the test needs ("replica-0", on the in-process lock), alerting
// into a log with a window of a minute, with the tasks of specs (code →
// spec) whose handlers succeed.
func alertFleetEngine(t *testing.T, specs map[string]string, mod func(*Config)) (*Engine, *fakeclock.Clock, *alertLog) {
	t.Helper()
	clock := fakeclock.New(alertHMS(0, 0).Add(500 * time.Millisecond))
	log := &alertLog{clock: clock}
	e := newEngine(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, func(c *Config) {
		c.InstanceID = "replica-0"
		c.Notifier = log.notifier()
		c.AlertWindow = time.Minute
		if mod != nil {
			mod(c)
		}
	})
	for code, spec := range specs {
		mustRegister(t, e, code, spec, func(context.Context, *Attempt) error { return nil })
	}
	require.NoError(t, e.Start(context.Background()))
	stopOnCleanup(t, e)
	return e, clock, log
}

// alertRunUntil moves the clock to at a second at a time, each step once
// the engine's loops wait for their timers.
func alertRunUntil(t *testing.T, clock *fakeclock.Clock, e *Engine, at time.Time) {
	t.Helper()
	ctx := context.Background()
	for now := clock.Now(); now.Before(at); now = clock.Now() {
		waitIdle(ctx, t, clock, e)
		clock.Advance(min(time.Second, at.Sub(now)))
	}
	waitIdle(ctx, t, clock, e)
}

// The late, skipped and fallback events, and what is not alerted.
func TestAlertsOfLateAndSkippedFiresAndOfTheLockFallingBack(t *testing.T) {
	t.Parallel()
	s, clock, log := alertFleetEngine(t, map[string]string{"job": "*/10 * * * * *"}, func(c *Config) {
		c.AlertMissedRuns = -1
		c.AlertLateAfter = 5 * time.Second
	})
	alertRunUntil(t, clock, s, alertHMS(0, 5))

	r := store.Execution{ID: 7, TaskCode: "job", RunTime: alertHMS(0, 0).UnixMilli(), Attempt: 1}
	s.alerts.attemptBegan(r, alertHMS(0, 4))                                              // 4s late: under the threshold
	s.alerts.attemptBegan(r, alertHMS(0, 6))                                              // 6s late
	s.alerts.skipped(r, store.ReasonPaused, alertHMS(0, 6))                               // an operator's doing
	s.alerts.skipped(r, store.ReasonMisfire, alertHMS(0, 6))                              // the system's
	s.alerts.settled(r, store.Finish{Result: store.Result{Status: store.StatusRetrying}}) // not the last attempt
	s.noteRedis(fmt.Errorf("dial tcp: connection refused"))
	s.noteRedis(fmt.Errorf("dial tcp: connection refused")) // still down: no second event
	s.noteRedis(nil)

	require.Eventually(t, func() bool {
		return len(log.of(EventLate, "job")) == 1 && len(log.of(EventSkipped, "job")) == 1 &&
			len(log.of(EventFallbackEntered, "")) == 1 && len(log.of(EventFallbackLeft, "")) == 1
	}, 10*time.Second, 10*time.Millisecond)
	late := log.of(EventLate, "job")[0]
	require.Equal(t, 6*time.Second, late.Lateness)
	require.Equal(t, int64(7), late.ExecutionID)
	skip := log.of(EventSkipped, "job")[0]
	require.Equal(t, store.ReasonMisfire, skip.Reason)
	require.Contains(t, log.of(EventFallbackEntered, "")[0].Error, "connection refused")
	require.Empty(t, log.of(EventFailed, "job"))
	require.Empty(t, log.of(EventTimedOut, "job"))
}
