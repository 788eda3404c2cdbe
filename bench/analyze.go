package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/robfig/cron/v3"
)

// result is one run's figures; the JSON document is a list of them.
type result struct {
	System   string `json:"system"`
	Workload string `json:"workload"`
	Tasks    int    `json:"tasks"`
	// Shards is every task's WithShards (sharded workload): the fire
	// figures below then count shards, one per (task, instant, shard).
	Shards   int    `json:"shards,omitempty"`
	Spec     string `json:"spec,omitempty"`
	Replicas int    `json:"replicas"`
	Workers  int    `json:"workers"`
	// NA says why the system could not do the run; the figures are then
	// empty.
	NA         string    `json:"na,omitempty"`
	WindowFrom time.Time `json:"window_from,omitzero"`
	WindowTo   time.Time `json:"window_to,omitzero"`

	Expected   int64 `json:"fires_expected"`
	Once       int64 `json:"invoked_once"`
	Duplicated int64 `json:"duplicated"`
	Missed     int64 `json:"missed"`
	// Unexpected are invocations in the window at an instant the schedule
	// does not have (a wrong scheduled time).
	Unexpected int64 `json:"unexpected,omitempty"`
	// MissedSample and DuplicatedSample name up to five missed and
	// duplicated fires, "task@scheduled" ("task/shard@scheduled" when
	// sharded), a duplicate with the replicas that ran it.
	MissedSample     []string `json:"missed_sample,omitempty"`
	DuplicatedSample []string `json:"duplicated_sample,omitempty"`
	// RunPerS is the fires (shards) of the window run, once or more, per
	// second of the window.
	RunPerS float64 `json:"run_per_s,omitempty"`
	// RunsByReplica is the invocations of the window each replica made,
	// in replica order: how the fires (shards) were shared out.
	RunsByReplica []int64 `json:"runs_by_replica,omitempty"`

	LateP50 float64 `json:"late_p50_ms"`
	LateP90 float64 `json:"late_p90_ms"`
	LateP99 float64 `json:"late_p99_ms"`
	LateMax float64 `json:"late_max_ms"`
	// CDF is the lateness at the 0th, 1st, ..., 100th percentile, ms.
	CDF []float64 `json:"late_cdf_ms,omitempty"`

	// Fires is the denominator of the per-fire figures: invocations
	// scheduled at or after the window start (the counters start there and
	// end after the replicas exited).
	Fires         int64     `json:"fires_counted"`
	CPUPer1k      float64   `json:"cpu_s_per_1k_fires"`
	RedisPer1k    float64   `json:"redis_cmds_per_1k_fires"`
	DBRowsPerFire *float64  `json:"db_rows_per_fire,omitempty"`
	PeakRSSMB     []float64 `json:"peak_rss_mb"` // VmHWM just before SIGTERM/SIGKILL
	CPUTotalS     []float64 `json:"cpu_total_s"`

	StartupS []float64 `json:"startup_s,omitempty"`
	// IdleCPUPct is each replica's CPU over the idle window (scale) or
	// over the window of fires (distinct), % of one core.
	IdleCPUPct []float64 `json:"idle_cpu_pct_of_core,omitempty"`
	RSSMB      []float64 `json:"rss_mb,omitempty"`
	// RestartS (distinct) is the start-up of the replica SIGKILLed after
	// the window and started again against the populated tables.
	RestartS float64 `json:"restart_s,omitempty"`

	// History is the executions rows seeded before the run (history.go),
	// SeedS how long seeding them took (once per backend and size: the
	// seeded cluster is copied for each run).
	History int64   `json:"history_rows,omitempty"`
	SeedS   float64 `json:"history_seed_s,omitempty"`

	// LoadAvg is the machine's 1-minute load average (/proc/loadavg) at
	// the window start and after the replicas exited: the other work on
	// a shared machine, which the lateness figures also measure.
	LoadAvg []float64 `json:"load_avg_1m,omitempty"`

	Killed       string  `json:"killed,omitempty"`
	LongestGapMs float64 `json:"longest_gap_ms,omitempty"`
	LateFires    int64   `json:"late_fires_over_1s,omitempty"`

	// Latest are the run's latestShown latest instants, latest first: the
	// fires of one instant that one replica started, by the lateness of
	// the last of them.
	Latest []lateInstant `json:"latest_instants,omitempty"`
	// DiskSlowest is the window's second in which the disk under the run's
	// databases had the longest mean time a write or a flush took
	// (disk.go).
	DiskSlowest *diskSecond `json:"disk_slowest,omitempty"`

	// Pass, for a throughput step: every fire of the window invoked once,
	// p99 lateness at most 100 ms.
	Pass bool `json:"pass,omitempty"`

	// Notes are replicas that exited unsuccessfully (other than the
	// failover victim), with the end of their log.
	Notes []string `json:"notes,omitempty"`

	killedAt  time.Time
	cpuWindow float64
	lateness  []float64
}

