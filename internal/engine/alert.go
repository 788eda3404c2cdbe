package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file turns what the engine sees into alerts (notify.go has the
// events and notifiers), damped and sent once across the replicas.
//
// An event is raised where it is seen: a failed execution on the replica
// that ran it, a lost replica or a silent task on the replica holding the
// alert lock. Raising costs a map update: a sender goroutine coalesces
// events of one kind and subject and counts them into the row of
// xtimer_alerts that every replica shares (internal/store/alerts.go). The row lets
// one event per AlertWindow through, to the replica whose conditional
// update claimed it, and counts the others; the next alert carries that
// count (Event.Suppressed), and a window that ends with damped events and
// no new one is closed by a digest of them.
//
// Every alertRound the replica holding the lock "xtimer:{app}:alerts"
// sends those digests, sends again the alerts of a replica that died
// sending them, looks for replicas gone silent, and runs the dead man's
// switch over the app's tasks.

const (
	// alertRound is the period of the maintenance round.
	alertRound = 10 * time.Second
	// notifyTimeout bounds one Notify call.
	notifyTimeout = 30 * time.Second
	// alertLease is how long a claimed alert is the claimer's to deliver;
	// then any replica may deliver it.
	alertLease = notifyTimeout + 30*time.Second
	// alertMaxTries is how many deliveries of one alert are begun before it
	// is dropped, with an error logged.
	alertMaxTries = 5
	// alertQueueMax bounds the kinds and subjects waiting in memory for the
	// database: beyond it, raises are dropped and logged (a database that
	// has been away for long; the engine itself waits for it too).
	alertQueueMax = 10_000
	// silentProbesPerRound bounds the dead man's switch's queries a round.
	silentProbesPerRound = 500
	// replicaLostLookback: replicas silent for longer than this when the
	// alert lock is taken are not alerted (they died before anyone watched).
	replicaLostLookback = 24 * time.Hour
)

type alertKey struct {
	kind    EventKind
	subject string
}

// raisedEvent is the events of one key waiting to be counted.
type raisedEvent struct {
	latest     Event
	occurrence string
	count      int64
}

// alerter exists when Config.Notifier is set; its methods are no-ops on
// a nil receiver.
type alerter struct {
	n Notify
	// What it is wired to (newAlerter), fixed after.
	opts    Config
	store   *store.Store
	locker  Locker
	clock   Clock
	log     *slog.Logger
	metrics *metrics
	view    *view // the tasks the dead man's switch watches
	noteDB  func(error)

	// sender runs sendLoop until the end of Stop (alerts raised while
	// handlers finish are sent); rounds runs the maintenance round, which
	// stops with the scheduler's other loops.
	sender, rounds startstop.Base

	mu     sync.Mutex
	queue  map[alertKey]*raisedEvent
	order  []alertKey         // keys of queue, oldest first
	claims []store.AlertClaim // claimed, to deliver
	kick   startstop.Kick

	// probed is, per task, the latest due fire the dead man's switch
	// looked at: a task is probed again once another fire came due.
	// Only the maintenance round uses it.
	probed map[string]time.Time
	// quiet is, per task, the instant before which the task's last fires
	// stay what the switch last saw (its next fire): the round skips it
	// until then without computing its schedule, so a million daily tasks
	// cost a round little. The entry holds for that taskState only (an
	// edit makes a new one).
	quiet map[string]quietTask
}

type quietTask struct {
	t     *taskState
	until time.Time
}

func newAlerter(s *Engine) *alerter {
	if s.opts.Notifier == nil {
		return nil
	}
	return &alerter{n: s.opts.Notifier, opts: s.opts, store: s.store, locker: s.locker, clock: s.clock, log: s.log,
		metrics: s.metrics, view: &s.view, noteDB: s.noteDB, queue: map[alertKey]*raisedEvent{},
		kick: startstop.NewKick(), probed: map[string]time.Time{},
		quiet: map[string]quietTask{}}
}

// raise queues an event. subject is the task code, the replica ID, or ""
// for the app; occurrence, when not "", makes raises of the same
// occurrence count once across replicas.
func (a *alerter) raise(e Event, subject, occurrence string) {
	if a == nil {
		return
	}
	e.App = a.opts.App
	if e.Replica == "" {
		e.Replica = a.opts.InstanceID
	}
	if e.At.IsZero() {
		e.At = a.clock.Now()
	}
	e.At = e.At.UTC()
	if e.Task != "" && e.Owner == "" {
		e.Owner = a.ownerOf(e.Task)
	}
	k := alertKey{e.Kind, subject}
	a.mu.Lock()
	q := a.queue[k]
	switch {
	case q != nil && occurrence != "" && q.occurrence == occurrence:
	case q != nil:
		q.latest, q.occurrence = e, occurrence
		q.count++
	case len(a.queue) >= alertQueueMax:
		a.mu.Unlock()
		a.metrics.alert(string(e.Kind), "dropped")
		a.log.Error("alert dropped: too many waiting for the database", "kind", e.Kind, "subject", subject)
		return
	default:
		a.queue[k] = &raisedEvent{latest: e, occurrence: occurrence, count: 1}
		a.order = append(a.order, k)
	}
	a.mu.Unlock()
	a.poke()
}

func (a *alerter) poke() { a.kick.Poke() }

// ownerOf is the owner (WithOwner) of the task code in this replica's
// view, "" when it has none or the view has no such task. It takes
// view.mu: raise is never called under it.
func (a *alerter) ownerOf(code string) string {
	a.view.mu.Lock()
	defer a.view.mu.Unlock()
	if t := a.view.taskLocked(code); t != nil && t.def() != nil {
		return t.def().Owner
	}
	return ""
}

// start starts the sender, which stop ends, and the maintenance round,
// which stopRounds ends.
func (a *alerter) start() error {
	if a == nil {
		return nil
	}
	return errors.Join(a.sender.Start(context.Background(), startstop.Loop{Run: a.sendLoop}),
		a.rounds.Start(context.Background(), startstop.Every(a.clock, alertRound, a.round)))
}

// timers is how many clock timers the alerter's loops keep armed.
func (a *alerter) timers() int {
	if a == nil {
		return 0
	}
	return a.sender.Timers() + a.rounds.Timers()
}

// stopRounds ends the maintenance round; a round under way runs to its
// end (it is bounded by alertRound).
func (a *alerter) stopRounds() {
	if a != nil {
		a.rounds.Stop()
	}
}

// sendLoop counts what was raised and delivers what was claimed, one
// Notify at a time.
func (a *alerter) sendLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		}
		if err := a.flush(context.WithoutCancel(ctx)); err != nil {
			a.noteDB(err)
			if !startstop.Pause(ctx, time.Second) {
				return
			}
			a.poke()
		}
	}
}

