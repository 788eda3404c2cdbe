package xtimer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// These tests run a fleet on the Redis topologies users outgrow one Redis
// into: a Redis Cluster (redis.NewClusterClient) and a master with a
// replica watched by Sentinels (redis.NewFailoverClient), each started
// from the installed redis-server by internal/testsvc. Real processes and
// the system clock: they assert outcomes, never timing.

// topoTasks is how many tasks, each firing every second, the fleets run.
const topoTasks = 20

// topoFleet is a fleet of replicas on one database, each with its own
// Redis client on the topology, its own metrics registry, and a shared
// notifier recording the alerts.
type topoFleet struct {
	*fleet
	regs []*prometheus.Registry

	evMu   sync.Mutex
	events []Event
}

func startTopoFleet(t *testing.T, db *gorm.DB, n int, client func(i int) redis.UniversalClient) *topoFleet {
	t.Helper()
	f := &topoFleet{fleet: &fleet{app: testsvc.App(t), tasks: topoTasks, calls: map[string]int{}, lates: map[string]time.Duration{}}}
	handler := func(_ context.Context, run *Run) error {
		f.mu.Lock()
		if f.calls[run.ID]++; f.calls[run.ID] == 1 {
			f.lates[run.ID] = time.Since(run.ScheduledAt)
		}
		f.mu.Unlock()
		return nil
	}
	notify := NotifierFunc(func(_ context.Context, e Event) error {
		f.evMu.Lock()
		f.events = append(f.events, e)
		f.evMu.Unlock()
		return nil
	})
	for i := range n {
		pool := db
		if i > 0 {
			pool = testsvc.Reopen(t, db)
		}
		reg := prometheus.NewRegistry()
		s := newScheduler(t, setupOpts{db: pool, app: f.app}, func(o *Options) {
			o.Redis = client(i)
			o.InstanceID = fmt.Sprintf("replica-%d", i)
			o.Metrics = reg
			o.Notifier = notify
		})
		for k := range f.tasks {
			require.NoError(t, s.Register(taskCodeN(k), "* * * * * *", handler))
		}
		f.replicas = append(f.replicas, s)
		f.regs = append(f.regs, reg)
	}
	for _, s := range f.replicas {
		require.NoError(t, s.Start(context.Background()))
	}
	return f
}

// metric sums, over the replicas, the samples of the metric name whose
// labels include labels.
func (f *topoFleet) metric(t *testing.T, name string, labels map[string]string) (sum float64) {
	t.Helper()
	for i := range f.regs {
		sum += f.replicaMetric(t, i, name, labels)
	}
	return sum
}