// addProcess takes a replica's figures from the OS after it exited.
func (res *result) addProcess(r *replicaProc) {
	st := r.cmd.ProcessState
	if st == nil {
		return
	}
	ru, ok := st.SysUsage().(*syscall.Rusage)
	if !ok {
		return
	}
	if !r.killed && !st.Success() {
		res.Notes = append(res.Notes, fmt.Sprintf("replica %d: %s: %s", r.n, st, firstLines(tail(r.log, 600))))
	}
	cpu := tv(ru.Utime) + tv(ru.Stime)
	res.CPUTotalS = append(res.CPUTotalS, round(cpu, 2))
	res.PeakRSSMB = append(res.PeakRSSMB, round(r.hwmMB, 1))
	res.cpuWindow += cpu - r.cpuFrom
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

type fireKey struct {
	task  int32
	shard int32
	at    int64 // scheduled unix ms
}

// fireStat is what the invocation files say about one fire (shard).
type fireStat struct {
	n        int32
	started  int64   // earliest start, unix ms
	first    int32   // the replica of that start
	replicas []int32 // the replicas that ran it, in file order
}

// lateInstant is the fires of one instant that one replica started first.
type lateInstant struct {
	At      time.Time   `json:"at"` // the scheduled instant
	Replica int32       `json:"replica"`
	Fires   int64       `json:"fires"`
	LateMs  float64     `json:"late_max_ms"`    // the lateness of its last fire
	Disk    *diskSecond `json:"disk,omitempty"` // the disk in the instant's second
}

// latestShown is how many instants a result names (result.Latest).
const latestShown = 3

// instantKey is an instant of one replica.
type instantKey struct {
	replica int32
	at      int64 // unix ms
}

// latest returns the n latest of instants, latest first (earlier first on
// a tie).
func latest(instants map[instantKey]*lateInstant, n int) []lateInstant {
	all := make([]lateInstant, 0, len(instants))
	for _, in := range instants {
		all = append(all, *in)
	}
	sort.Slice(all, func(a, b int) bool {
		if all[a].LateMs != all[b].LateMs {
			return all[a].LateMs > all[b].LateMs
		}
		if !all[a].At.Equal(all[b].At) {
			return all[a].At.Before(all[b].At)
		}
		return all[a].Replica < all[b].Replica
	})
	return all[:min(n, len(all))]
}

// analyze counts the fires of the window against the schedule and fills
// res.
func analyze(res *result, invs []invocation, p plan, c *counters) {
	from, to := res.WindowFrom.UnixMilli(), res.WindowTo.UnixMilli()
	seen := make(map[fireKey]*fireStat, len(invs))
	res.RunsByReplica = make([]int64, res.Replicas)
	for _, inv := range invs {
		if inv.scheduled >= from {
			res.Fires++
		}
		if inv.scheduled < from || inv.scheduled >= to {
			continue
		}
		for int(inv.replica) >= len(res.RunsByReplica) {
			res.RunsByReplica = append(res.RunsByReplica, 0)
		}
		res.RunsByReplica[inv.replica]++
		k := fireKey{inv.task, inv.shard, inv.scheduled}
		if s := seen[k]; s != nil {
			s.n++
			if inv.started < s.started {
				s.started, s.first = inv.started, inv.replica
			}
			s.replicas = append(s.replicas, inv.replica)
		} else {
			seen[k] = &fireStat{n: 1, started: inv.started, first: inv.replica, replicas: []int32{inv.replica}}
		}
	}

	// The schedule's instants in the window: every task has the same spec,
	// but for distinct, where task i fires once a day at its own second.
	parser := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	var instants []int64
	if sched, err := parser.Parse(res.Spec); err == nil && !p.distinct {
		for t := sched.Next(res.WindowFrom.Add(-time.Nanosecond)); !t.IsZero() && t.UnixMilli() < to; t = sched.Next(t) {
			instants = append(instants, t.UnixMilli())
		}
	}
	instantsOf := func(int) []int64 { return instants }
	if p.distinct {
		day := res.WindowFrom.UTC().Truncate(24 * time.Hour)
		one := make([]int64, 1)
		instantsOf = func(i int) []int64 {
			at := day.Add(time.Duration(distinctSecond(i, p.tasks)) * time.Second)
			if at.Before(res.WindowFrom) {
				at = at.Add(24 * time.Hour)
			}
			if at.UnixMilli() >= to {
				return nil
			}
			one[0] = at.UnixMilli()
			return one
		}
	}
	matched := int64(0)
	byInstant := map[instantKey]*lateInstant{}
	firstStarts := map[int32][]int64{} // failover: per task, for the gaps
	shards := max(p.shards, 1)
	for i := range p.tasks {
		for _, at := range instantsOf(i) {
			for sh := range shards {
				res.Expected++
				s := seen[fireKey{int32(i), int32(sh), at}]
				name := func() string {
					n := taskCode(i)
					if p.shards > 1 {
						n += "/" + strconv.Itoa(sh)
					}
					return n + "@" + time.UnixMilli(at).UTC().Format("15:04:05.000")
				}
				if s == nil {
					res.Missed++
					if len(res.MissedSample) < 5 {
						res.MissedSample = append(res.MissedSample, name())
					}
					continue
				}
				matched += int64(s.n)
				if s.n == 1 {
					res.Once++
				} else {
					res.Duplicated++
					if len(res.DuplicatedSample) < 5 {
						res.DuplicatedSample = append(res.DuplicatedSample, fmt.Sprintf("%s on replicas %v", name(), s.replicas))
					}
				}
				late := float64(s.started - at)
				res.lateness = append(res.lateness, late)
				ik := instantKey{s.first, at}
				in := byInstant[ik]
				if in == nil {
					in = &lateInstant{At: time.UnixMilli(at).UTC(), Replica: s.first, LateMs: late}
					byInstant[ik] = in
				}
				in.Fires++
				in.LateMs = max(in.LateMs, late)
				if late > 1000 {
					res.LateFires++
				}
				if p.kill {
					firstStarts[int32(i)] = append(firstStarts[int32(i)], s.started)
				}
			}
		}
	}
	if secs := res.WindowTo.Sub(res.WindowFrom).Seconds(); secs > 0 {
		res.RunPerS = round(float64(res.Once+res.Duplicated)/secs, 1)
	}
	var inWindow int64
	for _, s := range seen {
		inWindow += int64(s.n)
	}
	res.Unexpected = inWindow - matched

	res.Latest = latest(byInstant, latestShown)
	sort.Float64s(res.lateness)
	res.LateP50, res.LateP90 = quantile(res.lateness, 0.50), quantile(res.lateness, 0.90)
	res.LateP99, res.LateMax = quantile(res.lateness, 0.99), quantile(res.lateness, 1)
	if len(res.lateness) > 0 {
		res.CDF = make([]float64, 101)
		for q := range res.CDF {
			res.CDF[q] = quantile(res.lateness, float64(q)/100)
		}
	}

	if p.kill {
		// The longest time between consecutive starts of one task, window
		// edges included (a task that never ran again after the kill has
		// a gap to the window's end).
		var gap int64
		for i := range p.tasks {
			st := firstStarts[int32(i)]
			sort.Slice(st, func(a, b int) bool { return st[a] < st[b] })
			prev := from
			for _, t := range st {
				gap = max(gap, t-prev)
				prev = t
			}
			gap = max(gap, to-prev)
		}
		res.LongestGapMs = float64(gap)
	}

	if p.workload == "throughput" {
		res.Pass = res.Expected > 0 && res.Once == res.Expected && res.Unexpected == 0 && res.LateP99 <= 100
	}

	if res.Fires > 0 {
		per1k := 1000 / float64(res.Fires)
		res.CPUPer1k = round(res.cpuWindow*per1k, 3)
		res.RedisPer1k = round(float64(c.redisTo-c.redisFrom)*per1k, 1)
		if c.hasDB {
			v := round(float64(c.rowsTo-c.rowsFrom)/float64(res.Fires), 2)
			res.DBRowsPerFire = &v
		}
	}
}

// quantile of sorted v (nearest rank); 0 for none.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return v[int(math.Round(q*float64(len(v)-1)))]
}