// flush counts every queued raise and delivers every claim, stopping at
// the first database error (what is left stays queued).
func (a *alerter) flush(ctx context.Context) error {
	for {
		a.mu.Lock()
		if len(a.order) == 0 && len(a.claims) == 0 {
			a.mu.Unlock()
			return nil
		}
		var claims []store.AlertClaim
		claims, a.claims = a.claims, nil
		var k alertKey
		var q *raisedEvent
		if len(claims) == 0 {
			k, a.order = a.order[0], a.order[1:]
			q = a.queue[k]
			delete(a.queue, k)
		}
		a.mu.Unlock()
		for _, c := range claims {
			a.deliver(ctx, c)
		}
		if q == nil {
			continue
		}
		now := a.clock.Now()
		q.latest.ID = newAlertID()
		body, err := json.Marshal(q.latest)
		if err != nil {
			return fmt.Errorf("xtimer: encode alert: %w", err)
		}
		claim, err := a.store.RaiseAlert(ctx, store.AlertRaise{
			App: a.opts.App, Kind: string(k.kind), Subject: k.subject, Occurrence: q.occurrence, Count: q.count,
			Event: string(body), AtMs: now.UnixMilli(), WindowMs: a.opts.AlertWindow.Milliseconds(),
			Replica: a.opts.InstanceID, LeaseUntilMs: now.Add(alertLease).UnixMilli(),
		})
		if err != nil {
			a.requeue(k, q)
			return err
		}
		if claim == nil {
			a.metrics.alert(string(k.kind), "damped")
			continue
		}
		a.deliver(ctx, *claim)
	}
}

// requeue puts back a raise the database did not count, merged with what
// was raised since.
func (a *alerter) requeue(k alertKey, q *raisedEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now := a.queue[k]; now != nil {
		now.count += q.count
		return
	}
	a.queue[k] = q
	a.order = append([]alertKey{k}, a.order...)
}

