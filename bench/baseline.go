package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

// baselineSystem is the hand-rolled scheduler many services run today:
// robfig/cron/v3 on every replica (seconds field, UTC), and before each
// fire a Redis SET key NX EX 3600 with key "baseline:<task>:<scheduled
// unix seconds>"; the replica whose SET succeeds runs the handler, the
// others skip the fire. There is no record of fires, no catch-up and no
// failover beyond "another replica's SET wins next time": a fire whose
// winner dies mid-run is lost, which is what the comparison is about.
//
// robfig passes a job no scheduled time, so the job computes it: the
// latest instant of its schedule at or before the start, as the gocron
// adapter does (peerCron.lastAtOrBefore, gocron.go). That is the entry's
// own Next exactly while the job starts less than one period late (1 s
// for every-second tasks); robfig itself skips fires it is later than
// that for.
type baselineSystem struct{}

func newBaseline() System { return baselineSystem{} }

func (baselineSystem) Name() string { return "robfig-setnx" }

func (baselineSystem) Run(ctx context.Context, env ReplicaEnv, tasks []TaskSpec, rec Recorder, ready func()) error {
	rdb := redis.NewClient(&redis.Options{Addr: env.RedisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	c := cron.New(cron.WithSeconds(), cron.WithLocation(time.UTC))
	// Workers bounds the jobs running at once, as every system's pool does
	// (robfig itself starts a goroutine per fire without bound).
	sem := make(chan struct{}, env.Workers)
	schedules := map[string]*peerCron{} // one parse per distinct spec
	for _, t := range tasks {
		sched, ok := schedules[t.Spec]
		if !ok {
			var err error
			if sched, err = parsePeerCron(t.Spec); err != nil {
				return fmt.Errorf("task %s: %w", t.Code, err)
			}
			schedules[t.Spec] = sched
		}
		code := t.Code
		c.Schedule(sched.sched, cron.FuncJob(func() {
			// The instant first, before waiting for a worker: robfig
			// started this goroutine at the fire.
			at := sched.lastAtOrBefore(time.Now())
			sem <- struct{}{}
			defer func() { <-sem }()
			key := "baseline:" + code + ":" + strconv.FormatInt(at.Unix(), 10)
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			won, err := rdb.SetNX(sctx, key, env.Replica, time.Hour).Result()
			cancel()
			if err != nil || !won {
				return
			}
			rec.Record(code, 0, at, time.Now())
		}))
	}
	c.Start()
	ready()
	<-ctx.Done()
	select {
	case <-c.Stop().Done():
	case <-time.After(10 * time.Second):
	}
	return nil
}