func (f *topoFleet) replicaMetric(t *testing.T, i int, name string, labels map[string]string) (sum float64) {
	t.Helper()
	families, err := f.regs[i].Gather()
	assert.NoError(t, err) // not require: the watcher calls it off the test goroutine
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	sample:
		for _, m := range fam.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue sample
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// claimsThroughRedis is how many slot claims the lock backend answered,
// won or lost to another replica, over the fleet.
func (f *topoFleet) claimsThroughRedis(t *testing.T) float64 {
	return f.metric(t, "xtimer_slot_claims_total", map[string]string{"result": "won"}) +
		f.metric(t, "xtimer_slot_claims_total", map[string]string{"result": "lost"})
}

func (f *topoFleet) alerted(kind EventKind) bool {
	f.evMu.Lock()
	defer f.evMu.Unlock()
	return slices.ContainsFunc(f.events, func(e Event) bool { return e.Kind == kind })
}

// settle checks every fire of every task at whole seconds in [from, to)
// against what the handlers saw (keyed by Run.ID) and the execution rows:
// a fire that ran once has one row, succeeded; a fire that never ran must
// be recorded skipped with a reason (its misfire policy's), or it is
// missed. The replicas are stopped first, so every row is written.
func (f *topoFleet) settle(t *testing.T, from, to time.Time) (once, dup, skipped, missed int) {
	t.Helper()
	ctx := context.Background()
	rows := map[string]Execution{}
	filter := ExecutionFilter{From: from, To: to, Limit: MaxPageLimit}
	for {
		page, err := f.replicas[0].Executions(ctx, filter)
		require.NoError(t, err)
		for _, e := range page.Executions {
			id := engine.FireID(f.app, e.Code, e.RunTime.UnixMilli())
			_, seen := rows[id]
			require.False(t, seen, "two rows for fire %s", id)
			rows[id] = e
		}
		if page.Next == "" {
			break
		}
		filter.After = page.Next
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for sec := from; sec.Before(to); sec = sec.Add(time.Second) {
		for k := range f.tasks {
			id := engine.FireID(f.app, taskCodeN(k), sec.UnixMilli())
			row, recorded := rows[id]
			switch n := f.calls[id]; {
			case n > 1:
				dup++
				t.Logf("fire %s ran %d times (row: %+v)", id, n, row)
			case n == 1:
				once++
				assert.True(t, recorded, "fire %s ran without a row", id)
				assert.Equal(t, StatusSucceeded, row.Status, "row of fire %s", id)
			case recorded && row.Status == StatusSkipped && row.Reason != "":
				skipped++
			default:
				missed++
				t.Logf("fire %s never ran (recorded %v, row: %+v)", id, recorded, row)
			}
		}
	}
	return once, dup, skipped, missed
}

// A fleet of three replicas claims its slots through a 3-master Redis
// Cluster: every fire of the window runs once, and the claims went through
// the cluster, not the database fallback.
func TestFleetOnRedisClusterRunsEveryFireOnce(t *testing.T) {
	t.Parallel()
	cluster := testsvc.StartRedisCluster(t)
	f := startTopoFleet(t, testsvc.Postgres(t), 3, func(int) redis.UniversalClient { return cluster.NewClient(t) })
	from, to := window(8 * time.Second)
	sleepUntil(to.Add(2 * time.Second))
	// Read before Stop, which unregisters the metrics.
	require.Positive(t, f.metric(t, "xtimer_slot_claims_total", map[string]string{"result": "won"}), "slots won through the cluster")
	n, err := cluster.Client.DBSize(context.Background()).Result() // summed over the masters
	require.NoError(t, err)
	require.Positive(t, n, "the liveness and slot locks live on the cluster (released at Stop)")
	f.stop(t, f.replicas...)

	once, dup, skipped, missed := f.settle(t, from, to)
	require.Zero(t, dup, "fires run more than once")
	require.Zero(t, missed, "fires never run nor recorded skipped")
	require.Equal(t, 8*topoTasks, once+skipped)
}

// The same fleet through redis.NewFailoverClient on a master, a replica
// and three Sentinels.
func TestFleetOnRedisSentinelRunsEveryFireOnce(t *testing.T) {
	t.Parallel()
	sentinel := testsvc.StartRedisSentinel(t)
	f := startTopoFleet(t, testsvc.Postgres(t), 3, func(int) redis.UniversalClient { return sentinel.NewClient(t) })
	from, to := window(8 * time.Second)
	sleepUntil(to.Add(2 * time.Second))
	require.Positive(t, f.metric(t, "xtimer_slot_claims_total", map[string]string{"result": "won"}), "slots won through the Sentinel master")
	f.stop(t, f.replicas...)

	once, dup, skipped, missed := f.settle(t, from, to)
	require.Zero(t, dup, "fires run more than once")
	require.Zero(t, missed, "fires never run nor recorded skipped")
	require.Equal(t, 8*topoTasks, once+skipped)
}

// The Sentinel master is SIGKILLed mid-run and the replica promoted; the
// locks the old master granted and had not replicated are lost. Every
// fire of the window still runs once (the database's unique key and the
// fenced start guard while Redis is away and after it forgot locks), the
// fallback shows in Health, in the metrics and as a redis.fallback_entered
// alert while Redis is unreachable, and the fleet claims through Redis
// again after the promotion (redis.fallback_left).
func TestSentinelFailoverKeepsEveryFireOnce(t *testing.T) {
	t.Parallel()
	sentinel := testsvc.StartRedisSentinel(t)
	f := startTopoFleet(t, testsvc.Postgres(t), 3, func(int) redis.UniversalClient { return sentinel.NewClient(t) })
	from, _ := window(time.Second)
	sleepUntil(from.Add(3 * time.Second))

	// Watch Health and the fallback gauge from just before the kill until
	// the promotion: what the replicas show while Redis is away. Apart: a
	// Health call waits for Redis (up to its timeout) while the master is
	// down, and the gauge, read in the same loop, was read too seldom to
	// see the fallback's few seconds.
	var healthDown, gaugeUp atomic.Bool
	watching := make(chan struct{})
	var watched sync.WaitGroup
	watch := func(look func()) {
		watched.Go(func() {
			for {
				look()
				select {
				case <-watching:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
	watch(func() {
		for _, s := range f.replicas {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			h := s.Health(ctx)
			cancel()
			if !h.Redis.OK {
				healthDown.Store(true)
			}
		}
	})
	watch(func() {
		for i := range f.replicas {
			if f.replicaMetric(t, i, "xtimer_redis_fallback", nil) == 1 {
				gaugeUp.Store(true)
			}
		}
	})
	killed, promoted := sentinel.KillMaster(t)
	t.Logf("master %s killed, %s promoted", killed, promoted)
	// The fallback stays on, on the replicas that entered it, until a claim
	// goes through Redis again: watch until every replica is back.
	claimsAtPromotion := f.claimsThroughRedis(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Zero(c, f.metric(t, "xtimer_redis_fallback", nil), "replicas still in fallback")
		assert.Greater(c, f.claimsThroughRedis(t), claimsAtPromotion, "no claim through Redis since the promotion")
		assert.True(c, f.alerted(EventFallbackLeft), "no redis.fallback_left alert yet")
	}, 2*time.Minute, 200*time.Millisecond)
	close(watching)
	watched.Wait()
	for _, s := range f.replicas {
		h := s.Health(context.Background())
		require.True(t, h.Redis.OK, "Health after the promotion: %+v", h.Redis)
	}
	require.True(t, healthDown.Load(), "Health showed Redis unreachable while the master was down")
	require.True(t, gaugeUp.Load(), "xtimer_redis_fallback was 1 on a replica while the master was down")
	require.True(t, f.alerted(EventFallbackEntered), "a redis.fallback_entered alert was sent")
	require.Positive(t, f.metric(t, "xtimer_alerts_total", map[string]string{"kind": string(EventFallbackEntered), "result": "sent"}))

	// The old master comes back as a replica; the window closes a few
	// seconds after the fleet is back on Redis.
	sentinel.Rejoin(t, killed)
	to := time.Now().Truncate(time.Second).Add(3 * time.Second)
	sleepUntil(to.Add(2 * time.Second))
	f.stop(t, f.replicas...)

	once, dup, skipped, missed := f.settle(t, from, to)
	t.Logf("window %s: %d fires, once=%d duplicates=%d skipped=%d missed=%d",
		to.Sub(from), int(to.Sub(from)/time.Second)*topoTasks, once, dup, skipped, missed)
	require.Zero(t, dup, "fires run more than once")
	require.Zero(t, missed, "fires never run nor recorded skipped")
	require.Equal(t, int(to.Sub(from)/time.Second)*topoTasks, once+skipped)
}
