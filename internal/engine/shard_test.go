package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// crash stops e as a SIGKILL stops its process: the loops end with
// nothing handed over, no lock released and nothing more written (what
// its status writer holds is lost), its row left for its heartbeat to
// expire, and its running handlers' contexts cancelled.
func (s *Engine) crash() {
	s.halt()
	s.cancelHandler()
	s.attempts.Wait()
	_ = s.alerts.stop(context.Background())
	s.metrics.unregister()
}

// halt stops e's loops as a signal that stops its process does: nothing
// handed over, no lock released, nothing more written, no heartbeat.
func (s *Engine) halt() {
	s.mu.Lock()
	s.state = stateStopped
	s.mu.Unlock()
	s.stopLoops()
	s.updates.Base.Stop()
	s.pauses.Base.Stop()
}

// shardRuns records who ran which shard, by Attempt.ID, as the handler
// saw it.
type shardRuns struct {
	mu   sync.Mutex
	runs map[string][]string // Attempt.ID → replicas, one per attempt
	ids  map[string]*Attempt
	// inflight counts the handlers running, blocked those of them waiting
	// for their context: the fleet's advance waits for the others to
	// return. (The tasks have no timeout: a timeout is a timer of the
	// injected clock, which the advance would take for a loop's.)
	inflight, blocked int
}

func newShardRuns() *shardRuns {
	return &shardRuns{runs: map[string][]string{}, ids: map[string]*Attempt{}}
}

// handler records the attempt; then, for an attempt block names, waits
// for its context (a run cut off by its replica's death).
func (r *shardRuns) handler(block func(a *Attempt) bool) Handler {
	return func(ctx context.Context, a *Attempt) error {
		r.mu.Lock()
		r.runs[a.ID] = append(r.runs[a.ID], a.Replica)
		r.ids[a.ID] = a
		r.inflight++
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.inflight--
			r.mu.Unlock()
		}()
		if block != nil && block(a) {
			r.mu.Lock()
			r.blocked++
			r.mu.Unlock()
			<-ctx.Done()
			r.mu.Lock()
			r.blocked--
			r.mu.Unlock()
			return ctx.Err()
		}
		return nil
	}
}

// idle waits until the only handlers running are the blocked ones, and
// returns how many those are.
func (r *shardRuns) idle(t *testing.T) int {
	t.Helper()
	var blocked int
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		blocked = r.blocked
		return r.inflight == r.blocked
	}, 10*time.Second, time.Millisecond)
	return blocked
}

func (r *shardRuns) of(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs[id])
}

// shardFleet is three engines of one app on one database and one lock
// (the in-process locker stands for Redis), with the injected clock.
type shardFleet struct {
	runs    *shardRuns
	db      *gorm.DB
	app     string
	clock   *fakeclock.Clock
	engines []*Engine
	names   []string
}

func newShardFleet(t *testing.T, db *gorm.DB, start time.Time, runs *shardRuns, register func(e *Engine)) *shardFleet {
	t.Helper()
	f := &shardFleet{runs: runs, db: db, app: testsvc.App(t), clock: fakeclock.New(start)}
	locker := NewLocalLocker(f.clock)
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		e := newEngine(t, setupOpts{db: db, clock: f.clock, app: f.app}, func(c *Config) {
			c.InstanceID, c.Locker = name, locker
		})
		register(e)
		require.NoError(t, e.Start(context.Background()))
		stopOnCleanup(t, e)
		f.engines, f.names = append(f.engines, e), append(f.names, name)
	}
	return f
}

// live are the engines not crashed.
func (f *shardFleet) live() []*Engine {
	var out []*Engine
	for _, e := range f.engines {
		e.mu.Lock()
		if e.state == stateRunning {
			out = append(out, e)
		}
		e.mu.Unlock()
	}
	return out
}

// advanceTo moves the clock to at in steps of 250ms, each once every
// live engine's loops wait on it.
func (f *shardFleet) advanceTo(ctx context.Context, t *testing.T, at time.Time) {
	t.Helper()
	for f.clock.Now().Before(at) {
		f.waitIdle(ctx, t)
		f.clock.Advance(min(250*time.Millisecond, at.Sub(f.clock.Now())))
	}
	f.waitIdle(ctx, t)
}

// waitIdle is the package's waitIdle for the live engines, counting the
// timers of the handlers that block.
func (f *shardFleet) waitIdle(ctx context.Context, t *testing.T) {
	t.Helper()
	f.runs.idle(t)
	n := 0
	for _, e := range f.live() {
		n += e.ClockTimers()
	}
	require.NoError(t, f.clock.BlockUntil(ctx, n))
}

// rows reads the task's rows of the fire at run time at, by shard.
func (f *shardFleet) rows(t *testing.T, code string, at time.Time) []store.Execution {
	t.Helper()
	var rows []store.Execution
	require.NoError(t, f.db.Where("app = ? AND task_code = ? AND run_time = ?", f.app, code, at.UnixMilli()).Order("shard").Find(&rows).Error)
	return rows
}

