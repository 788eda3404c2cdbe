package engine

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
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
//
// Roll-ups (unless Options.NoRollups; internal/store/rollup.go): the sweep first
// rolls up, oldest first, every UTC day of the app that has executions, is
// not rolled up yet and is settled: it ended at least CatchUpHorizon (and
// a minute) ago, so that no catch-up can record a fire on it any more, and
// every execution of it is final. A day with an execution still live is
// tried again on the next sweep. Executions the sweep deletes from a day
// not rolled up yet (the per-task cap, a day with a stuck row) are counted
// by the transaction that deletes them. Either way each final execution
// is counted once and never lost.
//
// The executions past Retention are deleted oldest first with a cursor:
// each batch starts at the run_time where the previous one stopped.

const (
	// retentionLockTTL bounds how long a replica that died mid-sweep keeps
	// the others from sweeping; the sweep refreshes the lock every third.
	retentionLockTTL = 30 * time.Second
	// retentionPause is the breath between two batches: real time, not the
	// scheduler's clock, since it is there for the database's sake.
	retentionPause = 20 * time.Millisecond
	// rollupMargin is added to CatchUpHorizon before a day counts as
	// settled: the catch-up's own clock may be a little ahead.
	rollupMargin = time.Minute
)

// retention is the retention sweeper: a component with one loop, a sweep
// every RetentionInterval. Its state is its configuration; a round's state
// is a sweeper.
type retention struct {
	startstop.Base
	store   *store.Store
	locker  Locker
	clock   Clock
	log     *slog.Logger
	metrics *metrics
	// taskCodes lists the tasks of the app as this replica's view has them
	// (for RetentionPerTask).
	taskCodes func() []string

	app               string
	keep              time.Duration // Options.Retention
	perTask, batch    int
	interval, catchUp time.Duration
	noRollups         bool
}

func newRetention(s *Engine) *retention {
	o := s.opts
	return &retention{store: s.store, locker: s.locker, clock: s.clock, log: s.log, metrics: s.metrics, taskCodes: s.view.taskCodes,
		app: o.App, keep: o.Retention, perTask: o.RetentionPerTask, batch: o.RetentionBatch, interval: o.RetentionInterval,
		catchUp: o.CatchUpHorizon, noRollups: o.NoRollups}
}

func (r *retention) start() error {
	return r.Base.Start(context.Background(), startstop.Every(r.clock, r.interval, func(ctx context.Context, _ time.Time) { r.sweep(ctx) }))
}

func (r *retention) lockKey() string { return "xtimer:" + r.app + ":retention" }

// sweepStats is what one sweep rolled up and deleted.
type sweepStats struct {
	days              int
	executions, slots int64
}

// sweep runs one round of retention if this replica gets the lock.
func (r *retention) sweep(ctx context.Context) {
	if r.keep < 0 && r.perTask == 0 {
		return
	}
	lock, err := r.locker.Obtain(ctx, r.lockKey(), retentionLockTTL)
	if err != nil {
		if !errors.Is(err, ErrLockHeld) && ctx.Err() == nil {
			r.log.Warn("retention skips a round: lock unavailable", "err", err)
		}
		return
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = lock.Release(rctx)
	}()
	start := r.clock.Now()
	sw := &sweeper{r: r, lock: lock, refreshed: start}
	stats, err := sw.run(ctx, start)
	took := r.clock.Now().Sub(start)
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Warn("retention sweep stopped", "err", err, "rolled_up_days", stats.days, "executions", stats.executions, "slots", stats.slots, "took", took)
	case stats.executions > 0 || stats.slots > 0 || stats.days > 0:
		r.log.Info("retention sweep", "rolled_up_days", stats.days, "executions", stats.executions, "slots", stats.slots, "took", took)
	default:
		r.log.Debug("retention sweep found nothing to delete", "took", took)
	}
}

// sweeper deletes batch after batch, keeping the lock.
type sweeper struct {
	r         *retention
	lock      Lock
	refreshed time.Time
}

