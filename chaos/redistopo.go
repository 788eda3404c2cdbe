package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer/internal/localsvc"
)

// This file runs the fleet on the Redis topologies users outgrow one Redis
// into (issue 24): a Redis Cluster of three masters with a replica each,
// and a master with a replica watched by three Sentinels, started from the
// installed redis-server by internal/localsvc. The replicas connect with
// redis.NewClusterClient or redis.NewFailoverClient (replica/main.go's
// -redis-cluster and -sentinels), and the faults SIGKILL the Redis master
// that holds the app's keys mid-run: a replica is promoted, the locks the
// old master granted and had not replicated are lost, and the killed node
// comes back later as a replica.

// The Redis topologies of profile.redis.
const (
	redisStandalone = "standalone" // one redis-server (redisServer, servers.go)
	redisCluster    = "cluster"
	redisSentinel   = "sentinel"
)

// The fault kinds of the topologies.
const (
	// faultSentinelFailover SIGKILLs the master the Sentinels name.
	faultSentinelFailover faultKind = "sentinel_failover"
	// faultClusterFailover SIGKILLs the cluster master holding the most
	// keys: the app's.
	faultClusterFailover faultKind = "cluster_failover"
)

// rejoinAfter is how long a killed Redis master stays down after its
// replica was promoted, before it is started again (as a replica).
const rejoinAfter = 5 * time.Second

// redisFailoverLimit bounds a failover and a rejoin.
const redisFailoverLimit = time.Minute

func init() {
	faultOrder = append(faultOrder, faultSentinelFailover, faultClusterFailover)
	// Each Redis failover is one fault; the gaps leave it room (about
	// 3 s to promote, rejoinAfter, a few seconds to resync) before the
	// next. The rolling deploy comes first, as in every profile; a replica
	// kill between the failovers, not last (its rows are rescued after the
	// 30 s replica timeout).
	profiles[redisCluster] = profile{
		name: redisCluster, redis: redisCluster, replicas: 3, tasks: 50, length: 75 * time.Second,
		faults: []faultKind{faultRolling, faultClusterFailover, faultKill, faultClusterFailover},
		gapMin: 8 * time.Second, gapMax: 10 * time.Second,
		dbDown: 10 * time.Second, killWait: 3 * time.Second, rollWait: 4 * time.Second,
	}
	profiles[redisSentinel] = profile{
		name: redisSentinel, redis: redisSentinel, replicas: 3, tasks: 50, length: 75 * time.Second,
		faults: []faultKind{faultRolling, faultSentinelFailover, faultKill, faultSentinelFailover},
		gapMin: 8 * time.Second, gapMax: 10 * time.Second,
		dbDown: 10 * time.Second, killWait: 3 * time.Second, rollWait: 4 * time.Second,
	}
}

// redisTopology is the cluster or the Sentinel set of a run.
type redisTopology struct {
	cluster  *localsvc.RedisCluster
	sentinel *localsvc.RedisSentinel
}

// startRedis starts the profile's Redis: one server, a cluster of three
// masters and three replicas, or a master, a replica and three Sentinels.
func (h *harness) startRedis() error {
	dir := filepath.Join(h.tmp, "redis")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch h.prof.redis {
	case "", redisStandalone:
		rport, err := localsvc.FreePort()
		if err != nil {
			return err
		}
		h.redis = &redisServer{port: rport, dir: dir, log: filepath.Join(h.tmp, "logs", "redis.log")}
		h.onCleanup(h.redis.stop)
		return h.redis.start()
	case redisCluster:
		c, err := localsvc.StartRedisCluster(ctx, dir, 3, 1)
		if err != nil {
			return err
		}
		h.topo = &redisTopology{cluster: c}
		h.onCleanup(c.Stop)
		return nil
	case redisSentinel:
		s, err := localsvc.StartRedisSentinel(ctx, dir, 1)
		if err != nil {
			return err
		}
		h.topo = &redisTopology{sentinel: s}
		h.onCleanup(s.Stop)
		return nil
	}
	return fmt.Errorf("profile %s: redis %q: want standalone, cluster or sentinel", h.prof.name, h.prof.redis)
}

