package xtimer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// alertLog records the alerts every replica's notifier received, with the
// fake time of delivery.
type alertLog struct {
	mu    sync.Mutex
	clock Clock
	got   []receivedAlert
}

type receivedAlert struct {
	Event
	by string    // the replica whose notifier got it
	at time.Time // fake time of delivery
}

func (l *alertLog) notifier(by string) Notifier {
	return NotifierFunc(func(_ context.Context, e Event) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.got = append(l.got, receivedAlert{Event: e, by: by, at: l.clock.Now()})
		return nil
	})
}

// of returns the alerts of a kind and task received so far, in order.
func (l *alertLog) of(kind EventKind, task string) []receivedAlert {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []receivedAlert
	for _, a := range l.got {
		if a.Kind == kind && a.Task == task {
			out = append(out, a)
		}
	}
	return out
}

// events is what a list of alerts stands for: each fresh alert itself,
// and every alert the events damped before it.
func events(alerts []receivedAlert) int64 {
	var n int64
	for _, a := range alerts {
		n += a.Suppressed
		if !a.Digest {
			n++
		}
	}
	return n
}

// alertFleet is an editFleet whose replicas alert into one log, with a
// window of a minute.
func alertFleet(t *testing.T, mod func(o *Options)) (*editFleet, *alertLog) {
	f := newEditFleet(t, testsvc.SQLite(t))
	log := &alertLog{clock: f.clock}
	f.mod = func(i int, o *Options) {
		o.Notifier = log.notifier(fmt.Sprintf("replica-%d", i))
		o.AlertWindow = time.Minute
		if mod != nil {
			mod(o)
		}
	}
	return f, log
}

// The promise: a task failing every 10 seconds for 5 minutes, run by three
// replicas, alerts at most once per window, each alert is delivered once
// (by one replica), and the alerts' counts add up to every failure.
func TestFailingTaskAlertsOncePerWindowWithTheSuppressedCount(t *testing.T) {
	t.Parallel()
	f, log := alertFleet(t, func(o *Options) { o.AlertMissedRuns = -1 })
	f.fail = map[string]bool{"bad": true}
	for range 3 {
		f.start(map[string]string{"bad": "*/10 * * * * *"})
	}
	f.runUntil(hms(5, 0))
	// 12:00:10 to 12:05:00: 30 fires, each failing its only attempt.
	f.waitRows("bad", hms(5, 0), fireLines(hms(0, 10), hms(5, 0), 10*time.Second, "failed schedule")...)
	require.NoError(t, f.replicas[0].Pause(context.Background(), "bad"))
	// Two more windows for the last digest to go out.
	f.runUntil(hms(7, 0))

	alerts := waitAlerts(log, EventFailed, "bad", func(got []receivedAlert) bool { return events(got) == 30 })
	t.Logf("alerts: %s", describeAlerts(alerts))
	require.Equal(t, int64(30), events(alerts), "the alerts stand for every failure")

	ids := map[string]bool{}
	for i, a := range alerts {
		require.False(t, ids[a.ID], "alert %s delivered twice", a.ID)
		ids[a.ID] = true
		require.Equal(t, "bad", a.Task)
		require.Equal(t, 1, a.Attempt)
		require.Equal(t, "bad fails", a.Error)
		if i > 1 {
			// Since is when the alert before was claimed.
			require.GreaterOrEqual(t, a.Since.Sub(alerts[i-1].Since), time.Minute, "two alerts in one window: %s", describeAlerts(alerts))
		}
	}
	// 12:00:10 to 12:05:00 spans five windows and part of a sixth, and the
	// last one's damped failures go out in a digest.
	require.GreaterOrEqual(t, len(alerts), 5)
	require.LessOrEqual(t, len(alerts), 7)
	require.Zero(t, alerts[0].Suppressed, "the first alert comes at the first failure")
	require.Equal(t, hms(0, 10), alerts[0].ScheduledAt)
	require.True(t, alerts[len(alerts)-1].Digest, "the failures after the last alert are reported by a digest")
}

