package main

import "fmt"

// systemNames are the systems the harness knows, in table order.
var systemNames = []string{"xtimer-postgres", "xtimer-mysql", "robfig-setnx", "gocron-redislock", "river", "asynq"}

// newSystem returns the system called name.
func newSystem(name string) (System, error) {
	switch name {
	case "xtimer-postgres":
		return newXtimer("postgres"), nil
	case "xtimer-mysql":
		return newXtimer("mysql"), nil
	case "robfig-setnx":
		return newBaseline(), nil
	case "gocron-redislock":
		return newGocron(), nil
	case "river":
		return newRiver(), nil
	case "asynq":
		return newAsynq(), nil
	}
	return nil, fmt.Errorf("unknown system %q (known: %v)", name, systemNames)
}

// needs says which databases a run of system starts beside its Redis:
// every run has a redis-server (the Redis-free systems simply leave it
// idle), PostgreSQL for xtimer-postgres and River, MariaDB for
// xtimer-mysql.
func needs(system string) (postgres, mysql bool) {
	switch system {
	case "xtimer-postgres", "river":
		return true, false
	case "xtimer-mysql":
		return false, true
	}
	return false, false
}

// hasShards says whether system can split a fire into shards (the
// sharded workload): xtimer only.
func hasShards(system string) bool {
	return system == "xtimer-postgres" || system == "xtimer-mysql"
}

// hasHistory says whether system keeps executions the history condition
// can pre-fill: xtimer only.
func hasHistory(system string) bool {
	return system == "xtimer-postgres" || system == "xtimer-mysql"
}

// distinctNA is why system cannot run the distinct workload ("" when it
// can): asynq's cron has minute granularity.
func distinctNA(system string) string {
	if system == "asynq" {
		return "asynq's cron has minute granularity: a task's own second of the day cannot be expressed"
	}
	return ""
}
