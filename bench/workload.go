package main

import (
	"time"
)

// profile sizes every workload of a run of the harness.
type profile struct {
	name      string
	systems   []string
	workloads []string
	replicas  int
	workers   int
	warmup    time.Duration // steady, failover: after the last replica is ready
	tail      time.Duration // after the window, before SIGTERM: late fires still land

	steadyTasks   int
	steadyWindow  time.Duration
	burstTasks    int
	burstLead     time.Duration // replicas start this long before the burst at least
	burstAfter    time.Duration // measured after the burst: late fires
	scaleTasks    []int
	scaleIdle     time.Duration
	failTasks     int
	failWindow    time.Duration
	shardedTasks  int // sharded: tasks every second,
	shards        int // each fire split into this many shards (WithShards)
	shardedWindow time.Duration
	rampSteps     []int         // throughput: tasks, all every second, of each step
	rampStep      time.Duration // throughput: measured window of a step
	readyTimeout  time.Duration
	scaleReadyMax time.Duration
}

var allWorkloads = []string{"steady", "burst", "scale", "failover", "throughput", "sharded"}

var profiles = map[string]profile{
	// smoke is for CI: correctness of the harness and of xtimer, no timing.
	"smoke": {
		name: "smoke", systems: []string{"xtimer-postgres", "xtimer-mysql", "robfig-setnx"},
		workloads: []string{"steady", "failover"}, replicas: 3, workers: 64,
		warmup: 5 * time.Second, tail: 2 * time.Second,
		steadyTasks: 50, steadyWindow: 8 * time.Second,
		failTasks: 50, failWindow: 12 * time.Second,
		shardedTasks: 10, shards: 16, shardedWindow: 8 * time.Second, // not run by default: -workloads sharded
		readyTimeout: time.Minute,
	},
	"quick": {
		name: "quick", systems: systemNames, workloads: allWorkloads, replicas: 3, workers: 64,
		warmup: 5 * time.Second, tail: 2 * time.Second,
		steadyTasks: 1000, steadyWindow: 20 * time.Second,
		burstTasks: 10000, burstLead: 30 * time.Second, burstAfter: 5 * time.Second,
		scaleTasks: []int{10_000, 100_000}, scaleIdle: 15 * time.Second,
		failTasks: 1000, failWindow: 20 * time.Second,
		rampSteps: []int{1000, 2000, 5000, 10000, 20000}, rampStep: 8 * time.Second,
		shardedTasks: 100, shards: 16, shardedWindow: 20 * time.Second,
		readyTimeout: time.Minute, scaleReadyMax: 90 * time.Second,
	},
	"full": {
		name: "full", systems: systemNames, workloads: allWorkloads, replicas: 3, workers: 64,
		warmup: 5 * time.Second, tail: 3 * time.Second,
		steadyTasks: 1000, steadyWindow: 60 * time.Second,
		burstTasks: 10000, burstLead: 40 * time.Second, burstAfter: 20 * time.Second,
		scaleTasks: []int{10_000, 100_000, 1_000_000}, scaleIdle: 60 * time.Second,
		failTasks: 1000, failWindow: 60 * time.Second,
		rampSteps: []int{1000, 2000, 5000, 10000, 20000}, rampStep: 20 * time.Second,
		shardedTasks: 100, shards: 16, shardedWindow: 60 * time.Second,
		readyTimeout: 3 * time.Minute, scaleReadyMax: 10 * time.Minute,
	},
}

// plans are the runs of one system and workload: one, or one per scale
// size.
func (pr profile) plans(system, workload string) []plan {
	switch workload {
	case "steady":
		return []plan{{system: system, workload: workload, tasks: pr.steadyTasks, spec: "* * * * * *",
			window: pr.steadyWindow, ready: pr.readyTimeout}}
	case "failover":
		return []plan{{system: system, workload: workload, tasks: pr.failTasks, spec: "* * * * * *",
			window: pr.failWindow, kill: true, ready: pr.readyTimeout}}
	case "burst":
		return []plan{{system: system, workload: workload, tasks: pr.burstTasks, lead: pr.burstLead,
			topMinute: true, window: time.Second, afterFire: pr.burstAfter, ready: pr.readyTimeout,
			// At a top of minute planned by a running fleet (bench/README.md):
			// the run ends before the next one.
			specAt: func(time.Time) string { return "0 * * * * *" }}}
	case "scale":
		var ps []plan
		for _, n := range pr.scaleTasks {
			ps = append(ps, plan{system: system, workload: workload, tasks: n, spec: "0 0 3 * * *",
				idle: pr.scaleIdle, ready: pr.scaleReadyMax})
		}
		return ps
	case "sharded":
		// steady with every task WithShards(shards): shards × tasks runs a
		// second. Only xtimer shards; the peers' runs are n/a (hasShards).
		if pr.shardedTasks == 0 {
			return nil
		}
		return []plan{{system: system, workload: workload, tasks: pr.shardedTasks, shards: pr.shards,
			spec: "* * * * * *", window: pr.shardedWindow, ready: pr.readyTimeout}}
	case "throughput":
		// One run per step, each a steady run at that rate; the caller
		// stops at the first step that fails (throughputPass).
		var ps []plan
		for _, n := range pr.rampSteps {
			ps = append(ps, plan{system: system, workload: workload, tasks: n, spec: "* * * * * *",
				window: pr.rampStep, ready: pr.readyTimeout})
		}
		return ps
	}
	return nil
}
