package main

import (
	"context"
	"time"
)

// System is one scheduler under test, as one replica process runs it.
// Every replica process of a run calls Run with the same tasks; the
// handler of each task calls rec.Record once per invocation, before doing
// anything else.
type System interface {
	// Name is the system's name in the results ("xtimer-postgres",
	// "gocron-redislock", "river", "robfig-setnx").
	Name() string
	// Run starts the system in this process with tasks, returns nil once it
	// runs (ready reports startup), and keeps running until ctx ends; it
	// then stops the system gracefully within 10 s. Errors are fatal for
	// the replica.
	Run(ctx context.Context, env ReplicaEnv, tasks []TaskSpec, rec Recorder, ready func()) error
}

// ReplicaEnv is what the harness gives a replica process: its number and
// the private services it started for this run (never the machine's).
type ReplicaEnv struct {
	Replica     int    // 0..R-1
	RedisAddr   string // host:port of the run's own redis-server
	PostgresURL string // postgres://...; "" when the run has no PostgreSQL
	MySQLDSN    string // go-sql-driver DSN; "" when the run has no MariaDB
	// Workers bounds the handlers running at once on this replica, the
	// same for every system.
	Workers int
}

// TaskSpec is one task: a code and a six-field cron spec with seconds
// ("* * * * * *", "0 * * * * *"), in UTC.
type TaskSpec struct {
	Code string
	Spec string
	// Shards splits each fire into that many shards (xtimer's
	// WithShards); 0 or 1 for whole fires, the only kind the peers have.
	Shards int
}

// Recorder records a handler invocation outside the system under test.
type Recorder interface {
	// Record notes that shard shard of task's fire scheduled for
	// scheduled started at started on this replica (shard 0 for a fire
	// that is not sharded). scheduled is the instant the system meant to
	// run (truncated to the second when the system does not say).
	Record(task string, shard int, scheduled, started time.Time)
}

// The constructors, one file each: newXtimer(dialect) in xtimer.go,
// newBaseline() in baseline.go, newGocron() in gocron.go, newRiver() in
// river.go. newSystem (run.go) picks one by name.
