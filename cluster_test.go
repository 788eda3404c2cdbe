package xtimer

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// fleet is several replicas in one test process, each with its own
// database pool and Redis client, running the same tasks (every second).
// It counts handler calls per fire, independently of the execution rows
// (which are unique by construction): duplicates show up here.
type fleet struct {
	app      string
	tasks    int
	replicas []*Scheduler

	mu    sync.Mutex
	calls map[string]int           // fire ID → handler calls, across replicas
	lates map[string]time.Duration // fire ID → lateness of its first call
}

func taskCodeN(k int) string { return fmt.Sprintf("task.%03d", k) }

// startFleet starts n replicas on db; lock gives replica i its Redis client.
func startFleet(t *testing.T, db *gorm.DB, n, tasks int, lock func(i int) redis.UniversalClient) *fleet {
	t.Helper()
	f := &fleet{app: testsvc.App(t), tasks: tasks, calls: map[string]int{}, lates: map[string]time.Duration{}}
	handler := func(ctx context.Context, run *Run) error {
		d := time.Since(run.ScheduledAt)
		f.mu.Lock()
		if f.calls[run.ID]++; f.calls[run.ID] == 1 {
			f.lates[run.ID] = d
		}
		f.mu.Unlock()
		return nil
	}
	for i := range n {
		pool := db
		if i > 0 {
			pool = testsvc.Reopen(t, db)
		}
		s := newScheduler(t, setupOpts{db: pool, app: f.app}, func(o *Options) {
			o.Redis = lock(i)
			o.InstanceID = fmt.Sprintf("replica-%d", i)
		})
		for k := range tasks {
			require.NoError(t, s.Register(taskCodeN(k), "* * * * * *", handler))
		}
		f.replicas = append(f.replicas, s)
	}
	for _, s := range f.replicas {
		require.NoError(t, s.Start(context.Background()))
	}
	return f
}

func (f *fleet) stop(t *testing.T, replicas ...*Scheduler) {
	t.Helper()
	for _, s := range replicas {
		// Generous: on a loaded CI machine under -race, the last writes of
		// a stop on MariaDB have taken many seconds.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		require.NoError(t, s.Stop(ctx))
		cancel()
	}
}

// count checks every fire of every task at whole seconds in [from, to).
func (f *fleet) count(from, to time.Time) (missed, dup int, late []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sec := from; sec.Before(to); sec = sec.Add(time.Second) {
		for k := range f.tasks {
			id := engine.FireID(f.app, taskCodeN(k), sec.UnixMilli())
			n := f.calls[id]
			switch {
			case n == 0:
				missed++
			case n > 1:
				dup++
			}
			if n > 0 {
				late = append(late, f.lates[id])
			}
		}
	}
	return missed, dup, late
}

// window returns the whole seconds to count: from two seconds after now
// (start-up is over), for d.
func window(d time.Duration) (from, to time.Time) {
	from = time.Now().Truncate(time.Second).Add(2 * time.Second)
	return from, from.Add(d)
}

func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// Three replicas in one process, each with its own Redis client and
// database pool, run 200 tasks firing every second for 20 seconds: every
// fire runs exactly once, counted from handler calls, and starts close to
// its run time.
//
// Not parallel: it measures lateness, and the parallel tests of this
// package would share the machine's two cores with it.
func TestThreeReplicasRunEveryFireOnce(t *testing.T) {
	d := 20 * time.Second
	if testing.Short() {
		d = 5 * time.Second
	}
	for _, b := range testsvc.Backends()[1:] { // MySQL/MariaDB and PostgreSQL
		t.Run(b.Name, func(t *testing.T) { // one after the other: both at once would measure the machine
			f := startFleet(t, b.Open(t), 3, 200, func(int) redis.UniversalClient { return testsvc.Redis(t) })
			from, to := window(d)
			sleepUntil(to.Add(2 * time.Second))
			f.stop(t, f.replicas...)

			missed, dup, late := f.count(from, to)
			fires := int(d/time.Second) * f.tasks
			sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
			p := func(q float64) time.Duration { return late[int(q*float64(len(late)-1))].Round(time.Microsecond) }
			t.Logf("%s: 3 replicas, %d fires in %s (%.0f fires/s): missed=%d duplicates=%d lateness p50=%s p90=%s p99=%s max=%s",
				b.Name, fires, d, float64(fires)/d.Seconds(), missed, dup, p(0.5), p(0.9), p(0.99), p(1))
			require.Zero(t, dup, "fires run more than once")
			require.Zero(t, missed, "fires never run")
			// The goal is 50ms at the 99th percentile, measured by bench/ and
			// reported above; machines are shared and noisy, so the assertion
			// only catches a scheduler that stopped keeping time (seconds
			// late), with room for the p99 of a run under -race with other
			// builds on both cores.
			bound := 8 * time.Second
			require.Less(t, p(0.99), bound, "p99 lateness")
		})
	}
}

// With Redis unreachable every replica records every slot; the unique key
// of the executions table keeps each fire to one start.
func TestRedisDownFallsBackToTheDatabase(t *testing.T) {
	t.Parallel()
	f := startFleet(t, testsvc.Postgres(t), 2, 20, func(int) redis.UniversalClient {
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = dead.Close() })
		return dead
	})
	from, to := window(5 * time.Second)
	sleepUntil(to.Add(time.Second))
	f.stop(t, f.replicas...)
	missed, dup, _ := f.count(from, to)
	require.Zero(t, dup, "fires run more than once")
	require.Zero(t, missed, "fires never run")
}

// A rolling deploy stops one replica mid-minute: the fires it recorded but
// had not started are handed to the other replica, and every fire still
// runs once.
func TestGracefulStopHandsFiresOver(t *testing.T) {
	t.Parallel()
	f := startFleet(t, testsvc.Postgres(t), 2, 20, func(int) redis.UniversalClient { return testsvc.Redis(t) })
	from, to := window(8 * time.Second)
	sleepUntil(from.Add(3 * time.Second))
	f.stop(t, f.replicas[0]) // replica-0 leaves in the middle of the window
	sleepUntil(to.Add(2 * time.Second))
	f.stop(t, f.replicas[1])
	missed, dup, _ := f.count(from, to)
	require.Zero(t, dup, "fires run more than once")
	require.Zero(t, missed, "fires never run")
}
