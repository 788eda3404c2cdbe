package xtimer

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/store"
)

// This file starts recorded fires at their run time and records how each
// attempt ends. The invariant it keeps: a handler starts only for a row
// that exists, and only on the replica that inserted the row or won a
// conditional claim on it.

// reasonDeleted: the task of an armed fire was deleted before it ran.
const reasonDeleted = "task deleted"

// armedFire is a recorded fire waiting for its run time.
type armedFire struct {
	row store.Execution
	due time.Time
}

type fireHeap []armedFire

func (h fireHeap) Len() int           { return len(h) }
func (h fireHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h fireHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *fireHeap) Push(x any)        { *h = append(*h, x.(armedFire)) }
func (h *fireHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// arm queues a row this replica owns to start at its run time (at once
// when that has passed).
func (s *Scheduler) arm(r store.Execution) {
	s.mu.Lock()
	heap.Push(&s.armed, armedFire{row: r, due: time.UnixMilli(r.RunTime)})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// dispatchLoop sleeps until the earliest armed fire is due, on one timer.
func (s *Scheduler) dispatchLoop(ctx context.Context) {
	defer s.loops.Done()
	timer := s.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.clock.Now()
		var due []armedFire
		wait := time.Hour
		s.mu.Lock()
		for s.armed.Len() > 0 && !s.armed[0].due.After(now) {
			due = append(due, heap.Pop(&s.armed).(armedFire))
		}
		if s.armed.Len() > 0 {
			wait = s.armed[0].due.Sub(now)
		}
		s.mu.Unlock()
		for _, f := range due {
			s.startFire(ctx, f, now)
		}
		if len(due) > 0 {
			continue // time moved while starting; look again before sleeping
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			timer.Stop()
		case <-timer.C():
		}
	}
}

// startFire runs the last checks on a due fire and starts its first
// attempt. A fire whose timer rang on time, on a replica whose heartbeat
// is fresh, starts at once and its status is written afterwards, batched;
// anything late (a paused process waking up, a catch-up, a claimed
// orphan) first wins a conditional update, so a replica that slept past
// its lock can never start a fire another replica took over.
func (s *Scheduler) startFire(ctx context.Context, f armedFire, now time.Time) {
	r := f.row
	s.mu.Lock()
	t, cfg := s.tasks[r.TaskCode], s.handlers[r.TaskCode]
	fresh := now.Sub(time.UnixMilli(r.RunTime)) <= lateTolerance && now.Sub(s.beatOK) < s.opts.ReplicaTimeout/2
	running := s.running[r.TaskCode]
	s.mu.Unlock()
	switch {
	case t == nil || cfg == nil:
		s.updates.skip(r, reasonDeleted, now, "the task no longer exists")
		return
	case r.Source != store.SourceManual && t.row.Status != store.TaskActive:
		s.updates.skip(r, store.ReasonPaused, now, "")
		return
	case r.Source == store.SourceSchedule && !fresh && now.Sub(time.UnixMilli(r.RunTime)) > time.Duration(t.row.MisfireWindowMs)*time.Millisecond && t.row.MisfireWindowMs > 0:
		s.updates.skip(r, store.ReasonMisfire, now, "")
		return
	}
	if OverlapPolicy(t.row.Overlap) == OverlapForbid {
		n, err := s.store.RunningCount(ctx, s.opts.App, r.TaskCode)
		if err == nil && n == 0 && running > 0 {
			n = int64(running)
		}
		if err != nil || n > 0 {
			// Unknown counts as overlapping: forbid means never two at once.
			s.updates.skip(r, store.ReasonOverlap, now, "")
			return
		}
	}
	r.Attempt = 1
	if fresh {
		s.updates.started(r, now)
		s.startAttempt(r, now)
		return
	}
	ok, err := s.store.StartAttempt(ctx, r.ID, 1, s.opts.InstanceID, now.UnixMilli())
	switch {
	case err != nil:
		// The row stays scheduled and owned here; ClaimFires hands it on if
		// we die, and the database coming back lets us try again.
		s.log.Error("could not start a late fire; will retry", "task", r.TaskCode, "execution", r.ID, "err", err)
		r.Attempt = 0
		retry := armedFire{row: r, due: now.Add(time.Second)}
		s.mu.Lock()
		heap.Push(&s.armed, retry)
		s.mu.Unlock()
	case ok:
		s.startAttempt(r, now)
	default:
		s.log.Info("fire taken over by another replica", "task", r.TaskCode, "execution", r.ID)
	}
}

// startAttempt runs one attempt of r (r.Attempt) on the pool.
func (s *Scheduler) startAttempt(r store.Execution, now time.Time) {
	s.mu.Lock()
	t, cfg := s.tasks[r.TaskCode], s.handlers[r.TaskCode]
	s.running[r.TaskCode]++
	s.mu.Unlock()
	s.attempts.Add(1)
	loc := t.loc()
	run := &Run{
		ID: fireID(s.opts.App, r.TaskCode, r.RunTime), ExecutionID: r.ID, Code: r.TaskCode,
		ScheduledAt: time.UnixMilli(r.RunTime).In(loc), Attempt: r.Attempt, MaxAttempts: r.MaxAttempts,
		Source: Source(r.Source), Replica: s.opts.InstanceID, max: s.opts.MaxOutput,
	}
	timeout := time.Duration(t.row.TimeoutMs) * time.Millisecond
	s.pool.Submit(func() {
		defer s.attempts.Done()
		late := func(err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				s.log.Debug("handler stopped at its timeout", "task", r.TaskCode, "execution", r.ID)
				return
			}
			s.log.Warn("handler returned after its timeout; result ignored", "task", r.TaskCode, "execution", r.ID, "err", err)
		}
		out := executor.Call(s.handlerCtx, s.clock, timeout, func(ctx context.Context) error { return cfg.handler(ctx, run) }, late)
		s.mu.Lock()
		s.running[r.TaskCode]--
		s.mu.Unlock()
		fin := s.settle(r, out.Finished, out.Err, out.TimedOut(), "")
		fin.Output = run.Output()
		s.updates.finished(fin)
		attrs := []any{"task", r.TaskCode, "execution", r.ID, "attempt", r.Attempt, "status", fin.Status,
			"duration", out.Finished.Sub(out.Started), "lateness", out.Started.Sub(time.UnixMilli(r.RunTime))}
		switch {
		case out.Err != nil && fin.Status == store.StatusRetrying:
			s.log.Info("attempt failed; will retry", append(attrs, "next_attempt", time.UnixMilli(fin.NextAttemptMs), "err", out.Err)...)
		case out.Err != nil:
			s.log.Warn("execution failed", append(attrs, "err", out.Err)...)
		default:
			s.log.Debug("attempt succeeded", attrs...)
		}
	})
}

