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
	codes := make([]string, 100_000)
	specs := make([]string, len(codes))
	for i := range codes {
		codes[i] = fmt.Sprintf("tenant-%06d.report", i)
		sec := i * 86_400 / len(codes)
		specs[i] = fmt.Sprintf("%d %d %d * * *", sec%60, sec/60%60, sec/3600)
	}
	h := func(context.Context, *Run) error { return nil }
	for _, distinct := range []bool{false, true} {
		name := "shared"
		if distinct {
			name = "distinct"
		}
		b.Run(name, func(b *testing.B) {
			var retained float64
			for b.Loop() {
				var before, after runtime.MemStats
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
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
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.StartTimer()
				retained = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(codes))
				runtime.KeepAlive(s)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(codes)), "ns/task")
			b.ReportMetric(retained, "retained-B/task")
		})
	}
}

// BenchmarkRestart is a replica's restart with 100,000 tasks, each its
// own daily time (the bench's distinct workload), whose rows exist
// already: a new Scheduler registers them and starts, reading the rows'
// heads into its view of the tasks. ns/task is the restart's time per
// task; retained-B/task the heap the running replica keeps alive for its
// tasks (registrations, view, shared options), measured after a
// collection.
func BenchmarkRestart(b *testing.B) {
	codes := make([]string, 100_000)
	specs := make([]string, len(codes))
	for i := range codes {
		codes[i] = fmt.Sprintf("t%07d", i)
		sec := i * 86_400 / len(codes)
		specs[i] = fmt.Sprintf("%d %d %d * * *", sec%60, sec/60%60, sec/3600)
	}
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
			require.NoError(b, start().Stop(ctx)) // the first start writes the rows
			var retained float64
			for b.Loop() {
				var before, after runtime.MemStats
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				s := start()
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				retained = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(codes))
				require.NoError(b, s.Stop(ctx))
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(codes)), "ns/task")
			b.ReportMetric(retained, "retained-B/task")
		})
	}
}
