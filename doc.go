// Package xtimer runs a service's scheduled work on every replica, with each
// scheduled fire executed once across the fleet and every attempt recorded.
//
// Register handlers by task code and cron spec on a Scheduler, Start it on
// every replica, and each fire of each task runs once:
//
//	s, err := xtimer.New(xtimer.Options{DB: db, Redis: rdb, App: "billing"})
//	if err != nil {
//		return err
//	}
//	err = s.Register("billing.reconcile", "0 0 9 * * *", func(ctx context.Context, run *xtimer.Run) error {
//		return reconcile(ctx, run.ID, run.ScheduledAt) // run.ID is the same on every attempt
//	}, xtimer.WithTimeout(5*time.Minute), xtimer.WithRetry(3))
//	if err != nil {
//		return err
//	}
//	if err := s.Start(ctx); err != nil {
//		return err
//	}
//	defer s.Stop(context.Background())
//
// # Concepts
//
//   - A task is a named piece of scheduled work: a code that is stable
//     forever (history hangs on it), a cron spec, a handler (a Go func, or an
//     HTTP callback) and options. Tasks live in the table xtimer_tasks of the
//     app (Options.App), so every replica sees the same ones.
//   - A fire is one instant of one task's schedule: (app, task code, run
//     time). Every replica computes the same instants, because a schedule's
//     Next is a pure function of the spec.
//   - An execution is the row of a fire in xtimer_executions, one row per
//     fire, unique on (app, task, run time): its status, reason, attempt,
//     owner, times, output and error. Execution is its public view.
//   - An attempt is one run of a fire's handler. A retry is a further attempt
//     of the same execution, never a new row; Run.Attempt counts from 1.
//   - A bucket is a hash of the task code modulo Options.Buckets, the same
//     on every replica and every version.
//   - A slot is a (minute, bucket) pair. Each tick, the replica that takes a
//     slot's lock (Redis, or Options.Locker) records the slot's fires; the
//     unique key is the guard when the lock is unavailable.
//   - A replica is one process running a started Scheduler, with a row and a
//     heartbeat in xtimer_replicas. All replicas are equal; none leads.
//
// # Guarantees
//
//   - Once: a fire's handler starts at most once across replicas, restarts,
//     Redis loss, frozen processes and redeploys. It starts only after a
//     conditional update has marked the fire's row started by this replica
//     (the fence), so a replica that slept past its slot lock starts nothing.
//     With a reachable database and at least one live replica that has the
//     handler, it starts exactly once.
//   - Record, then run: no handler starts for a fire whose row is not
//     committed. With the database down nothing starts; when it is back,
//     missed fires follow the task's misfire policy (WithMisfire).
//   - Nothing lost: every fire ends in a row, succeeded, failed, timed_out,
//     or skipped with a reason (paused, overlap, misfire, rescheduled, task
//     deleted). A run whose replica died is settled by the retry policy with
//     reason "replica lost", and so is a fire it had claimed, up to its claim
//     lead (at most a second) before the run time, and not started yet: the
//     row says started, and no replica can tell whether the handler ran.
//     Fires a stopped or dead replica never claimed are run by another.
//   - Clear errors: a bad spec, code or option is refused with an error that
//     names the field and the value (ErrBadSpec, SpecError, OptionsError);
//     nothing panics.
//
// Handlers should still be idempotent where the outside world allows it: an
// attempt that ran and whose replica died before its result was written is
// settled by the retry policy, and a retry runs the handler again. Run.ID,
// the same on every attempt of a fire, is the key to store with the effect.
//
// # Lifecycle
//
// New checks the options and builds the Scheduler; nothing runs yet.
// Register adds handlers, before or after Start. Start creates the tables,
// records the registered tasks, catches up the slots nobody recorded within
// Options.CatchUpHorizon, and starts the engine; it waits for a database
// that arrives late, until its context ends. While it runs, Pause, Resume,
// SetSchedule, ResetSchedule and Trigger change a task for the whole fleet,
// and Executions, Tasks, Replicas and Health read its state. Stop stops
// claiming, lets running handlers finish until its context ends (then
// cancels theirs), and hands the fires it recorded and did not start to the
// other replicas:
//
//	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer cancel()
//	if err := s.Start(ctx); err != nil {
//		return err
//	}
//	<-ctx.Done()
//	stopCtx, done := context.WithTimeout(context.Background(), 30*time.Second)
//	defer done()
//	return s.Stop(stopCtx)
//
// A stopped Scheduler cannot be started again; New makes another.
//
// # Schedules
//
// Schedules come from package cron (ParseSchedule here): Unix cron and
// Spring-style specs with seconds, Quartz expressions (Quartz()),
// descriptors such as @daily and @every 30s, per-task time zones, and a
// daylight-saving rule under which a daily job runs exactly once a day.
//
// The examples directory has a zero-setup quickstart (SQLite and an
// in-process lock) and a multi-process cluster demonstration. How the engine
// works is in docs/architecture.md.
package xtimer