// deliver sends a claimed alert and records the outcome; a failed one is
// left for a later round, here or on another replica.
func (a *alerter) deliver(ctx context.Context, c store.AlertClaim) {
	var e Event
	if err := json.Unmarshal([]byte(c.Event), &e); err != nil {
		a.log.Error("alert dropped: stored event does not decode", "alert", c.ID, "err", err)
		_ = a.store.AlertDone(ctx, c.ID, a.opts.InstanceID)
		return
	}
	e.Suppressed, e.Digest = c.Suppressed, c.Digest
	if c.SinceMs > 0 {
		e.Since = time.UnixMilli(c.SinceMs).UTC()
	}
	if c.Digest {
		e.ID += "-digest"
		e.Message = fmt.Sprintf("%s (%d like it since the last alert)", e.Message, c.Suppressed)
	}
	nctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	err := a.n(nctx, e)
	cancel()
	switch {
	case err == nil:
		a.metrics.alert(string(e.Kind), "sent")
		a.log.Debug("alert sent", "alert", e.ID, "kind", e.Kind, "suppressed", e.Suppressed)
	case c.Tries >= alertMaxTries:
		a.metrics.alert(string(e.Kind), "dropped")
		a.log.Error("alert dropped: its notifier failed every try", "alert", e.ID, "kind", e.Kind, "tries", c.Tries, "err", err)
	default:
		a.metrics.alert(string(e.Kind), "failed")
		retry := a.clock.Now().Add(time.Duration(c.Tries) * time.Minute)
		a.log.Warn("alert not delivered; it will be tried again", "alert", e.ID, "kind", e.Kind, "retry_at", retry, "err", err)
		if err := a.store.AlertRetryAt(ctx, c.ID, a.opts.InstanceID, retry.UnixMilli()); err != nil {
			a.log.Warn("alert retry not recorded; it is retried when its lease ends", "alert", e.ID, "err", err)
		}
		return
	}
	if err := a.store.AlertDone(ctx, c.ID, a.opts.InstanceID); err != nil {
		a.log.Warn("alert delivery not recorded; another replica may send it again, with the same ID", "alert", e.ID, "err", err)
	}
}

func newAlertID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// stop counts and delivers what is left, until ctx ends.
func (a *alerter) stop(ctx context.Context) error {
	if a == nil {
		return nil
	}
	a.rounds.Stop()
	a.sender.Stop()
	if err := startstop.Drain(ctx, stopRetryEvery, a.flush); err != nil {
		a.mu.Lock()
		n := len(a.order)
		a.mu.Unlock()
		return fmt.Errorf("xtimer: stop: %d alerts not recorded: %w", n, err)
	}
	return nil
}

func (a *alerter) alertKey() string { return "xtimer:" + a.opts.App + ":alerts" }

// round is one maintenance round, on the replica that gets the lock. It
// runs to its end when stopRounds cancels loopCtx (it is bounded by alertRound).
func (a *alerter) round(loopCtx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(loopCtx), alertRound)
	defer cancel()
	lock, err := a.locker.Obtain(ctx, a.alertKey(), 3*alertRound)
	if err != nil {
		if !errors.Is(err, ErrLockHeld) {
			a.log.Debug("alert round skipped: lock unavailable", "err", err)
		}
		return
	}
	defer func() { _ = lock.Release(context.WithoutCancel(ctx)) }()
	err = errors.Join(a.claimDue(ctx, now), a.watchReplicas(ctx, now), a.watchTasks(ctx, now))
	if err != nil {
		a.noteDB(err)
	}
}

// claimDue claims the digests of windows that ended and the alerts whose
// lease ended, for the sender to deliver.
func (a *alerter) claimDue(ctx context.Context, now time.Time) error {
	due, err := a.store.DueAlerts(ctx, a.opts.App, now.UnixMilli(), a.opts.AlertWindow.Milliseconds(), 100)
	if err != nil {
		return err
	}
	for _, row := range due {
		c, err := a.store.ClaimAlert(ctx, row, now.UnixMilli(), a.opts.InstanceID, now.Add(alertLease).UnixMilli())
		if err != nil {
			return err
		}
		if c != nil {
			a.mu.Lock()
			a.claims = append(a.claims, *c)
			a.mu.Unlock()
			a.poke()
		}
	}
	return nil
}

// watchReplicas raises EventReplicaLost for every replica whose heartbeat
// expired without it stopping, once per lost heartbeat.
func (a *alerter) watchReplicas(ctx context.Context, now time.Time) error {
	gone, err := a.store.SilentReplicas(ctx, a.opts.App, now.Add(-replicaLostLookback).UnixMilli(), now.Add(-a.opts.ReplicaTimeout).UnixMilli())
	if err != nil {
		return err
	}
	for _, r := range gone {
		last := time.UnixMilli(r.HeartbeatMs).UTC()
		a.raise(Event{Kind: EventReplicaLost, Replica: r.ID, At: now,
			Message: fmt.Sprintf("replica %s (host %s, pid %d) lost: no heartbeat since %s", r.ID, r.Host, r.PID, last.Format(time.RFC3339))},
			r.ID, strconv.FormatInt(r.HeartbeatMs, 10))
	}
	return nil
}

