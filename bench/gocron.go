package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	redislock "github.com/go-co-op/gocron-redis-lock/v2"
	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

// gocron v2 with its Redis distributed locker, configured the way the
// gocron-redis-lock README shows for "multiple instances":
//
//	locker, _ := redislock.NewRedisLocker(redisClient, redislock.WithTries(1))
//	s, _ := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//
// Every replica runs a scheduler with every task as a CronJob (six fields,
// seconds first, UTC) named by the task code: the locker's key is the job
// name. When a job's timer fires, the replica tries the lock once
// (WithTries(1); redsync's default of 32 tries would have the losers wait
// for the winner's release and run the fire again), runs the task if it
// got the lock and releases it when the task returns. The lock therefore
// excludes the other replicas only while the handler runs: a replica whose
// timer fires after the winner released runs the same fire again. gocron's
// Locker documentation says as much (the scheduler does not synchronise
// run times across instances); the benchmark measures it rather than
// working around it.
//
// Concurrency: gocron.WithLimitConcurrentJobs(env.Workers, LimitModeWait),
// the same bound as every other system's worker pool. Wait, not
// Reschedule: in LimitModeReschedule a fire that finds every runner busy
// is dropped, which would count as a miss caused by the benchmark's bound
// rather than by gocron.
//
// The scheduled instant: gocron does not give it to the task (it reaches
// only the optional SchedulerMonitor, through a callback that cannot be
// tied to one invocation reliably once runs queue behind the limit). The
// task records the latest instant of its own cron schedule at or before
// the moment it starts, computed with robfig/cron/v3 and the parser
// options gocron uses for CronJob(spec, true), in UTC. That is the instant
// gocron scheduled whenever the fire starts less than one schedule period
// late (1 s for "* * * * * *", 60 s for "0 * * * * *"); a later start is
// attributed to a later instant, its lateness under-reported by whole
// periods.
type gocronSystem struct{}

func newGocron() System { return gocronSystem{} }

func (gocronSystem) Name() string { return "gocron-redislock" }

func (gocronSystem) Run(ctx context.Context, env ReplicaEnv, tasks []TaskSpec, rec Recorder, ready func()) error {
	if env.RedisAddr == "" {
		return errors.New("gocron-redislock needs a Redis address")
	}
	workers := env.Workers
	if workers <= 0 {
		workers = 1
	}
	rdb := redis.NewClient(&redis.Options{Addr: env.RedisAddr, PoolSize: workers})
	defer rdb.Close()

	locker, err := redislock.NewRedisLocker(rdb, redislock.WithTries(1))
	if err != nil {
		return fmt.Errorf("gocron redis locker: %w", err)
	}
	s, err := gocron.NewScheduler(
		gocron.WithDistributedLocker(locker),
		gocron.WithLocation(time.UTC),
		gocron.WithLimitConcurrentJobs(uint(workers), gocron.LimitModeWait),
		gocron.WithStopTimeout(8*time.Second),
	)
	if err != nil {
		return fmt.Errorf("gocron scheduler: %w", err)
	}

	cache := map[string]*peerCron{}
	for _, t := range tasks {
		sched := cache[t.Spec]
		if sched == nil {
			if sched, err = parsePeerCron(t.Spec); err != nil {
				_ = s.Shutdown()
				return fmt.Errorf("task %s: %w", t.Code, err)
			}
			cache[t.Spec] = sched
		}
		code := t.Code
		_, err = s.NewJob(
			gocron.CronJob(t.Spec, true),
			gocron.NewTask(func() {
				started := time.Now()
				rec.Record(code, 0, sched.lastAtOrBefore(started), started)
			}),
			gocron.WithName(code),
		)
		if err != nil {
			_ = s.Shutdown()
			return fmt.Errorf("gocron job %s: %w", code, err)
		}
	}

	s.Start()
	ready()
	<-ctx.Done()
	// Shutdown stops the timers and waits for running tasks, at most the
	// stop timeout set above.
	if err := s.Shutdown(); err != nil {
		return fmt.Errorf("gocron shutdown: %w", err)
	}
	return nil
}

// peerCron is a task's cron schedule as gocron and River read it: robfig/
// cron/v3 with seconds, in UTC.
type peerCron struct {
	sched cron.Schedule
	// gap bounds the time between two consecutive fires (the largest of
	// the first few gaps): a window of gap+1s before t holds the latest
	// fire at or before t for every regular schedule.
	gap time.Duration
	// minGap is the smallest of those gaps (River's unique period).
	minGap time.Duration
}

// peerCronParser is the parser gocron builds for CronJob(spec, true).
var peerCronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func parsePeerCron(spec string) (*peerCron, error) {
	sched, err := peerCronParser.Parse("CRON_TZ=UTC " + spec)
	if err != nil {
		return nil, fmt.Errorf("cron spec %q: %w", spec, err)
	}
	c := &peerCron{sched: sched}
	t := sched.Next(time.Now().UTC())
	if t.IsZero() {
		return nil, fmt.Errorf("cron spec %q never fires", spec)
	}
	for range 8 {
		n := sched.Next(t)
		if n.IsZero() {
			break
		}
		g := n.Sub(t)
		c.gap = max(c.gap, g)
		if c.minGap == 0 || g < c.minGap {
			c.minGap = g
		}
		t = n
	}
	if c.gap == 0 {
		c.gap, c.minGap = time.Second, time.Second
	}
	return c, nil
}

// lastAtOrBefore is the latest fire of the schedule at or before t (zero
// if there is none within a year).
func (c *peerCron) lastAtOrBefore(t time.Time) time.Time {
	t = t.UTC()
	for w := c.gap + time.Second; w <= 400*24*time.Hour; w *= 2 {
		var last time.Time
		// Next is strictly after its argument; fires are whole seconds.
		for n := c.sched.Next(t.Add(-w)); !n.IsZero() && !n.After(t); n = c.sched.Next(n) {
			last = n
		}
		if !last.IsZero() {
			return last
		}
	}
	return time.Time{}
}