func (sw *sweeper) run(ctx context.Context, now time.Time) (sweepStats, error) {
	r := sw.r
	app, batch := r.app, r.batch
	var st sweepStats
	if !r.noRollups {
		var err error
		if st.days, err = sw.rollup(ctx, now); err != nil {
			return st, err
		}
	}
	if r.keep >= 0 {
		cut := now.Add(-r.keep).UnixMilli()
		from := int64(math.MinInt64)
		n, err := sw.drain(ctx, func(ctx context.Context) (int64, error) {
			n, last, err := r.store.DeleteExecutionsBefore(ctx, app, from, cut, batch)
			if n > 0 {
				from = last
			}
			r.metrics.retentionDeleted(int(n))
			return n, err
		})
		st.executions += n
		if err != nil {
			return st, err
		}
		// The catch-up at Start reads slots back to CatchUpHorizon only.
		slotCut := now.Add(-max(r.keep, r.catchUp)).UnixMilli()
		n, err = sw.drain(ctx, func(ctx context.Context) (int64, error) {
			return r.store.DeleteSlotsBefore(ctx, app, slotCut, batch)
		})
		st.slots += n
		if err != nil {
			return st, err
		}
	}
	if keep := r.perTask; keep > 0 {
		codes := r.taskCodes()
		slices.Sort(codes)
		for _, code := range codes {
			n, err := sw.drain(ctx, func(ctx context.Context) (int64, error) {
				n, err := r.store.DeleteBeyondCount(ctx, app, code, keep, batch)
				r.metrics.retentionDeleted(int(n))
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

// rollup rolls up the settled days of the app that are not yet, oldest
// first (see the top of this file), and returns how many it rolled up.
func (sw *sweeper) rollup(ctx context.Context, now time.Time) (int, error) {
	r := sw.r
	app := r.app
	// The last settled day ended CatchUpHorizon and a margin ago.
	last := store.DayOf(now.Add(-r.catchUp-rollupMargin).UnixMilli()) - 1
	day, ok, err := r.store.NextExecutionDay(ctx, app, math.MinInt32) // from the oldest
	if err != nil || !ok || day > last {
		return 0, err
	}
	done, err := r.store.RolledUpDays(ctx, app, day, last)
	if err != nil {
		return 0, err
	}
	var rolled int
	for day <= last {
		if _, found := slices.BinarySearch(done, day); found {
			day++
			continue
		}
		next, ok, err := r.store.NextExecutionDay(ctx, app, day)
		if err != nil || !ok || next > last {
			return rolled, err
		}
		if next != day {
			day = next
			continue
		}
		counted, err := r.store.RollupDay(ctx, app, day)
		switch {
		case errors.Is(err, store.ErrDayNotFinal):
			r.log.Debug("retention rolls up a day later: executions not final", "day", dayName(day), "err", err)
		case err != nil:
			return rolled, err
		default:
			rolled++
			r.log.Debug("retention rolled up a day", "day", dayName(day), "executions", counted)
		}
		if err := sw.keepLock(ctx); err != nil {
			return rolled, err
		}
		day++
	}
	return rolled, nil
}

// dayName writes a Unix day number as a date, for the logs.
func dayName(day int64) string {
	return time.UnixMilli(store.DayStartMs(day)).UTC().Format(time.DateOnly)
}

// keepLock refreshes the sweep's lock when a third of its TTL has passed.
func (sw *sweeper) keepLock(ctx context.Context) error {
	now := sw.r.clock.Now()
	if now.Sub(sw.refreshed) < retentionLockTTL/3 {
		return nil
	}
	if err := sw.lock.Refresh(ctx, retentionLockTTL); err != nil {
		return err
	}
	sw.refreshed = now
	return nil
}

// drain calls del until it deletes less than a batch, pausing between
// calls and refreshing the lock. It stops when the lock is lost: another
// replica may be sweeping by then.
func (sw *sweeper) drain(ctx context.Context, del func(context.Context) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := del(ctx)
		total += n
		if err != nil || n < int64(sw.r.batch) {
			return total, err
		}
		if err := sw.keepLock(ctx); err != nil {
			return total, err
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
