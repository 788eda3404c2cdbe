package xtimer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// BenchmarkRegister registers 100,000 tasks alike, as a service with a
// task per customer does before Start: per task, a map insert and a
// small struct; the options, their parsed spec and their definition are
// shared (regOpts). The other hot paths' benchmarks are the engine's
// (internal/engine/hotpath_bench_test.go).
func BenchmarkRegister(b *testing.B) {
	codes := make([]string, 100_000)
	for i := range codes {
		codes[i] = fmt.Sprintf("tenant-%06d.report", i)
	}
	h := func(context.Context, *Run) error { return nil }
	for b.Loop() {
		s, err := New(Options{DB: testsvc.SQLite(b), App: testsvc.App(b), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(b, err)
		for _, c := range codes {
			if err := s.Register(c, "0 0 3 * * *", h, WithTimeout(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(codes)), "ns/task")
}