// settle decides how an attempt ends: success, a retry by the task's
// policy, or failure.
func (s *Scheduler) settle(r store.Execution, at time.Time, err error, timedOut bool, reason string) store.Finish {
	f := store.Finish{ID: r.ID, Attempt: r.Attempt, Result: store.Result{Status: store.StatusSucceeded, Reason: reason, FinishedMs: at.UnixMilli()}}
	if err == nil {
		return f
	}
	f.Error = err.Error()
	s.mu.Lock()
	t := s.tasks[r.TaskCode]
	s.mu.Unlock()
	switch {
	case r.Attempt < r.MaxAttempts && t != nil:
		f.Status = store.StatusRetrying
		f.NextAttemptMs = at.Add(t.backoff().Delay(r.Attempt, rand.Float64)).UnixMilli()
	case timedOut:
		f.Status = store.StatusTimedOut
	default:
		f.Status = store.StatusFailed
	}
	return f
}

// updateQueue batches status writes off the hot path. Nothing is dropped:
// a failed write is retried until Stop's context ends.
type updateQueue struct {
	s        *Scheduler
	flushing sync.Mutex // one flush at a time, so writes land in the order queued
	mu       sync.Mutex
	starts   []store.Start
	finishes []store.Finish
	skips    []skipUpdate
	kick     chan struct{}
	quit     chan struct{}
	done     chan struct{}
}

type skipUpdate struct {
	row    store.Execution
	reason string
	at     time.Time
}

