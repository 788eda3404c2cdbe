package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"
)

// replicaMain is the hidden subcommand "replica": one replica process of a
// run. It builds the tasks, runs the system until SIGTERM, and writes
// "ready <ms>" to stdout once the system said it runs (ms since the
// process's main started). Errors go to stderr and exit 1.
func replicaMain(args []string) {
	start := time.Now()
	fs := flag.NewFlagSet("replica", flag.ExitOnError)
	system := fs.String("system", "", "system name")
	replica := fs.Int("replica", 0, "replica number")
	redisAddr := fs.String("redis", "", "redis host:port")
	pgURL := fs.String("pg", "", "PostgreSQL URL")
	myDSN := fs.String("mysql", "", "MariaDB DSN")
	workers := fs.Int("workers", 64, "handlers running at once")
	tasks := fs.Int("tasks", 0, "tasks")
	shards := fs.Int("shards", 0, "every task's WithShards (0: not sharded)")
	spec := fs.String("spec", "", "six-field cron spec of every task")
	recPath := fs.String("rec", "", "invocation file")
	capacity := fs.Int64("cap", 1<<20, "records the invocation file holds")
	distinct := fs.Bool("distinct", false, "task i of n fires daily at distinctSpec(i, n) instead of -spec")
	_ = fs.Parse(args)
	if *distinct {
		*spec = ""
	}
	if err := runReplica(start, *system, *recPath, *capacity, *tasks, *shards, *spec, ReplicaEnv{
		Replica: *replica, RedisAddr: *redisAddr, PostgresURL: *pgURL, MySQLDSN: *myDSN, Workers: *workers,
	}); err != nil {
		fmt.Fprintf(os.Stderr, "replica %d: %v\n", *replica, err)
		os.Exit(1)
	}
}

func runReplica(start time.Time, name, recPath string, capacity int64, n, shards int, spec string, env ReplicaEnv) error {
	sys, err := newSystem(name)
	if err != nil {
		return err
	}
	rec, err := newFileRecorder(recPath, capacity)
	if err != nil {
		return err
	}
	defer func() {
		if d := rec.dropped.Load(); d > 0 {
			fmt.Fprintf(os.Stderr, "replica %d: %d records dropped (file full)\n", env.Replica, d)
		}
		_ = rec.close()
	}()
	tasks := make([]TaskSpec, n)
	for i := range tasks {
		sp := spec
		if sp == "" { // -distinct
			sp = distinctSpec(i, n)
		}
		tasks[i] = TaskSpec{Code: taskCode(i), Spec: sp, Shards: shards}
	}
	// A CPU profile (pprof) and an execution trace (go tool trace: what
	// each goroutine and the collector did at a late instant) per replica,
	// each when its variable names a directory; a SIGKILLed replica leaves
	// an empty or cut file. With XTIMER_BENCH_CPUPROFILE_READY, the CPU
	// profile starts that long after ready instead (windowProfile).
	file := fmt.Sprintf("%s-%d-replica-%d", name, n, env.Replica)
	cpuDir, cpuFrom := os.Getenv("XTIMER_BENCH_CPUPROFILE"), os.Getenv("XTIMER_BENCH_CPUPROFILE_READY")
	for _, p := range []struct {
		env, ext string
		start    func(io.Writer) error
		stop     func()
	}{
		{"XTIMER_BENCH_CPUPROFILE", ".pprof", pprof.StartCPUProfile, pprof.StopCPUProfile},
		{"XTIMER_BENCH_TRACE", ".trace", trace.Start, trace.Stop},
	} {
		dir := os.Getenv(p.env)
		if dir == "" || (p.env == "XTIMER_BENCH_CPUPROFILE" && cpuFrom != "") {
			continue
		}
		f, err := os.Create(filepath.Join(dir, file+p.ext))
		if err != nil {
			return fmt.Errorf("%s: %w", p.env, err)
		}
		defer f.Close()
		if err := p.start(f); err != nil {
			return fmt.Errorf("%s: %w", p.env, err)
		}
		defer p.stop()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	readyOnce := make(chan struct{})
	ready := func() {
		select {
		case <-readyOnce:
		default:
			close(readyOnce)
			fmt.Printf("ready %d\n", time.Since(start).Milliseconds())
			if cpuDir != "" && cpuFrom != "" {
				go windowProfile(ctx, filepath.Join(cpuDir, file+"-window.pprof"), cpuFrom)
			}
			if dir := os.Getenv("XTIMER_BENCH_HEAPPROFILE"); dir != "" {
				go writeHeapProfile(filepath.Join(dir, fmt.Sprintf("%s-%d-replica-%d.heap", name, n, env.Replica)), 2*time.Second)
			}
		}
	}
	if err := sys.Run(ctx, env, tasks, rec, ready); err != nil {
		return err
	}
	// Run may return once the system runs or once it stopped: either way
	// the replica lives until SIGTERM.
	<-ctx.Done()
	if dir := os.Getenv("XTIMER_BENCH_HEAPPROFILE"); dir != "" {
		// Its allocations over its whole life (pprof -sample_index=alloc_space).
		writeHeapProfile(filepath.Join(dir, fmt.Sprintf("%s-%d-replica-%d-end.heap", name, n, env.Replica)), 0)
	}
	return nil
}

// windowProfile writes a CPU profile of the replica from after (a
// duration, XTIMER_BENCH_CPUPROFILE_READY) past its ready to its stop,
// into path (in XTIMER_BENCH_CPUPROFILE's directory): what it does while
// its fires run, without its start-up. Failures go to stderr only.
func windowProfile(ctx context.Context, path, after string) {
	d, err := time.ParseDuration(after)
	if err == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		var f *os.File
		if f, err = os.Create(path); err == nil {
			defer f.Close()
			if err = pprof.StartCPUProfile(f); err == nil {
				<-ctx.Done()
				pprof.StopCPUProfile()
				return
			}
		}
	}
	fmt.Fprintf(os.Stderr, "XTIMER_BENCH_CPUPROFILE_READY: %v\n", err)
}

// writeHeapProfile writes, for pprof, the heap of a replica after a
// collection, wait from now (XTIMER_BENCH_HEAPPROFILE=DIR): 2 s after it
// became ready, what it holds live once start-up is over (the wait lets
// start-up's last writes end); as it stops, also what it allocated in all.
// Failures go to stderr only.
func writeHeapProfile(path string, wait time.Duration) {
	time.Sleep(wait)
	runtime.GC()
	f, err := os.Create(path)
	if err == nil {
		err = pprof.WriteHeapProfile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "XTIMER_BENCH_HEAPPROFILE: %v\n", err)
	}
}
