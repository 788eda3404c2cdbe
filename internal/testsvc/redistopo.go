package testsvc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xtimer-go/xtimer/internal/localsvc"
)

// topologyTimeout bounds the start of a cluster or a Sentinel set and each
// failover a test asks for.
const topologyTimeout = 2 * time.Minute

// RedisCluster is a 3-master Redis Cluster private to one test, started
// from the installed redis-server on free ports (internal/localsvc).
type RedisCluster struct {
	// Addrs are the nodes' addresses, the seed list of a ClusterClient.
	Addrs []string
	// Client is a cluster client on it, closed when the test ends.
	Client *redis.ClusterClient
	// Topology is the processes, for faults (KillAndFailOver needs
	// replicas; StartRedisCluster starts none).
	Topology *localsvc.RedisCluster
}

// StartRedisCluster starts a Redis Cluster of three masters, with their
// data in t.TempDir(), every slot assigned and the cluster state ok on every
// node, and stops it when the test ends. Without redis-server it skips t
// (fails it under XTIMER_REQUIRE_SERVICES=1).
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	topo, err := localsvc.StartRedisCluster(ctx, t.TempDir(), 3, 0)
	if err != nil {
		startFailed(t, "Redis Cluster", err)
	}
	t.Cleanup(topo.Stop)
	c := &RedisCluster{Addrs: topo.Addrs(), Topology: topo}
	c.Client = c.NewClient(t)
	return c
}

// NewClient returns another client on the cluster (one per replica, as
// separate processes have), closed when the test ends.
func (c *RedisCluster) NewClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// RedisSentinel is a Redis master, one replica and three Sentinels private
// to one test (internal/localsvc).
type RedisSentinel struct {
	// SentinelAddrs are the Sentinels' addresses.
	SentinelAddrs []string
	// MasterName is the name the Sentinels monitor the master under.
	MasterName string
	// Client is a failover client on it, closed when the test ends.
	Client *redis.Client
	// Topology is the processes, for faults.
	Topology *localsvc.RedisSentinel
}

// StartRedisSentinel starts a master, one replica and three Sentinels
// (quorum 2, down-after-milliseconds 1000, failover-timeout 3000), with
// their data in t.TempDir(), waits until a failover could run, and stops
// them when the test ends. Without redis-server it skips t (fails it under
// XTIMER_REQUIRE_SERVICES=1).
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	topo, err := localsvc.StartRedisSentinel(ctx, t.TempDir(), 1)
	if err != nil {
		startFailed(t, "Redis Sentinel", err)
	}
	t.Cleanup(topo.Stop)
	s := &RedisSentinel{SentinelAddrs: topo.SentinelAddrs(), MasterName: localsvc.SentinelMasterName, Topology: topo}
	s.Client = s.NewClient(t)
	return s
}

// NewClient returns another failover client (one per replica, as separate
// processes have), closed when the test ends.
func (s *RedisSentinel) NewClient(t testing.TB) *redis.Client {
	t.Helper()
	cl := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// KillMaster SIGKILLs the current master and returns once every Sentinel
// names the promoted replica and it answers as master: the old master's
// address and the new one's. The killed node stays down (Rejoin).
func (s *RedisSentinel) KillMaster(t testing.TB) (killed, promoted string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	k, p, err := s.Topology.KillMaster(ctx)
	if err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	return k.Addr(), p.Addr()
}

// Rejoin starts the killed node of address addr again and returns once
// the set is whole (localsvc's RedisSentinel.Rejoin): it replicates the
// current master in sync, or the Sentinels failed over to it once more
// and the others replicate it.
func (s *RedisSentinel) Rejoin(t testing.TB, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	for _, n := range s.Topology.Nodes {
		if n.Addr() == addr {
			if err := s.Topology.Rejoin(ctx, n); err != nil {
				t.Fatalf("testsvc: %v", err)
			}
			return
		}
	}
	t.Fatalf("testsvc: Rejoin: %s is not a node of this topology", addr)
}

// startFailed skips t when redis-server is missing (fails it under
// XTIMER_REQUIRE_SERVICES=1), and fails it on any other error.
func startFailed(t testing.TB, what string, err error) {
	t.Helper()
	if errors.Is(err, localsvc.ErrNoRedisServer) {
		unavailable(t, what, err, "apt-get install redis-server")
	}
	t.Fatalf("testsvc: start %s: %v", what, err)
}
