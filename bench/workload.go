package main

import (
	"fmt"
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
	// distinct: tasks, each with its own daily time (distinctSpec),
	// measured over distinctWindow after the fleet is ready; 0: not sized.
	distinctTasks  int
	distinctWindow time.Duration
	// history: the executions rows seeded before each steady and
	// throughput run of an xtimer system, one run per entry (0: empty
	// tables). The peers run once, without.
	history []int64
}

var allWorkloads = []string{"steady", "burst", "scale", "distinct", "failover", "throughput", "sharded"}

var profiles = map[string]profile{
	// smoke is for CI: correctness of the harness and of xtimer, no timing.
	"smoke": {
		name: "smoke", systems: []string{"xtimer-postgres", "xtimer-mysql", "robfig-setnx"},
		workloads: []string{"steady", "failover"}, replicas: 3, workers: 64,
		warmup: 5 * time.Second, tail: 2 * time.Second,
		steadyTasks: 50, steadyWindow: 8 * time.Second,
		failTasks: 50, failWindow: 12 * time.Second,
		shardedTasks: 10, shards: 16, shardedWindow: 8 * time.Second, // not run by default: -workloads sharded
		readyTimeout: time.Minute, history: []int64{0},
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
		distinctTasks: 100_000, distinctWindow: 30 * time.Second,
		history: []int64{0},
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
		distinctTasks: 1_000_000, distinctWindow: 60 * time.Second,
		history: []int64{0, 10_000_000},
	},
}

// plans are the runs of one system and workload: one, one per scale
// size, or (steady, throughput) one per history size.
func (pr profile) plans(system, workload string) []plan {
	switch workload {
	case "steady":
		var ps []plan
		for _, h := range pr.histories(system) {
			ps = append(ps, plan{system: system, workload: workload, tasks: pr.steadyTasks, spec: "* * * * * *",
				window: pr.steadyWindow, ready: pr.readyTimeout, history: h})
		}
		return ps
	case "distinct":
		if pr.distinctTasks == 0 {
			return nil
		}
		return []plan{{system: system, workload: workload, tasks: pr.distinctTasks, distinct: true,
			spec: distinctSpecText(pr.distinctTasks), window: pr.distinctWindow, ready: pr.scaleReadyMax, restart: true}}
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
		for _, h := range pr.histories(system) {
			for _, n := range pr.rampSteps {
				ps = append(ps, plan{system: system, workload: workload, tasks: n, spec: "* * * * * *",
					window: pr.rampStep, ready: pr.readyTimeout, history: h})
			}
		}
		return ps
	}
	return nil
}

// histories are the history sizes system runs steady and throughput with:
// the profile's for xtimer, none (one run without) for the peers, which
// keep no executions table.
func (pr profile) histories(system string) []int64 {
	if hasHistory(system) && len(pr.history) > 0 {
		return pr.history
	}
	return []int64{0}
}

// distinctSecond is the second of the day task i of n fires at in the
// distinct workload: the n tasks spread evenly over the 86,400 seconds.
func distinctSecond(i, n int) int { return int(int64(i) * 86400 / int64(n)) }

// distinctSpec is task i of n's spec in the distinct workload: once a day
// at distinctSecond, "S M H * * *".
func distinctSpec(i, n int) string {
	s := distinctSecond(i, n)
	return fmt.Sprintf("%d %d %d * * *", s%60, s/60%60, s/3600)
}

// distinctSpecText describes the distinct workload's specs in the
// results.
func distinctSpecText(n int) string {
	return fmt.Sprintf("S M H * * * (task i at second i×86400/%d of the day, UTC)", n)
}
