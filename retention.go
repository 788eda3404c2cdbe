package xtimer

import (
	"context"
	"errors"
	"slices"
	"time"
)

// This file is retention: every RetentionInterval one replica of the app
// sweeps the executions past Options.Retention (and past each task's
// RetentionPerTask newest) and the slots nobody will read again.
//
// Exactly one replica sweeps at a time: the sweep holds the lock
// "xtimer:{app}:retention", refreshing it between batches; a replica that
// does not get it skips the round. The sweep deletes in batches of
// RetentionBatch rows, one short transaction each, pausing between them so
// that the engine's inserts and updates interleave with it: deleting
// millions of rows never blocks the fires of the minute.
//
// What is kept: executions that are not final (scheduled, running,
// retrying), however old; and xtimer_actions, the operators' audit log,
// which is small (one row per operator action) and which audits need for
// longer than executions: it is never deleted by xtimer.

// Defaults of the retention options.
const (
	DefaultRetention         = 30 * 24 * time.Hour
	DefaultRetentionBatch    = 1000
	DefaultRetentionInterval = time.Minute
)

const (
	// retentionLockTTL bounds how long a replica that died mid-sweep keeps
	// the others from sweeping; the sweep refreshes the lock every third.
	retentionLockTTL = 30 * time.Second
	// retentionPause is the breath between two batches: real time, not the
	// scheduler's clock, since it is there for the database's sake.
	retentionPause = 20 * time.Millisecond
)

func (s *Scheduler) retentionKey() string { return "xtimer:" + s.opts.App + ":retention" }

// retentionLoop sweeps every RetentionInterval until ctx ends.
func (s *Scheduler) retentionLoop(ctx context.Context) {
	defer s.loops.Done()
	timer := s.clock.NewTimer(s.opts.RetentionInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		s.sweep(ctx)
		timer.Reset(s.opts.RetentionInterval)
	}
}

// sweepStats is what one sweep deleted.
type sweepStats struct {
	executions, slots int64
}

// sweep runs one round of retention if this replica gets the lock.
func (s *Scheduler) sweep(ctx context.Context) {
	if s.opts.Retention < 0 && s.opts.RetentionPerTask == 0 {
		return
	}
	lock, err := s.locker.Obtain(ctx, s.retentionKey(), retentionLockTTL)
	if err != nil {
		if !errors.Is(err, ErrLockHeld) && ctx.Err() == nil {
			s.log.Warn("retention skips a round: lock unavailable", "err", err)
		}
		return
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = lock.Release(rctx)
	}()
	start := s.clock.Now()
	sw := &sweeper{s: s, lock: lock, refreshed: start}
	stats, err := sw.run(ctx, start)
	took := s.clock.Now().Sub(start)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("retention sweep stopped", "err", err, "executions", stats.executions, "slots", stats.slots, "took", took)
	case stats.executions > 0 || stats.slots > 0:
		s.log.Info("retention sweep", "executions", stats.executions, "slots", stats.slots, "took", took)
	default:
		s.log.Debug("retention sweep found nothing to delete", "took", took)
	}
}

// sweeper deletes batch after batch, keeping the lock.
type sweeper struct {
	s         *Scheduler
	lock      Lock
	refreshed time.Time
}

func (sw *sweeper) run(ctx context.Context, now time.Time) (sweepStats, error) {
	s := sw.s
	app, batch := s.opts.App, s.opts.RetentionBatch
	var st sweepStats
	if s.opts.Retention >= 0 {
		cut := now.Add(-s.opts.Retention).UnixMilli()
		n, err := sw.drain(ctx, func(ctx context.Context) (int64, error) {
			n, err := s.store.DeleteExecutionsBefore(ctx, app, cut, batch)
			s.metrics.retentionDeleted(int(n))
			return n, err
		})
		st.executions += n
		if err != nil {
			return st, err
		}
		// The catch-up at Start reads slots back to CatchUpHorizon only.
		slotCut := now.Add(-max(s.opts.Retention, s.opts.CatchUpHorizon)).UnixMilli()
		n, err = sw.drain(ctx, func(ctx context.Context) (int64, error) {
			return s.store.DeleteSlotsBefore(ctx, app, slotCut, batch)
		})
		st.slots += n
		if err != nil {
			return st, err
		}
	}
	if keep := s.opts.RetentionPerTask; keep > 0 {
		s.mu.Lock()
		codes := make([]string, 0, len(s.tasks))
		for code := range s.tasks {
			codes = append(codes, code)
		}
		s.mu.Unlock()
		slices.Sort(codes)
		for _, code := range codes {
			n, err := sw.drain(ctx, func(ctx context.Context) (int64, error) {
				n, err := s.store.DeleteBeyondCount(ctx, app, code, keep, batch)
				s.metrics.retentionDeleted(int(n))
				return n, err
			})
			st.executions += n
			if err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// drain calls del until it deletes less than a batch, pausing between
// calls and refreshing the lock. It stops when the lock is lost: another
// replica may be sweeping by then.
func (sw *sweeper) drain(ctx context.Context, del func(context.Context) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := del(ctx)
		total += n
		if err != nil || n < int64(sw.s.opts.RetentionBatch) {
			return total, err
		}
		if now := sw.s.clock.Now(); now.Sub(sw.refreshed) >= retentionLockTTL/3 {
			if err := sw.lock.Refresh(ctx, retentionLockTTL); err != nil {
				return total, err
			}
			sw.refreshed = now
		}
		pause := time.NewTimer(retentionPause)
		select {
		case <-ctx.Done():
			pause.Stop()
			return total, ctx.Err()
		case <-pause.C:
		}
	}
}