func newUpdateQueue(s *Scheduler) *updateQueue {
	return &updateQueue{s: s, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

func (q *updateQueue) started(r store.Execution, at time.Time) {
	q.mu.Lock()
	q.starts = append(q.starts, store.Start{ID: r.ID, Replica: q.s.opts.InstanceID, StartedMs: at.UnixMilli()})
	q.mu.Unlock()
	q.poke()
}

func (q *updateQueue) finished(f store.Finish) {
	q.mu.Lock()
	q.finishes = append(q.finishes, f)
	q.mu.Unlock()
	q.poke()
}

func (q *updateQueue) skip(r store.Execution, reason string, at time.Time, why string) {
	q.s.log.Info("fire skipped", "task", r.TaskCode, "execution", r.ID, "reason", reason, "detail", why)
	q.mu.Lock()
	q.skips = append(q.skips, skipUpdate{r, reason, at})
	q.mu.Unlock()
	q.poke()
}

func (q *updateQueue) poke() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *updateQueue) start() { go q.loop() }

// loop writes what is queued, at most every 50ms, so a burst of fires
// becomes a few transactions instead of one write each.
func (q *updateQueue) loop() {
	defer close(q.done)
	for {
		select {
		case <-q.quit:
			return
		case <-q.kick:
		}
		if err := q.flush(context.Background()); err != nil {
			q.s.noteDB(err)
			pause(q.quit, time.Second)
			q.poke()
			continue
		}
		pause(q.quit, 50*time.Millisecond)
	}
}

// pause waits d of real time, or until quit closes. Batching is about the
// database's load, not about the schedule, so it does not follow the
// injected clock (a test that freezes time still sees its rows written).
func pause(quit chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-quit:
	case <-t.C:
	}
}

// flush writes starts before finishes, so that a fast attempt's start and
// end can land in the same round.
func (q *updateQueue) flush(ctx context.Context) error {
	q.flushing.Lock()
	defer q.flushing.Unlock()
	q.mu.Lock()
	starts, finishes, skips := q.starts, q.finishes, q.skips
	q.starts, q.finishes, q.skips = nil, nil, nil
	q.mu.Unlock()
	requeue := func(i, j int, k int) {
		q.mu.Lock()
		q.starts = append(starts[i:], q.starts...)
		q.finishes = append(finishes[j:], q.finishes...)
		q.skips = append(skips[k:], q.skips...)
		q.mu.Unlock()
	}
	// A first attempt that started and ended since the last round is one write.
	ended := map[int64]int{}
	for j, f := range finishes {
		if f.Attempt == 1 {
			ended[f.ID] = j
		}
	}
	merged := map[int]bool{}
	for i := range starts {
		if j, ok := ended[starts[i].ID]; ok {
			res := finishes[j].Result
			starts[i].Finish = &res
			merged[j] = true
		}
	}
	if len(merged) > 0 {
		rest := make([]store.Finish, 0, len(finishes)-len(merged))
		for j, f := range finishes {
			if !merged[j] {
				rest = append(rest, f)
			}
		}
		finishes = rest
	}
	if len(starts) > 0 {
		oks, err := q.s.store.MarkStarted(ctx, starts)
		if err != nil {
			requeue(0, 0, 0)
			return err
		}
		for i, ok := range oks {
			if !ok {
				q.s.log.Error("a started fire was claimed by another replica meanwhile: it may have run twice",
					"execution", starts[i].ID)
			}
		}
	}
	if len(finishes) > 0 {
		oks, err := q.s.store.FinishAttempts(ctx, finishes)
		if err != nil {
			requeue(len(starts), 0, 0)
			return err
		}
		for i, ok := range oks {
			if !ok {
				q.s.log.Warn("attempt result not recorded: the execution was settled elsewhere (timed out or rescued)",
					"execution", finishes[i].ID, "attempt", finishes[i].Attempt)
			}
		}
	}
	for k, sk := range skips {
		if _, err := q.s.store.SkipExecution(ctx, sk.row.ID, sk.row.Attempt, sk.reason, sk.at.UnixMilli()); err != nil {
			requeue(len(starts), len(finishes), k)
			return err
		}
	}
	return nil
}

// stop writes what is left, retrying until ctx ends.
func (q *updateQueue) stop(ctx context.Context) error {
	close(q.quit)
	<-q.done
	for {
		err := q.flush(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			q.mu.Lock()
			n := len(q.starts) + len(q.finishes) + len(q.skips)
			q.mu.Unlock()
			return fmt.Errorf("xtimer: stop: %d status updates not written: %w", n, errors.Join(err, ctx.Err()))
		}
		pause(make(chan struct{}), 200*time.Millisecond)
	}
}
