package xtimer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// WithJitter refuses what could not keep its promise: no jitter, more
// than a minute, a fraction of a millisecond, or a range that reaches the
// schedule's next fire; an HTTP task's jitter the same, naming its field.
func TestJitterRefusesRangesThatReachTheNextFire(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t)}, allowLoopback)
	ok := func(context.Context, *Run) error { return nil }
	for i, c := range []struct {
		spec   string
		jitter time.Duration
		want   string // "" for accepted
	}{
		{"0 * * * * *", 0, `WithJitter(0s): jitter must be at least 1ms`},
		{"0 * * * * *", -time.Second, `WithJitter(-1s): jitter must be at least 1ms`},
		{"0 0 * * * *", 2 * time.Minute, `WithJitter(2m0s): jitter must be at most 1m0s`},
		{"0 * * * * *", 1500 * time.Microsecond, `WithJitter(1.5ms): jitter must be whole milliseconds`},
		{"*/10 * * * * *", 10 * time.Second, `WithJitter(10s): jitter must be below the schedule's shortest interval, 10s`},
		{"0 0,1 9 * * *", time.Minute, `WithJitter(1m0s): jitter must be below the schedule's shortest interval, 1m0s`},
		{"0 * * * * *", time.Minute, `WithJitter(1m0s): jitter must be below the schedule's shortest interval, 1m0s`},
		{"*/10 * * * * *", 9999 * time.Millisecond, ""},
		{"0 0 9 * * *", time.Minute, ""},
		{"@every 30s", 29 * time.Second, ""},
	} {
		code := fmt.Sprintf("jitter.%d", i)
		err := s.Register(code, c.spec, ok, WithJitter(c.jitter))
		if c.want == "" {
			require.NoError(t, err, "%s with %s", c.spec, c.jitter)
			continue
		}
		// The interval check goes on to name the two fires it found.
		require.ErrorContains(t, err, fmt.Sprintf("xtimer: task %q: %s", code, c.want), "%s with %s", c.spec, c.jitter)
	}

	http := HTTPTask{Code: "jitter.http", Spec: "*/10 * * * * *", Target: HTTPTarget{Method: "POST", URL: "http://127.0.0.1:9/hook"}, Jitter: 10 * time.Second}
	var fe *FieldError
	require.ErrorAs(t, s.CreateHTTPTask(context.Background(), http), &fe)
	require.Equal(t, "jitter", fe.Field)
	require.Equal(t, "10s", fe.Value)
	require.Contains(t, fe.Reason, "below the schedule's shortest interval")
}

// Jittered fires, fleet-wide: three tasks due every minute at :00 start
// apart, each at its planned start (recorded on the row, inside the
// jitter, the same whichever replica recorded it), once across two
// replicas; the handler still sees the nominal instant, and lateness
// counts from the planned start. Every backend, the fake clock.
func TestJitteredFiresStartAtTheirPlannedStartOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		f := newEditFleet(t, db)
		specs := map[string]string{"report.a": "0 * * * * *", "report.b": "0 * * * * *", "report.c": "0 * * * * *"}
		f.opts = map[string][]TaskOption{}
		for code := range specs {
			f.opts[code] = []TaskOption{WithJitter(40 * time.Second)}
		}
		f.start(specs)
		f.start(specs)
		f.runUntil(hms(2, 45))
		for code := range specs {
			f.waitRows(code, hms(2, 0), "12:01:00 succeeded schedule", "12:02:00 succeeded schedule")
			require.Equal(t, map[string]int{"12:01:00": 1, "12:02:00": 1}, f.callsOf(code), "handler calls of %s, by Run.ScheduledAt", code)
		}

		var rows []store.Execution
		require.NoError(t, db.Where("app = ? AND run_time <= ?", f.app, hms(2, 0).UnixMilli()).Order("task_code, run_time").Find(&rows).Error)
		require.Len(t, rows, 6)
		offsets := map[int64]bool{}
		for _, r := range rows {
			offset := time.Duration(r.PlannedMs-r.RunTime) * time.Millisecond
			require.NotZero(t, r.PlannedMs, "%s %d has a planned start", r.TaskCode, r.RunTime)
			require.GreaterOrEqual(t, offset, time.Duration(0))
			require.Less(t, offset, 40*time.Second)
			require.GreaterOrEqual(t, r.StartedMs, r.PlannedMs, "%s started before its planned start", r.TaskCode)
			require.Equal(t, r.StartedMs-r.PlannedMs, r.LatenessMs, "%s lateness counts from the planned start", r.TaskCode)
			offsets[r.PlannedMs-r.RunTime] = true

			e, err := f.replicas[0].Execution(context.Background(), r.ID)
			require.NoError(t, err)
			require.Equal(t, time.UnixMilli(r.PlannedMs), e.PlannedAt.Local())
		}
		require.Greater(t, len(offsets), 1, "the fires at :00 start apart")
	})
}
