package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The root's trace_test.go covers the spans a user sees through
// Options.TracerProvider.

// Not parallel: AllocsPerRun refuses to run beside other tests.
func TestTracingOffAllocatesNothingPerAttempt(t *testing.T) {
	s := newEngine(t, setupOpts{db: testsvc.SQLite(t)}, nil)
	r := store.Execution{ID: 1, TaskCode: "a", Attempt: 1, MaxAttempts: 1}
	allocs := testing.AllocsPerRun(100, func() {
		_, end := s.startSpan(r)
		end(executor.Outcome{}, store.Finish{})
	})
	require.Zero(t, allocs)
}