// waitStatus waits until execution id has status (rows are written in
// batches, off the fire path) and returns it.
func (f *shardFleet) waitStatus(t *testing.T, id int64, status string) store.Execution {
	t.Helper()
	var r store.Execution
	require.Eventually(t, func() bool {
		require.NoError(t, f.db.First(&r, id).Error)
		return r.Status == status
	}, 10*time.Second, 5*time.Millisecond, "execution %d never %s", id, status)
	return r
}

// The promise of WithShards, on every backend: a fire's 12 shards are
// dealt over the three live replicas, four each, and each runs once. A
// replica killed while its shards of one fire run, and holding its
// shards of the next fires: the runs it started are settled by the retry
// policy (failed, "replica lost": one attempt allowed), never started
// again; its unstarted shards are taken over by the other two within the
// failover gap (its liveness lock's TTL, the grace, a tick), and run
// once there; the fires recorded after it is gone are dealt over the
// two.
func TestShardsOfAKilledReplicaRunOnceOnTheOthers(t *testing.T) {
	for _, b := range testsvc.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			runs := newShardRuns()
			start := time.Date(2026, 12, 1, 10, 0, 35, 0, time.UTC)
			first := time.Date(2026, 12, 1, 10, 1, 0, 0, time.UTC)
			block := func(a *Attempt) bool { return a.Replica == "replica-c" && a.ScheduledAt.Equal(first) }
			f := newShardFleet(t, b.Open(t), start, runs, func(e *Engine) {
				mustRegister(t, e, "split", "*/10 * * * * *", runs.handler(block), func(d *store.Definition) { d.Shards, d.TimeoutMs = 12, 0 })
			})

			// The minute of 10:01 is recorded at 10:00:50, when every
			// replica's heartbeat has been read; its first fire starts
			// everywhere.
			f.advanceTo(ctx, t, first.Add(500*time.Millisecond))
			for i := range 12 {
				id := fmt.Sprintf("%s/split/%d/%d", f.app, first.UnixMilli(), i)
				require.Eventually(t, func() bool { return len(runs.of(id)) == 1 }, 10*time.Second, 5*time.Millisecond, "shard %d", i)
			}
			rows := f.rows(t, "split", first)
			require.Len(t, rows, 12)
			per := map[string]int{}
			for i, r := range rows {
				require.Equal(t, i, r.Shard)
				require.Equal(t, 12, r.Shards)
				per[r.Replica]++
				id := fmt.Sprintf("%s/split/%d/%d", f.app, first.UnixMilli(), i)
				require.Equal(t, []string{r.Replica}, runs.of(id), "shard %d runs once, on the replica it was dealt to", i)
				runs.mu.Lock()
				a := runs.ids[id]
				runs.mu.Unlock()
				require.Equal(t, i, a.Shard)
				require.Equal(t, 12, a.Shards)
			}
			require.Equal(t, map[string]int{"replica-a": 4, "replica-b": 4, "replica-c": 4}, per, "dealt round the live replicas")
			// The fires are recorded recordAhead before their run time: on
			// to 10:01:05.5, when 10:01:10's are.
			f.advanceTo(ctx, t, first.Add(recordAhead+500*time.Millisecond))
			var cShards []int
			for _, r := range f.rows(t, "split", first.Add(10*time.Second)) {
				if r.Replica == "replica-c" {
					cShards = append(cShards, r.Shard)
				}
			}
			require.Len(t, cShards, 4, "replica-c holds four shards of 10:01:10 too")

			// replica-c dies with its four shards of 10:01:00 running.
			f.engines[2].crash()

			// 10:01:10: its shards are taken over once its liveness lock has
			// expired, and run once on the others.
			next := first.Add(10 * time.Second)
			f.advanceTo(ctx, t, next.Add(slotLockTTL+shardGrace+2*time.Second))
			for _, shard := range cShards {
				id := fmt.Sprintf("%s/split/%d/%d", f.app, next.UnixMilli(), shard)
				require.Eventually(t, func() bool { return len(runs.of(id)) == 1 }, 10*time.Second, 5*time.Millisecond, "shard %d", shard)
				require.NotEqual(t, "replica-c", runs.of(id)[0])
			}

			// The rest of the minute and the next one: every shard once, none
			// on the dead replica, the late ones within the failover gap.
			end := first.Add(time.Minute + 10*time.Second)
			f.advanceTo(ctx, t, end)
			f.advanceTo(ctx, t, end.Add(45*time.Second)) // past ReplicaTimeout: the runs it started are rescued
			for at := next; !at.After(end); at = at.Add(10 * time.Second) {
				rows := f.rows(t, "split", at)
				require.Len(t, rows, 12, "fire %s", at.Format(time.TimeOnly))
				for _, r := range rows {
					id := fmt.Sprintf("%s/split/%d/%d", f.app, at.UnixMilli(), r.Shard)
					require.Eventually(t, func() bool { return len(runs.of(id)) == 1 }, 10*time.Second, 5*time.Millisecond, "fire %s shard %d", at.Format(time.TimeOnly), r.Shard)
					require.NotEqual(t, "replica-c", runs.of(id)[0])
					require.NotEqual(t, "replica-c", r.Replica)
					r = f.waitStatus(t, r.ID, store.StatusSucceeded)
					require.LessOrEqual(t, r.StartedMs-r.RunTime, (slotLockTTL + shardGrace + 2*time.Second).Milliseconds(),
						"fire %s shard %d started within the failover gap", at.Format(time.TimeOnly), r.Shard)
				}
			}
			for _, r := range f.rows(t, "split", first) {
				if r.Replica != "replica-c" {
					continue
				}
				r = f.waitStatus(t, r.ID, store.StatusFailed)
				require.Equal(t, store.ReasonReplicaLost, r.Reason)
				require.Len(t, runs.of(fmt.Sprintf("%s/split/%d/%d", f.app, first.UnixMilli(), r.Shard)), 1, "never started again")
			}
		})
	}
}

