package xtimer

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// Three replicas in one process, each with its own Redis client and
// database pool, run 200 tasks firing every second for 20 seconds: every
// fire runs exactly once, counted from handler calls (rows are unique by
// construction), and starts close to its run time.
func TestThreeReplicasRunEveryFireOnce(t *testing.T) {
	t.Parallel()
	const (
		replicas = 3
		tasks    = 200
	)
	window := 20 * time.Second
	if testing.Short() {
		window = 5 * time.Second
	}
	for _, b := range testsvc.Backends()[1:] { // MySQL/MariaDB and PostgreSQL
		t.Run(b.Name, func(t *testing.T) { // one after the other: both at once would measure the machine
			db := b.Open(t)
			app := testsvc.App(t)
			var (
				mu    sync.Mutex
				calls = map[string]int{}           // fire ID → handler calls, across replicas
				lates = map[string]time.Duration{} // fire ID → lateness of its first call
			)
			handler := func(ctx context.Context, run *Run) error {
				d := time.Since(run.ScheduledAt)
				mu.Lock()
				if calls[run.ID]++; calls[run.ID] == 1 {
					lates[run.ID] = d
				}
				mu.Unlock()
				return nil
			}
			var all []*Scheduler
			for i := range replicas {
				pool := db
				if i > 0 {
					pool = testsvc.Reopen(t, db)
				}
				s := newScheduler(t, setupOpts{db: pool, app: app}, func(o *Options) {
					o.Redis = testsvc.Redis(t)
					o.InstanceID = fmt.Sprintf("replica-%d", i)
				})
				for k := range tasks {
					require.NoError(t, s.Register(fmt.Sprintf("task.%03d", k), "* * * * * *", handler))
				}
				all = append(all, s)
			}
			ctx := context.Background()
			for _, s := range all {
				require.NoError(t, s.Start(ctx))
			}
			// Count the fires of whole seconds inside the window, after the
			// start-up second, while all three run.
			from := time.Now().Truncate(time.Second).Add(2 * time.Second)
			to := from.Add(window)
			time.Sleep(time.Until(to.Add(2 * time.Second)))
			for _, s := range all {
				stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				require.NoError(t, s.Stop(stopCtx))
				cancel()
			}

			mu.Lock()
			defer mu.Unlock()
			missed, dup := 0, 0
			var late []time.Duration
			for sec := from; sec.Before(to); sec = sec.Add(time.Second) {
				for k := range tasks {
					id := fireID(app, fmt.Sprintf("task.%03d", k), sec.UnixMilli())
					n := calls[id]
					if n > 0 {
						late = append(late, lates[id])
					}
					if n == 0 {
						missed++
					}
					if n > 1 {
						dup++
					}
				}
			}
			fires := int(window/time.Second) * tasks
			sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
			p := func(q float64) time.Duration { return late[int(q*float64(len(late)-1))] }
			t.Logf("%s: %d replicas, %d fires in %s (%.0f fires/s): missed=%d duplicates=%d lateness p50=%s p90=%s p99=%s max=%s",
				b.Name, replicas, fires, window, float64(fires)/window.Seconds(), missed, dup,
				p(0.5).Round(time.Microsecond), p(0.9).Round(time.Microsecond), p(0.99).Round(time.Microsecond), p(1).Round(time.Microsecond))
			require.Zero(t, dup, "fires run more than once")
			require.Zero(t, missed, "fires never run")
			// The goal is 50ms at the 99th percentile; CI machines are shared
			// and run this under the race detector, so the assertion is looser
			// and the figure above is what gets reported.
			bound := 50 * time.Millisecond
			if os.Getenv("CI") != "" || raceEnabled {
				bound = 500 * time.Millisecond
			}
			require.Less(t, p(0.99), bound, "p99 lateness")
		})
	}
}

// With Redis unreachable every replica records every slot; the unique key
// of the executions table keeps each fire to one start.
func TestRedisDownFallsBackToTheDatabase(t *testing.T) {
	t.Parallel()
	db := testsvc.Postgres(t)
	app := testsvc.App(t)
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	handler := func(ctx context.Context, run *Run) error {
		mu.Lock()
		calls[run.ID]++
		mu.Unlock()
		return nil
	}
	var all []*Scheduler
	for i := range 2 {
		pool := db
		if i > 0 {
			pool = testsvc.Reopen(t, db)
		}
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = dead.Close() })
		s := newScheduler(t, setupOpts{db: pool, app: app}, func(o *Options) {
			o.Redis = dead
			o.InstanceID = fmt.Sprintf("replica-%d", i)
		})
		for k := range 20 {
			require.NoError(t, s.Register(fmt.Sprintf("task.%02d", k), "* * * * * *", handler))
		}
		all = append(all, s)
	}
	ctx := context.Background()
	for _, s := range all {
		require.NoError(t, s.Start(ctx))
	}
	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	to := from.Add(5 * time.Second)
	time.Sleep(time.Until(to.Add(time.Second)))
	for _, s := range all {
		require.NoError(t, s.Stop(ctx))
	}
	mu.Lock()
	defer mu.Unlock()
	for sec := from; sec.Before(to); sec = sec.Add(time.Second) {
		for k := range 20 {
			id := fireID(app, fmt.Sprintf("task.%02d", k), sec.UnixMilli())
			require.Equal(t, 1, calls[id], id)
		}
	}
}

// A rolling deploy stops one replica mid-minute: the fires it recorded but
// had not started are handed to the other replica, and every fire still
// runs once.
func TestGracefulStopHandsFiresOver(t *testing.T) {
	t.Parallel()
	db := testsvc.Postgres(t)
	app := testsvc.App(t)
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	handler := func(ctx context.Context, run *Run) error {
		mu.Lock()
		calls[run.ID]++
		mu.Unlock()
		return nil
	}
	var all []*Scheduler
	for i := range 2 {
		pool := db
		if i > 0 {
			pool = testsvc.Reopen(t, db)
		}
		s := newScheduler(t, setupOpts{db: pool, app: app}, func(o *Options) {
			o.Redis = testsvc.Redis(t)
			o.InstanceID = fmt.Sprintf("replica-%d", i)
		})
		for k := range 20 {
			require.NoError(t, s.Register(fmt.Sprintf("task.%02d", k), "* * * * * *", handler))
		}
		all = append(all, s)
	}
	ctx := context.Background()
	for _, s := range all {
		require.NoError(t, s.Start(ctx))
	}
	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	to := from.Add(8 * time.Second)
	time.Sleep(time.Until(from.Add(3 * time.Second)))
	require.NoError(t, all[0].Stop(ctx)) // replica-0 leaves in the middle of the window
	time.Sleep(time.Until(to.Add(2 * time.Second)))
	require.NoError(t, all[1].Stop(ctx))
	mu.Lock()
	defer mu.Unlock()
	for sec := from; sec.Before(to); sec = sec.Add(time.Second) {
		for k := range 20 {
			id := fireID(app, fmt.Sprintf("task.%02d", k), sec.UnixMilli())
			require.Equal(t, 1, calls[id], id)
		}
	}
}
