package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynq v0.26.0 periodic tasks on the run's Redis.
//
// Every replica runs an asynq.Scheduler that registers every task, and an
// asynq.Server that works the default queue with Concurrency = Workers.
// The Scheduler is robfig/cron/v3 with its standard parser (cron.New with
// only a location: five fields, minute granularity, plus descriptors such
// as "@every 1s"), and at each fire it enqueues the task it was given at
// Register, the same type, payload and options every time.
//
// Several schedulers: asynq's docs say to run one scheduler per schedule
// ("you'd end up with duplicate tasks" otherwise, wiki "Periodic Tasks")
// and give the Unique option for de-duplication (README, wiki "Unique
// Tasks"). Each task is registered with asynq.Unique(period), the task's
// smallest gap between fires (1 s at least, asynq's minimum): the first
// replica's enqueue of a fire takes the unique lock (queue, type,
// payload) and the others' get ErrDuplicateTask while the lock lives.
// The lock is released when the task is processed successfully (Unique's
// doc), so a replica whose timer fires after the winner's handler
// returned enqueues the fire again: duplicates are reported, not worked
// around. TaskID + Retention, the maintainer's workaround for several
// PeriodicTaskManagers (hibiken/asynq issue 395), needs an ID per fire,
// which a Scheduler entry cannot give: its task and options are fixed at
// Register, so a fixed TaskID would block every later fire while the
// completed task is retained.
//
// Schedules: a six-field spec with seconds is mapped to what the parser
// takes: "* * * * * *" to "@every 1s" (robfig's ConstantDelaySchedule
// rounds to whole seconds, so it fires on every whole second), a spec
// whose seconds field is "0" to its last five fields; any other seconds
// field (the distinct workload's "S M H * * *") cannot be expressed and
// the run is n/a.
//
// The scheduled instant: asynq does not give it to the handler. As for
// gocron, the handler records the latest instant of the task's own
// schedule at or before its start (peerCron.lastAtOrBefore, gocron.go):
// exact while the handler starts less than one period late.
//
// The Server is at its defaults otherwise: when every queue is empty its
// processor checks for new tasks every TaskCheckInterval (1 s), which
// shows in the lateness of the first fire after an idle spell.
type asynqSystem struct{}

func newAsynq() System { return asynqSystem{} }

func (asynqSystem) Name() string { return "asynq" }

// asynqTaskType is the type of every fire's task; the payload is the task
// code.
const asynqTaskType = "bench:fire"

// asynqSpec maps a six-field spec with seconds to one asynq's Scheduler
// parses.
func asynqSpec(spec string) (string, error) {
	f := strings.Fields(spec)
	if len(f) != 6 {
		return "", fmt.Errorf("asynq: spec %q: want six fields", spec)
	}
	switch {
	case spec == "* * * * * *":
		return "@every 1s", nil
	case f[0] == "0":
		return strings.Join(f[1:], " "), nil
	}
	return "", fmt.Errorf("asynq: spec %q fires at second %s of a minute: asynq's cron has minute granularity (and @every, relative to its start)", spec, f[0])
}

func (asynqSystem) Run(ctx context.Context, env ReplicaEnv, tasks []TaskSpec, rec Recorder, ready func()) error {
	if env.RedisAddr == "" {
		return errors.New("asynq needs a Redis address")
	}
	workers := env.Workers
	if workers <= 0 {
		workers = 1
	}
	// asynq opens and closes its own clients from the options (given a
	// shared client, it logs an error at every Shutdown).
	conn := asynq.RedisClientOpt{Addr: env.RedisAddr, PoolSize: workers + 10}
	ping := redis.NewClient(&redis.Options{Addr: env.RedisAddr})
	err := ping.Ping(ctx).Err()
	_ = ping.Close()
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}

	cache := map[string]*peerCron{}
	scheds := make(map[string]*peerCron, len(tasks))
	type entry struct{ spec, code string }
	entries := make([]entry, 0, len(tasks))
	for _, t := range tasks {
		c := cache[t.Spec]
		if c == nil {
			if c, err = parsePeerCron(t.Spec); err != nil {
				return fmt.Errorf("task %s: %w", t.Code, err)
			}
			cache[t.Spec] = c
		}
		spec, err := asynqSpec(t.Spec)
		if err != nil {
			return err
		}
		scheds[t.Code] = c
		entries = append(entries, entry{spec, t.Code})
	}

	srv := asynq.NewServer(conn, asynq.Config{
		Concurrency:     workers,
		LogLevel:        asynq.WarnLevel,
		ShutdownTimeout: 8 * time.Second,
	})
	handler := asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		started := time.Now()
		code := string(t.Payload())
		c := scheds[code]
		if c == nil {
			return fmt.Errorf("asynq: fire of unknown task %q", code)
		}
		rec.Record(code, 0, c.lastAtOrBefore(started), started)
		return nil
	})
	if err := srv.Start(handler); err != nil {
		return fmt.Errorf("asynq server: %w", err)
	}
	sch := asynq.NewScheduler(conn, &asynq.SchedulerOpts{Location: time.UTC, LogLevel: asynq.WarnLevel})
	for _, e := range entries {
		unique := max(scheds[e.code].minGap, time.Second)
		if _, err := sch.Register(e.spec, asynq.NewTask(asynqTaskType, []byte(e.code)), asynq.Unique(unique)); err != nil {
			srv.Shutdown()
			return fmt.Errorf("asynq register %s (%s): %w", e.code, e.spec, err)
		}
	}
	if err := sch.Start(); err != nil {
		srv.Shutdown()
		return fmt.Errorf("asynq scheduler: %w", err)
	}
	ready()
	<-ctx.Done()
	sch.Shutdown()
	srv.Shutdown() // waits for running handlers, ShutdownTimeout at most
	return nil
}