// The promise of WithBroadcast: each fire runs once on every live
// replica that runs the task, one shard each. A replica killed after a
// fire was dealt (recordAhead before it) has its shard of that fire
// recorded skipped, "replica lost", and run nowhere else; the fires dealt
// once it is known dead go to the two others.
func TestBroadcastShardsOfAKilledReplicaAreSkippedNotRunElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	runs := newShardRuns()
	start := time.Date(2026, 12, 1, 10, 0, 35, 0, time.UTC)
	first := time.Date(2026, 12, 1, 10, 1, 0, 0, time.UTC)
	f := newShardFleet(t, testsvc.Postgres(t), start, runs, func(e *Engine) {
		mustRegister(t, e, "everywhere", "*/10 * * * * *", runs.handler(nil), func(d *store.Definition) { d.Broadcast, d.TimeoutMs = true, 0 })
	})
	f.advanceTo(ctx, t, first.Add(500*time.Millisecond))
	rows := f.rows(t, "everywhere", first)
	require.Len(t, rows, 3)
	for i, r := range rows {
		require.Equal(t, f.names[i], r.Replica, "one shard per replica, in ID order")
		require.True(t, r.Broadcast)
		require.Equal(t, 3, r.Shards)
		id := fmt.Sprintf("%s/everywhere/%d/%d", f.app, first.UnixMilli(), i)
		require.Eventually(t, func() bool { return slices.Equal(runs.of(id), []string{f.names[i]}) }, 10*time.Second, 5*time.Millisecond)
	}

	// replica-c dies once 10:01:10 is dealt, at 10:01:05.5.
	f.advanceTo(ctx, t, first.Add(recordAhead+500*time.Millisecond))
	require.Len(t, f.rows(t, "everywhere", first.Add(10*time.Second)), 3, "dealt with three replicas live")
	f.engines[2].crash()
	end := first.Add(50 * time.Second)
	f.advanceTo(ctx, t, end.Add(slotLockTTL+shardGrace+2*time.Second))
	for at := first.Add(10 * time.Second); !at.After(end); at = at.Add(10 * time.Second) {
		dealt := f.rows(t, "everywhere", at)
		if len(dealt) == 2 {
			require.Equal(t, []string{"replica-a", "replica-b"}, []string{dealt[0].Replica, dealt[1].Replica}, "dealt once replica-c was known dead")
		} else {
			require.Len(t, dealt, 3, "dealt before replica-c was known dead")
		}
		for i, r := range dealt {
			id := fmt.Sprintf("%s/everywhere/%d/%d", f.app, at.UnixMilli(), i)
			if r.Replica == "replica-c" {
				r = f.waitStatus(t, r.ID, store.StatusSkipped)
				require.Equal(t, store.ReasonReplicaLost, r.Reason)
				require.Empty(t, runs.of(id), "never run elsewhere")
				continue
			}
			require.Eventually(t, func() bool { return slices.Equal(runs.of(id), []string{r.Replica}) }, 10*time.Second, 5*time.Millisecond,
				"fire %s shard %d", at.Format(time.TimeOnly), i)
		}
	}

	// Once its heartbeat has expired, the next minute is dealt to two.
	next := first.Add(2 * time.Minute)
	f.advanceTo(ctx, t, next.Add(500*time.Millisecond))
	rows = f.rows(t, "everywhere", next)
	require.Len(t, rows, 2)
	require.Equal(t, []string{"replica-a", "replica-b"}, []string{rows[0].Replica, rows[1].Replica})
	for i, r := range rows {
		id := fmt.Sprintf("%s/everywhere/%d/%d", f.app, next.UnixMilli(), i)
		require.Eventually(t, func() bool { return slices.Equal(runs.of(id), []string{r.Replica}) }, 10*time.Second, 5*time.Millisecond)
	}
}
