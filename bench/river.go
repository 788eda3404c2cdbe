package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River periodic jobs on the run's PostgreSQL.
//
// Every replica runs a River client with the same PeriodicJobs, one per
// task, on a robfig/cron/v3 schedule (River's docs recommend that package
// for cron schedules; its Schedule is River's PeriodicSchedule). Only the
// elected leader's periodic job enqueuer inserts jobs; every replica works
// them from the default queue with MaxWorkers = env.Workers.
//
// Each periodic job is inserted with UniqueOpts{ByArgs, ByPeriod}: the
// unique args are the task code and the scheduled instant, and the period
// is the smallest gap between two fires of the task's schedule. Two leaders
// inserting the same fire during a failover (the old one not yet aware it
// lost its term) produce one job. River computes a ByPeriod bucket from the
// job's ScheduledAt when InsertOpts sets one, else from the insert time;
// the constructor does not set ScheduledAt because River then inserts the
// job as "scheduled" and only the leader's JobScheduler (every 5 s) makes
// it available, whereas left unset the enqueuer stamps scheduled_at with
// the fire instant on an "available" job that is fetched at once. So the
// bucket is the insert time's; the scheduled instant among the unique args
// keeps one fire from ever suppressing another.
//
// RunOnStart is off: it inserts one job at every leader election, at the
// election instant rather than at an instant of the schedule, which the
// benchmark would count as an unexpected extra fire; for every-second and
// every-minute tasks it recovers nothing the schedule does not.
//
// The scheduled instant: River's constructor takes no arguments. The
// enqueuer calls schedule.Next(now) when it starts, and after each insert
// schedule.Next(the fire just inserted); the constructor of a fire is
// called before the Next that follows it (river v0.51.2,
// internal/maintenance/periodic_job_enqueuer.go). So the schedule is
// wrapped: it remembers the last instant it returned, which is the fire
// the enqueuer is inserting when it next calls the constructor, and the
// constructor puts it in the args. Work records args.Scheduled, which is
// also the job's scheduled_at. If the remembered instant is not plausible
// (none yet, or more than a second ahead of now) the constructor falls
// back to the latest fire at or before now + 100 ms (the enqueuer's
// margin).
//
// Migrations: every replica runs rivermigrate up while holding a
// PostgreSQL advisory lock, so replicas started together apply the
// migrations once and the others find them applied (rivermigrate takes no
// lock of its own); no replica depends on another having started first.
//
// PostgreSQL only: River's drivers are pgx, database/sql with lib/pq, and
// SQLite; there is none for MySQL/MariaDB.
type riverSystem struct{}

func newRiver() System { return riverSystem{} }

func (riverSystem) Name() string { return "river" }

// riverFireArgs is the job of one fire of one task.
type riverFireArgs struct {
	Task      string    `json:"task" river:"unique"`
	Scheduled time.Time `json:"scheduled" river:"unique"`
}

func (riverFireArgs) Kind() string { return "bench_fire" }

type riverFireWorker struct {
	river.WorkerDefaults[riverFireArgs]
	rec Recorder
}

func (w *riverFireWorker) Work(_ context.Context, job *river.Job[riverFireArgs]) error {
	started := time.Now()
	w.rec.Record(job.Args.Task, 0, job.Args.Scheduled, started)
	return nil
}

// riverSchedule wraps a task's cron schedule and remembers the last
// instant it returned to the enqueuer.
type riverSchedule struct {
	cron *peerCron
	mu   sync.Mutex
	next time.Time
}

func (s *riverSchedule) Next(t time.Time) time.Time {
	n := s.cron.sched.Next(t)
	s.mu.Lock()
	s.next = n
	s.mu.Unlock()
	return n
}

// fire is the instant the enqueuer is inserting now.
func (s *riverSchedule) fire(now time.Time) time.Time {
	s.mu.Lock()
	n := s.next
	s.mu.Unlock()
	if !n.IsZero() && !n.After(now.Add(time.Second)) {
		return n
	}
	return s.cron.lastAtOrBefore(now.Add(100 * time.Millisecond))
}

// riverMigrateLock is the advisory lock key the replicas' migrations take.
const riverMigrateLock = 0x72697672 // "rivr"

func (riverSystem) Run(ctx context.Context, env ReplicaEnv, tasks []TaskSpec, rec Recorder, ready func()) error {
	if env.PostgresURL == "" {
		return errors.New("river needs PostgreSQL: it has no MySQL/MariaDB driver")
	}
	workers := env.Workers
	if workers <= 0 {
		workers = 1
	}
	// River logs to stdout by default, where the replica reports "ready":
	// its warnings go to stderr instead.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	pcfg, err := pgxpool.ParseConfig(env.PostgresURL)
	if err != nil {
		return fmt.Errorf("river postgres url: %w", err)
	}
	// The workers hold no connection while a handler runs; the rest are
	// for fetching, completing, electing and enqueuing.
	pcfg.MaxConns = int32(min(max(workers/4, 4), 20))
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("river pool: %w", err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)

	if err = riverMigrate(ctx, pool, driver, logger); err != nil {
		return err
	}

	workersReg := river.NewWorkers()
	if err = river.AddWorkerSafely(workersReg, &riverFireWorker{rec: rec}); err != nil {
		return err
	}
	cache := map[string]*peerCron{}
	periodic := make([]*river.PeriodicJob, 0, len(tasks))
	for _, t := range tasks {
		c := cache[t.Spec]
		if c == nil {
			if c, err = parsePeerCron(t.Spec); err != nil {
				return fmt.Errorf("task %s: %w", t.Code, err)
			}
			cache[t.Spec] = c
		}
		sched := &riverSchedule{cron: c}
		code := t.Code
		unique := river.UniqueOpts{ByArgs: true, ByPeriod: max(c.minGap, time.Second)}
		periodic = append(periodic, river.NewPeriodicJob(sched, func() (river.JobArgs, *river.InsertOpts) {
			return riverFireArgs{Task: code, Scheduled: sched.fire(time.Now())},
				&river.InsertOpts{UniqueOpts: unique}
		}, &river.PeriodicJobOpts{RunOnStart: false}))
	}

	client, err := river.NewClient(driver, &river.Config{
		Logger:       logger,
		PeriodicJobs: periodic,
		Queues:       map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:      workersReg,
	})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	// Start's context is not ctx: cancelling it would cancel running jobs
	// (River's abrupt stop); the graceful Stop below comes first.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("river start: %w", err)
	}
	ready()
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		// Past the grace period: cancel what still runs.
		hardCtx, hardCancel := context.WithTimeout(context.Background(), time.Second)
		defer hardCancel()
		_ = client.StopAndCancel(hardCtx)
		return fmt.Errorf("river stop: %w", err)
	}
	return nil
}

// riverMigrate applies River's migrations while holding a session-level
// advisory lock on a connection of its own, so that replicas migrating at
// once apply them once (River's migrations cannot share one transaction:
// 006 adds an enum value and uses it).
func riverMigrate(ctx context.Context, pool *pgxpool.Pool, driver *riverpgxv5.Driver, logger *slog.Logger) error {
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(riverMigrateLock)); err != nil {
		return fmt.Errorf("river migrate lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(riverMigrateLock))
	}()
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}