// redisDesc says where Redis runs, for the start-up line.
func (h *harness) redisDesc() string {
	switch {
	case h.topo != nil && h.topo.cluster != nil:
		return "Redis Cluster on " + strings.Join(h.topo.cluster.Addrs(), ",")
	case h.topo != nil && h.topo.sentinel != nil:
		return fmt.Sprintf("Redis master %s with a replica, Sentinels on %s", h.topo.sentinel.Nodes[0].Addr(),
			strings.Join(h.topo.sentinel.SentinelAddrs(), ","))
	}
	return "redis-server on " + h.redis.addr()
}

// redisArgs are the replica flags that name the Redis of the run;
// standalone is the single server's address as the replica reaches it
// (through its proxy in a partition profile).
func (h *harness) redisArgs(standalone string) []string {
	switch {
	case h.topo != nil && h.topo.cluster != nil:
		return []string{"-redis-cluster", strings.Join(h.topo.cluster.Addrs(), ",")}
	case h.topo != nil && h.topo.sentinel != nil:
		return []string{"-sentinels", strings.Join(h.topo.sentinel.SentinelAddrs(), ","), "-master", localsvc.SentinelMasterName}
	}
	return []string{"-redis", standalone}
}

// sentinelFailover SIGKILLs the Sentinel master, waits for the promotion
// and, rejoinAfter later, starts the killed node again as a replica.
func (h *harness) sentinelFailover() {
	if h.topo == nil || h.topo.sentinel == nil {
		h.logf("%s: the profile runs no Sentinels", faultSentinelFailover)
		return
	}
	s := h.topo.sentinel
	ctx, cancel := context.WithTimeout(context.Background(), redisFailoverLimit)
	defer cancel()
	at := time.Now()
	killed, promoted, err := s.KillMaster(ctx)
	if err != nil {
		h.logf("sentinel failover: %v", err)
		return
	}
	h.logf("SIGKILL Redis master %s; the Sentinels promoted %s after %.1fs", killed.Addr(), promoted.Addr(), time.Since(at).Seconds())
	time.Sleep(rejoinAfter)
	rctx, rcancel := context.WithTimeout(context.Background(), redisFailoverLimit)
	defer rcancel()
	if err := s.Rejoin(rctx, killed); err != nil {
		h.logf("sentinel failover: %v", err)
		return
	}
	h.logf("%s back as a replica of %s", killed.Addr(), promoted.Addr())
}

// clusterFailover SIGKILLs the cluster master holding the most keys (the
// app's locks), waits until its replica serves its slots and, rejoinAfter
// later, starts the killed node again as a replica.
func (h *harness) clusterFailover() {
	if h.topo == nil || h.topo.cluster == nil {
		h.logf("%s: the profile runs no Redis Cluster", faultClusterFailover)
		return
	}
	c := h.topo.cluster
	ctx, cancel := context.WithTimeout(context.Background(), redisFailoverLimit)
	defer cancel()
	victim, keys, err := c.Busiest(ctx)
	if err != nil {
		h.logf("cluster failover: %v", err)
		return
	}
	at := time.Now()
	if err := c.KillAndFailOver(ctx, victim); err != nil {
		h.logf("cluster failover: %v", err)
		return
	}
	h.logf("SIGKILL Redis Cluster master %s (%d keys); its replica serves its slots after %.1fs", victim.Addr(), keys, time.Since(at).Seconds())
	time.Sleep(rejoinAfter)
	rctx, rcancel := context.WithTimeout(context.Background(), redisFailoverLimit)
	defer rcancel()
	if err := c.Rejoin(rctx, victim); err != nil {
		h.logf("cluster failover: %v", err)
		return
	}
	h.logf("%s back in the cluster as a replica", victim.Addr())
}
