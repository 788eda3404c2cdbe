package xtimer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// BenchmarkRegister registers 100,000 tasks before Start, as a service
// with a task per customer does: per task, a map insert and a small
// struct; the options, their parsed spec and their definition are shared
// (regOpts) by the tasks registered alike:
//
//   - shared: every task with the same options and spec;
//   - distinct: every task its own daily time ("S M H * * *", the bench's
//     distinct workload), the same options otherwise: one parsed spec and
//     definition per time.
//
// retained-B/task is the heap the registered tasks keep alive, measured
// after a collection. The other hot paths' benchmarks are the engine's
// (internal/engine/hotpath_bench_test.go).
func BenchmarkRegister(b *testing.B) {
	codes, specs := dailyTasks(100_000, "tenant-%06d.report")
	h := func(context.Context, *Run) error { return nil }
	for _, distinct := range []bool{false, true} {
		name := "shared"
		if distinct {
			name = "distinct"
		}
		b.Run(name, func(b *testing.B) {
			var retained float64
			for b.Loop() {
				before := liveHeap(b)
				s, err := New(Options{DB: testsvc.SQLite(b), App: testsvc.App(b), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				require.NoError(b, err)
				for i, c := range codes {
					spec := "0 0 3 * * *"
					if distinct {
						spec = specs[i]
					}
					if err := s.Register(c, spec, h, WithTimeout(time.Minute)); err != nil {
						b.Fatal(err)
					}
				}
				retained = float64(liveHeap(b)-before) / float64(len(codes))
				runtime.KeepAlive(s)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(codes)), "ns/task")
			b.ReportMetric(retained, "retained-B/task")
		})
	}
}

// BenchmarkRestart is a replica's restart with 100,000 tasks, each its
// own daily time (the bench's distinct workload), whose rows the first
// start's deferred registration wrote: a new Scheduler registers them
// and starts, reading the heads of the rows changed since (none here)
// and counting the rest into its view of the tasks. ns/task is the restart's time per
// task; retained-B/task the heap the running replica keeps alive for its
// tasks (registrations, view, shared options), measured after a
// collection.
func BenchmarkRestart(b *testing.B) {
	codes, specs := dailyTasks(100_000, "t%07d")
	h := func(context.Context, *Run) error { return nil }
	for _, backend := range testsvc.Backends() {
		b.Run(backend.Name, func(b *testing.B) {
			db, app := backend.Open(b), testsvc.App(b)
			ctx := context.Background()
			start := func() *Scheduler {
				s, err := New(Options{DB: db, App: app, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				require.NoError(b, err)
				for i, c := range codes {
					if err := s.Register(c, specs[i], h); err != nil {
						b.Fatal(err)
					}
				}
				startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
				defer cancel()
				require.NoError(b, s.Start(startCtx))
				return s
			}
			// The first start writes the rows, in the background (a
			// deferred registration: internal/engine/catalog.go); the
			// restarts are timed against the rows once written.
			first := start()
			for {
				var pending int64
				require.NoError(b, db.Raw("SELECT reg_pending_ms FROM xtimer_apps WHERE app = ?", app).Scan(&pending).Error)
				if pending == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			require.NoError(b, first.Stop(ctx))
			var retained float64
			for b.Loop() {
				before := liveHeap(b)
				s := start()
				retained = float64(liveHeap(b)-before) / float64(len(codes))
				b.StopTimer()
				require.NoError(b, s.Stop(ctx))
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(codes)), "ns/task")
			b.ReportMetric(retained, "retained-B/task")
		})
	}
}

// BenchmarkFirstStart is a replica's first Start with 100,000 tasks,
// each its own daily time (the bench's distinct workload), into an app
// without tasks, each op a new app: New, Register and Start, until
// Start returns. ns/task is that time per task. Stop, untimed, ends
// whatever Start left running.
func BenchmarkFirstStart(b *testing.B) {
	codes, specs := dailyTasks(100_000, "t%07d")
	h := func(context.Context, *Run) error { return nil }
	for _, backend := range testsvc.Backends() {
		b.Run(backend.Name, func(b *testing.B) {
			db, ctx := backend.Open(b), context.Background()
			for b.Loop() {
				s, err := New(Options{DB: db, App: testsvc.App(b), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				require.NoError(b, err)
				for i, c := range codes {
					if err := s.Register(c, specs[i], h); err != nil {
						b.Fatal(err)
					}
				}
				startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
				require.NoError(b, s.Start(startCtx))
				cancel()
				b.StopTimer()
				require.NoError(b, s.Stop(ctx))
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(codes)), "ns/task")
		})
	}
}

// dailyTasks names n tasks by the format code (of the task's index) and
// gives each its own daily time, the n spread evenly over the day's
// 86,400 seconds, as the bench's distinct workload does.
func dailyTasks(n int, code string) (codes, specs []string) {
	codes, specs = make([]string, n), make([]string, n)
	for i := range codes {
		codes[i] = fmt.Sprintf(code, i)
		sec := i * 86_400 / n
		specs[i] = fmt.Sprintf("%d %d %d * * *", sec%60, sec/60%60, sec/3600)
	}
	return codes, specs
}

// liveHeap is the heap in use after a collection, both outside the
// benchmark's timer.
func liveHeap(b *testing.B) int64 {
	b.StopTimer()
	defer b.StartTimer()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