// watchTasks is the dead man's switch: a task is silent when none of
// its last AlertMissedRuns fires succeeded, each having failed, been
// skipped, or never run (no replica runs the task, or none recorded it).
// A fire running or retrying is given its timeouts and back-offs
// (silentGrace) before it counts as missed.
func (a *alerter) watchTasks(ctx context.Context, now time.Time) error {
	n := a.opts.AlertMissedRuns
	if n < 1 {
		return nil
	}
	// A fire is recorded ahead and written back in batches: a minute
	// after its run time, its row says what became of it.
	at := now.Add(-time.Minute)
	a.view.mu.Lock()
	var tasks []*taskState
	a.view.eachTaskLocked(func(t *taskState) {
		if q, ok := a.quiet[t.code]; t.active() && (!ok || q.t != t || !at.Before(q.until)) {
			tasks = append(tasks, t)
		}
	})
	for code, q := range a.quiet {
		if a.view.taskLocked(code) != q.t {
			delete(a.quiet, code) // edited or deleted
		}
	}
	a.view.mu.Unlock()
	slices.SortFunc(tasks, func(x, y *taskState) int { return cmp.Compare(x.code, y.code) })
	probes := 0
	for _, t := range tasks {
		if probes >= silentProbesPerRound {
			break
		}
		// Fires on excluded days are not missed runs: they were not to run.
		sched := t.runSchedule()
		fires := lastFires(sched, at, n)
		if len(fires) < n {
			a.quiet[t.code] = quietTask{t, sched.Next(at)}
			continue
		}
		first, latest := fires[0], fires[n-1]
		// Until the next fire comes due, these stay its last fires.
		quiet := quietTask{t, sched.Next(latest)}
		if quiet.until.IsZero() {
			quiet.until = at.Add(100 * 365 * 24 * time.Hour) // no fire any more
		}
		known := max(t.createdMs, t.updatedMs, t.sinceNs()/int64(time.Millisecond))
		if first.UnixMilli() < known || !latest.After(a.probed[t.code]) {
			a.quiet[t.code] = quiet
			continue // too new to judge, or judged on these fires already
		}
		if end := t.endAt(); !end.IsZero() && latest.After(end) {
			a.quiet[t.code] = quiet
			continue
		}
		probes++
		// A sharded fire is several rows: the read covers as many fires.
		perFire := max(t.def().Shards, 1)
		if t.def().Broadcast {
			perFire = store.MaxShards
		}
		statuses, err := a.store.StatusesSince(ctx, a.opts.App, t.code, first.UnixMilli(), 4*n*perFire)
		if err != nil {
			return err
		}
		if slices.Contains(statuses, store.StatusSucceeded) {
			a.probed[t.code] = latest
			a.quiet[t.code] = quiet
			continue
		}
		// A fire running or waiting to retry may still succeed: look again
		// next round. One still scheduled a minute after its run time has
		// no replica to start it.
		if (slices.Contains(statuses, store.StatusRunning) || slices.Contains(statuses, store.StatusRetrying)) &&
			now.Before(latest.Add(silentGrace(t))) {
			continue
		}
		a.probed[t.code] = latest
		a.quiet[t.code] = quiet
		a.raise(Event{Kind: EventSilent, Task: t.code, At: now, ScheduledAt: latest.UTC(), Missed: n,
			Message: fmt.Sprintf("task %s: no successful run in its last %d fires (%s to %s)", t.code, n,
				first.UTC().Format(time.RFC3339), latest.UTC().Format(time.RFC3339))},
			t.code, strconv.FormatInt(latest.UnixMilli(), 10))
	}
	return nil
}

// silentGrace is how long after a fire its success may still come: every
// attempt's timeout and back-off, and a minute.
func silentGrace(t *taskState) time.Duration {
	attempts := time.Duration(max(t.def().MaxAttempts, 1))
	return time.Minute + attempts*time.Duration(t.def().TimeoutMs)*time.Millisecond +
		(attempts-1)*time.Duration(t.def().BackoffMaxMs)*time.Millisecond
}

// lastFires returns the last n fires of sched at or before at, oldest
// first, or fewer when the schedule has fewer in the last 30 years. It
// looks back over a doubling span, so a task firing every second costs a
// minute of Next calls and a yearly one a few dozen.
func lastFires(sched cron.Schedule, at time.Time, n int) []time.Time {
	for span := time.Minute; span < 30*365*24*time.Hour; span *= 2 {
		var fires []time.Time
		for f := sched.Next(at.Add(-span)); !f.IsZero() && !f.After(at); f = sched.Next(f) {
			fires = append(fires, f)
			if len(fires) > n {
				fires = fires[1:]
			}
		}
		if len(fires) == n {
			return fires
		}
	}
	return nil
}