// waitAlerts waits up to 15s for the alerts of a kind and task to satisfy
// done, and returns them, whether they do or not.
func waitAlerts(log *alertLog, kind EventKind, task string, done func([]receivedAlert) bool) []receivedAlert {
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := log.of(kind, task)
		if done(got) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fireLines lists "15:04:05 what" for every step from first through last.
func fireLines(first, last time.Time, step time.Duration, what string) []string {
	var out []string
	for at := first; !at.After(last); at = at.Add(step) {
		out = append(out, at.Format("15:04:05")+" "+what)
	}
	return out
}

func describeAlerts(alerts []receivedAlert) string {
	var b strings.Builder
	for _, a := range alerts {
		fmt.Fprintf(&b, "\n  %s by %s: %s suppressed=%d since=%s digest=%v", a.at.Format("15:04:05"), a.by, a.Kind, a.Suppressed,
			a.Since.Format("15:04:05.000"), a.Digest)
	}
	return b.String()
}

// The dead man's switch: a task whose replicas were all stopped is
// reported silent by a replica of the app that does not run it, once its
// last three fires are a grace minute past; a task that runs is not.
func TestDeadMansSwitchFiresForATaskWhoseReplicasAllStopped(t *testing.T) {
	t.Parallel()
	f, log := alertFleet(t, nil)
	a := f.start(map[string]string{"watched": "*/10 * * * * *", "healthy": "*/10 * * * * *"})
	f.start(map[string]string{"healthy": "*/10 * * * * *"})
	f.runUntil(hms(1, 5))
	stopReplica(t, f, a)
	f.runUntil(hms(4, 0))

	require.Empty(t, log.of(EventSilent, "healthy"))
	silent := waitAlerts(log, EventSilent, "watched", func(got []receivedAlert) bool { return len(got) > 0 })
	t.Logf("silent alerts: %s", describeAlerts(silent))
	require.NotEmpty(t, silent)
	first := silent[0]
	require.Equal(t, "replica-1", first.by, "the replica left running reports it")
	require.Equal(t, 3, first.Missed)
	// The last success ran at 12:01:00 (replica-0 stopped at 12:01:05): the
	// third fire after it, 12:01:30, is due with its grace at 12:02:30, and
	// the round after that reports it.
	require.Equal(t, hms(1, 30), first.ScheduledAt)
	require.False(t, first.at.Before(hms(2, 30)), "no alert while the task could still succeed")
	require.True(t, first.at.Before(hms(2, 41)), "reported at the first round after its grace: %s", first.at)
	require.Empty(t, log.of(EventReplicaLost, ""), "a replica that stopped is not lost")
	for i := 2; i < len(silent); i++ {
		require.GreaterOrEqual(t, silent[i].Since.Sub(silent[i-1].Since), time.Minute, "damped to one per window")
	}
}

// stopReplica stops one replica of the fleet and takes it out of it.
func stopReplica(t *testing.T, f *editFleet, s *Scheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.waitIdle()
	require.NoError(t, s.Stop(ctx))
	f.replicas = slices.DeleteFunc(f.replicas, func(r *Scheduler) bool { return r == s })
	f.clock.ForgetStopped()
}

// A replica that stops heart-beating without stopping is reported once by
// one of the others, however many rounds see it gone.
func TestLostReplicaIsAlertedOnce(t *testing.T) {
	t.Parallel()
	f, log := alertFleet(t, nil)
	for range 3 {
		f.start(map[string]string{"job": "0 0 * * * *"})
	}
	// The row a killed process leaves behind.
	require.NoError(t, f.replicas[0].store.Heartbeat(context.Background(), store.Replica{
		App: f.app, ID: "killed-1", Host: "node-7", PID: 4242, HeartbeatMs: hms(0, 0).UnixMilli(),
	}))
	f.runUntil(hms(3, 0))
	waitAlerts(log, EventReplicaLost, "", func(got []receivedAlert) bool { return len(got) > 0 })
	f.runUntil(hms(4, 0))
	lost := log.of(EventReplicaLost, "")
	require.Len(t, lost, 1, "one alert for one lost heartbeat: %s", describeAlerts(lost))
	require.Equal(t, "killed-1", lost[0].Replica)
	require.Zero(t, lost[0].Suppressed)
	require.Contains(t, lost[0].Message, "node-7")
	// ReplicaTimeout is 30s: lost from 12:00:30, seen by the round after.
	require.False(t, lost[0].at.Before(hms(0, 30)))
	require.True(t, lost[0].at.Before(hms(0, 42)), "%s", lost[0].at)
}

func TestNotifierOptionsAreValidated(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	for _, c := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.AlertWindow = 10 * time.Millisecond }, "Options.AlertWindow = 10ms: want at least 1s"},
		{func(o *Options) { o.AlertMissedRuns = 1001 }, "Options.AlertMissedRuns = 1001"},
	} {
		o := Options{DB: db}
		c.mod(&o)
		_, err := New(o)
		require.ErrorContains(t, err, c.want)
	}
}
