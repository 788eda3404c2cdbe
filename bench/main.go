// Command bench runs xtimer side by side with its peers (issue 8): the
// same tasks on R replica processes per system, each system on its own
// fresh redis-server and database started here, every handler call
// recorded outside the system, and one table, one JSON document and one
// lateness chart per workload at the end.
//
//	cd bench && go run . -profile quick      # every system and workload, shortened
//	cd bench && go run . -profile smoke      # CI: xtimer and the baseline, correctness only
//	cd bench && go run . -profile full       # the published numbers
//	go run . -profile quick -systems xtimer-postgres,robfig-setnx -workloads steady,burst
//
// It exits 1 when xtimer shows a duplicate, a miss or a failed run in a
// correctness workload (steady, burst, failover, scale, distinct, sharded) of
// the smoke or quick profile. See README.md for what each system is configured with.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "replica" {
		replicaMain(os.Args[2:])
		return
	}
	os.Exit(coordinatorMain())
}

func coordinatorMain() int {
	profName := flag.String("profile", "quick", "smoke, quick or full")
	systems := flag.String("systems", "", "comma-separated systems (default: the profile's): "+strings.Join(systemNames, ","))
	workloads := flag.String("workloads", "", "comma-separated workloads (default: the profile's): "+strings.Join(allWorkloads, ","))
	out := flag.String("out", "results", "directory of the JSON, Markdown and PNG outputs")
	replicas := flag.Int("replicas", 0, "replica processes per system (default: the profile's, 3)")
	workers := flag.Int("workers", 0, "handlers running at once per replica, every system (default 64)")
	killOffset := flag.Duration("kill-offset", 0, "failover: SIGKILL this long after the half-window instant (a whole second) instead of at it")
	keep := flag.Bool("keep", false, "keep the temp dir (server logs, replica logs, invocation files)")
	scaleSizes := flag.String("scale", "", "scale: comma-separated task counts instead of the profile's (e.g. 1000000)")
	rampSteps := flag.String("ramp", "", "throughput: comma-separated fire rates (tasks every second) instead of the profile's (e.g. 5000,10000)")
	durabilityOff := flag.Bool("durability-off", false, "trade the databases' durability for speed (PostgreSQL fsync, synchronous_commit and full_page_writes off; MariaDB innodb_flush_log_at_trx_commit=2, no doublewrite) instead of running them at their default durability")
	steadyTasks := flag.Int("steady", 0, "steady: tasks every second instead of the profile's (e.g. 1600, the sharded workload's shards a second)")
	distinctTasks := flag.Int("distinct", 0, "distinct: tasks, each with its own daily time, instead of the profile's (e.g. 1000000)")
	history := flag.String("history", "", "steady, throughput: comma-separated executions rows to seed before the runs of xtimer systems, one run each, 0 for none, instead of the profile's (e.g. 0,10000000)")
	flag.Parse()

	prof, ok := profiles[*profName]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: -profile %q: want smoke, quick or full\n", *profName)
		return 2
	}
	if *systems != "" {
		prof.systems = strings.Split(*systems, ",")
	}
	if *workloads != "" {
		prof.workloads = strings.Split(*workloads, ",")
	}
	for _, s := range prof.systems {
		if !slices.Contains(systemNames, s) {
			fmt.Fprintf(os.Stderr, "bench: -systems: unknown %q (known: %s)\n", s, strings.Join(systemNames, ","))
			return 2
		}
	}
	for _, w := range prof.workloads {
		if !slices.Contains(allWorkloads, w) {
			fmt.Fprintf(os.Stderr, "bench: -workloads: unknown %q (known: %s)\n", w, strings.Join(allWorkloads, ","))
			return 2
		}
		if len(prof.plans("x", w)) == 0 || (w == "scale" && len(prof.scaleTasks) == 0) ||
			(w == "burst" && prof.burstTasks == 0) || (w == "throughput" && len(prof.rampSteps) == 0) {
			fmt.Fprintf(os.Stderr, "bench: workload %q is not sized in profile %s\n", w, prof.name)
			return 2
		}
	}
	if *history != "" {
		prof.history = nil
		for _, f := range strings.Split(*history, ",") {
			n, err := strconv.ParseInt(strings.ReplaceAll(f, "_", ""), 10, 64)
			if err != nil || n < 0 {
				fmt.Fprintf(os.Stderr, "bench: -history: %q is not a row count (want 0 or a positive integer)\n", f)
				return 2
			}
			if n > 0 {
				if _, err := newHistoryPlan(n, time.Now()); err != nil {
					fmt.Fprintln(os.Stderr, "bench:", err)
					return 2
				}
			}
			prof.history = append(prof.history, n)
		}
	}
	if *distinctTasks < 0 {
		fmt.Fprintf(os.Stderr, "bench: -distinct: %d is not a task count (want a positive integer)\n", *distinctTasks)
		return 2
	}
	if *distinctTasks > 0 {
		prof.distinctTasks = *distinctTasks
		if prof.distinctWindow == 0 {
			prof.distinctWindow = prof.steadyWindow
		}
		if prof.scaleReadyMax == 0 {
			prof.scaleReadyMax = prof.readyTimeout
		}
	}
	for _, list := range []struct {
		flag, value string
		into        *[]int
	}{{"scale", *scaleSizes, &prof.scaleTasks}, {"ramp", *rampSteps, &prof.rampSteps}} {
		if list.value == "" {
			continue
		}
		*list.into = nil
		for _, f := range strings.Split(list.value, ",") {
			n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
			if err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "bench: -%s: %q is not a task count (want a positive integer)\n", list.flag, f)
				return 2
			}
			*list.into = append(*list.into, n)
		}
	}
	if *steadyTasks > 0 {
		prof.steadyTasks = *steadyTasks
	}
	if *replicas > 0 {
		prof.replicas = *replicas
	}
	if *workers > 0 {
		prof.workers = *workers
	}

	pgStatsOn, err := pgStats()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}

	// The replicas are this binary (go run's build of it), subcommand
	// "replica".
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "xtimer-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	_ = os.Chmod(tmp, 0o755) // PostgreSQL, as postgres, reaches its dirs below
	if *keep {
		fmt.Fprintf(os.Stderr, "bench: -keep: every run's directory stays in %s with its database's data (a 10M-row history's is several GB); a run whose copy would leave under %s MiB free is not run\n",
			tmp, num(copyRoom>>20))
	}
	cleanup := func() {
		if *keep {
			fmt.Fprintln(os.Stderr, "bench: kept", tmp)
			return
		}
		_ = os.RemoveAll(tmp)
	}
	// The templates (a seeded history's, several GB) go as the bench ends,
	// and a bench started right after waits for the disk as a run does.
	defer func() {
		if *keep {
			cleanup()
			return
		}
		removeSettled(tmp, logf)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "bench: %s: stopping (servers and replicas die with this process)\n", s)
		cleanup()
		os.Exit(130)
	}()

	c := &coordinator{bin: self, tmp: tmp, replicas: prof.replicas, workers: prof.workers,
		warmup: prof.warmup, tail: prof.tail, tpl: &templates{root: tmp, pgStats: pgStatsOn}, keep: *keep, killOffset: *killOffset, durabilityOff: *durabilityOff}
	host, _ := os.Hostname()
	doc := &document{Profile: prof.name, Started: time.Now().UTC(), Host: host, CPUs: runtime.NumCPU(),
		Replicas: prof.replicas, Workers: prof.workers, DurabilityOff: *durabilityOff}
	began := time.Now()
	for _, w := range prof.workloads {
		for _, s := range prof.systems {
			stopped := map[int64]bool{} // throughput: by history, a step failed
			for _, p := range prof.plans(s, w) {
				if stopped[p.history] {
					continue // the next steps are higher still
				}
				logf("%s/%s: %s tasks", s, condition(w, p.history), num(int64(p.tasks)))
				r := c.run(p)
				stopped[p.history] = w == "throughput" && (r.NA != "" || !r.Pass)
				switch {
				case r.NA != "":
					logf("%s/%s: n/a: %s", s, condition(w, p.history), r.NA)
				case w == "scale":
					logf("%s/%s: start-up %.1f s, RSS %.0f MiB, idle CPU %.1f %% of a core", s, w,
						maxOf(r.StartupS), maxOf(r.RSSMB), mean(r.IdleCPUPct))
				case w == "distinct":
					logf("%s/%s: start-up %.1f s, restart %.1f s, RSS %.0f MiB, CPU %.1f %% of a core; expected %d, once %d, duplicated %d, missed %d, p99 %.0f ms",
						s, w, maxOf(r.StartupS), r.RestartS, maxOf(r.RSSMB), maxOf(r.IdleCPUPct),
						r.Expected, r.Once, r.Duplicated, r.Missed, r.LateP99)
				default:
					logf("%s/%s: expected %d, once %d, duplicated %d, missed %d, p99 %.0f ms", s, condition(w, p.history),
						r.Expected, r.Once, r.Duplicated, r.Missed, r.LateP99)
				}
				doc.Results = append(doc.Results, r)
			}
		}
	}
	doc.Duration = time.Since(began).Round(time.Second).String()

	if err = os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	prefix := doc.Started.Format("2006-01-02") + "-" + prof.name
	md := markdown(doc, prof.workloads)
	fmt.Print(md)
	fmt.Printf("\n(%s in all)\n", doc.Duration)
	if err = writeJSON(filepath.Join(*out, prefix+".json"), doc); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if err = os.WriteFile(filepath.Join(*out, prefix+".md"), []byte(md), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	pngs, err := charts(doc, prof.workloads, *out, prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: charts:", err)
		return 2
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s.json, %s.md and %d charts in %s\n", prefix, prefix, len(pngs), *out)

	if prof.name == "smoke" || prof.name == "quick" {
		if bad := xtimerFailures(doc); len(bad) > 0 {
			for _, b := range bad {
				fmt.Fprintln(os.Stderr, "bench: FAIL:", b)
			}
			return 1
		}
	}
	return 0
}

// xtimerFailures are xtimer's broken promises in the correctness
// workloads (sharded: of shards): duplicates, misses, fires at instants it
// should not have, runs that did not run. (Throughput misses are its
// stopping rule.)
func xtimerFailures(doc *document) []string {
	var bad []string
	for _, r := range doc.Results {
		if !strings.HasPrefix(r.System, "xtimer-") || r.Workload == "throughput" {
			continue
		}
		switch {
		case r.NA != "":
			bad = append(bad, fmt.Sprintf("%s/%s did not run: %s", r.System, condition(r.Workload, r.History), r.NA))
		case r.Duplicated > 0 || r.Missed > 0 || r.Unexpected > 0:
			bad = append(bad, fmt.Sprintf("%s/%s: %d duplicated, %d missed, %d unexpected", r.System, condition(r.Workload, r.History),
				r.Duplicated, r.Missed, r.Unexpected))
		}
	}
	return bad
}