// Hooks the engine calls; all are no-ops without a Notifier.

// attemptBegan raises EventLate for an attempt starting past the threshold.
func (a *alerter) attemptBegan(r store.Execution, at time.Time) {
	if a == nil || a.opts.AlertLateAfter < 0 || r.Source == store.SourceBackfill {
		return // a backfilled fire is late by design
	}
	if late := at.Sub(time.UnixMilli(attemptDue(r))); late > a.opts.AlertLateAfter {
		a.raise(Event{Kind: EventLate, Task: r.TaskCode, At: at, ExecutionID: r.ID, ScheduledAt: time.UnixMilli(r.RunTime).UTC(),
			Attempt: r.Attempt, Lateness: late,
			Message: fmt.Sprintf("task %s: attempt %d of execution %d started %s late", r.TaskCode, r.Attempt, r.ID, late.Round(time.Millisecond))},
			r.TaskCode, "")
	}
}

// settled raises EventFailed or EventTimedOut for an execution that ended
// so after its last attempt.
func (a *alerter) settled(r store.Execution, f store.Finish) {
	if a == nil || f.Reason == store.ReasonCancelled {
		return // a run its task's policy stopped for the next fire: the policy's doing, not a failure to report
	}
	if f.Reason == ReasonSecretUndecryptable {
		a.raise(Event{Kind: EventSecretUndecryptable, Task: r.TaskCode, At: time.UnixMilli(f.FinishedMs), ExecutionID: r.ID,
			ScheduledAt: time.UnixMilli(r.RunTime).UTC(), Attempt: f.Attempt, Reason: f.Reason, Error: f.Error,
			Message: fmt.Sprintf("task %s: execution %d refused on replica %s, nothing sent: %s", r.TaskCode, r.ID, a.opts.InstanceID, f.Error)},
			r.TaskCode, fireOccurrence(r))
		return
	}
	kind, what := EventFailed, "failed"
	switch f.Status {
	case store.StatusFailed:
	case store.StatusTimedOut:
		kind, what = EventTimedOut, "timed out"
	default:
		return
	}
	a.raise(Event{Kind: kind, Task: r.TaskCode, At: time.UnixMilli(f.FinishedMs), ExecutionID: r.ID,
		ScheduledAt: time.UnixMilli(r.RunTime).UTC(), Attempt: f.Attempt, Error: f.Error,
		Message: fmt.Sprintf("task %s: execution %d %s after %d of %d attempts: %s", r.TaskCode, r.ID, what, f.Attempt, r.MaxAttempts, f.Error)},
		r.TaskCode, fireOccurrence(r))
}

// fireOccurrence is the occurrence of an alert about row r: its fire's
// run time for a shard, so that the shards of one fire that fail (or are
// skipped) count as one, as alerts count fires; "" otherwise, each
// execution counting.
func fireOccurrence(r store.Execution) string {
	if !r.Sharded() {
		return ""
	}
	return strconv.FormatInt(r.RunTime, 10)
}

// skipped raises EventSkipped for fires skipped for a reason operators
// did not choose.
func (a *alerter) skipped(r store.Execution, reason string, at time.Time) {
	if a == nil || (reason != store.ReasonMisfire && reason != store.ReasonOverlap) {
		return
	}
	a.raise(Event{Kind: EventSkipped, Task: r.TaskCode, At: at, ExecutionID: r.ID, ScheduledAt: time.UnixMilli(r.RunTime).UTC(),
		Reason: reason, Message: fmt.Sprintf("task %s: fire at %s skipped: %s", r.TaskCode, time.UnixMilli(r.RunTime).UTC().Format(time.RFC3339), reason)},
		r.TaskCode, fireOccurrence(r))
}

// fallback raises EventFallbackEntered or EventFallbackLeft. Redis serves
// every replica: the subject is the app, so an outage seen by all of them
// is one alert and a count.
func (a *alerter) fallback(down bool, err error) {
	if a == nil {
		return
	}
	if down {
		a.raise(Event{Kind: EventFallbackEntered, Error: fmt.Sprint(err),
			Message: "slot lock unavailable: claims fall back to the database unique key"}, "", "")
		return
	}
	a.raise(Event{Kind: EventFallbackLeft, Message: "slot lock available again"}, "", "")
}
