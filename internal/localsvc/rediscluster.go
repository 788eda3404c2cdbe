package localsvc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// ClusterNodeTimeout is the cluster-node-timeout of the clusters started
// here: a master unreachable for longer is failed over to its replica.
const ClusterNodeTimeout = time.Second

// RedisCluster is a Redis Cluster of redis-server processes on 127.0.0.1:
// Masters share the 16384 slots in equal ranges, each with replicasPer
// replicas in Replicas (those of Masters[i] at i*replicasPer...). The
// roles are those at the start: after a failover a replica serves its
// master's slots (Master tells who serves a key).
type RedisCluster struct {
	Masters  []*RedisProcess
	Replicas []*RedisProcess
}

// StartRedisCluster starts masters masters with replicasPer replicas each,
// with their files under dir, assigns the slots, joins the nodes and waits
// until every node reports the cluster ok and sees every replica attached.
// A node down for ClusterNodeTimeout is failed over (the replica validity
// check is off: a replica is promoted however long it was cut off). On an
// error the processes started are stopped.
func StartRedisCluster(ctx context.Context, dir string, masters, replicasPer int) (*RedisCluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("redis cluster: masters = %d, want at least 3 (a failover needs a majority of masters)", masters)
	}
	if replicasPer < 0 {
		return nil, fmt.Errorf("redis cluster: replicasPer = %d, want 0 or more", replicasPer)
	}
	c := &RedisCluster{}
	args := func(port int, d string) ([]string, error) {
		return append(nodeArgs(port, d), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(ClusterNodeTimeout.Milliseconds(), 10),
			"--cluster-replica-validity-factor", "0"), nil
	}
	for i := range masters * (1 + replicasPer) {
		p, err := startRedis(ctx, dir, "cluster", args)
		if err != nil {
			c.Stop()
			return nil, err
		}
		if i < masters {
			c.Masters = append(c.Masters, p)
		} else {
			c.Replicas = append(c.Replicas, p)
		}
	}
	if err := c.form(ctx, replicasPer); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Nodes lists every process, masters first.
func (c *RedisCluster) Nodes() []*RedisProcess {
	return append(append([]*RedisProcess(nil), c.Masters...), c.Replicas...)
}

// Addrs are the addresses of every node, masters first: the seed list of
// a redis.ClusterClient.
func (c *RedisCluster) Addrs() []string {
	var out []string
	for _, p := range c.Nodes() {
		out = append(out, p.Addr())
	}
	return out
}

// Stop stops every node.
func (c *RedisCluster) Stop() { stopAll(c.Nodes()) }

// form assigns the slots, joins the nodes and attaches the replicas.
func (c *RedisCluster) form(ctx context.Context, replicasPer int) error {
	nodes := c.Nodes()
	clients := make([]*redis.Client, len(nodes))
	for i, p := range nodes {
		clients[i] = p.client()
		defer clients[i].Close()
	}
	ids := make([]string, len(nodes))
	for i, cl := range clients {
		id, err := cl.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("redis cluster: CLUSTER MYID on %s: %w", nodes[i].Addr(), err)
		}
		ids[i] = id
	}
	m := len(c.Masters)
	for i := range m {
		lo, hi := i*clusterSlots/m, (i+1)*clusterSlots/m-1
		if err := clients[i].ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return fmt.Errorf("redis cluster: CLUSTER ADDSLOTSRANGE %d %d on %s: %w", lo, hi, nodes[i].Addr(), err)
		}
		// Distinct epochs, as redis-cli --cluster create sets them, so that
		// no collision has to be resolved before the cluster is ok.
		if err := clients[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("redis cluster: CLUSTER SET-CONFIG-EPOCH on %s: %w", nodes[i].Addr(), err)
		}
	}
	for i := 1; i < len(nodes); i++ {
		if err := clients[i].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(nodes[0].Port)).Err(); err != nil {
			return fmt.Errorf("redis cluster: CLUSTER MEET from %s: %w", nodes[i].Addr(), err)
		}
	}
	err := poll(ctx, 30*time.Second, "redis cluster: every node knows every other", func(ctx context.Context) error {
		for i, cl := range clients {
			view, err := clusterView(ctx, cl)
			if err != nil {
				return err
			}
			if len(view) != len(nodes) {
				return fmt.Errorf("%s knows %d nodes of %d", nodes[i].Addr(), len(view), len(nodes))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for j, r := range c.Replicas {
		master := j / max(replicasPer, 1)
		if err := clients[m+j].Do(ctx, "CLUSTER", "REPLICATE", ids[master]).Err(); err != nil {
			return fmt.Errorf("redis cluster: CLUSTER REPLICATE %s on %s: %w", c.Masters[master].Addr(), r.Addr(), err)
		}
	}
	return poll(ctx, 60*time.Second, "redis cluster: state ok with every replica attached", func(ctx context.Context) error {
		return c.healthy(ctx, clients, len(c.Replicas), nil)
	})
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, masterID string
	flags              []string
	slots              int // slot ranges listed
}

func (n clusterNode) has(flag string) bool {
	for _, f := range n.flags {
		if f == flag {
			return true
		}
	}
	return false
}

// clusterView parses a node's CLUSTER NODES.
func clusterView(ctx context.Context, cl *redis.Client) ([]clusterNode, error) {
	out, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var view []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		view = append(view, clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), masterID: f[3], slots: len(f) - 8})
	}
	return view, nil
}

// healthy checks that every node of clients reports cluster_state:ok, sees
// replicas replicas and no node failing, except the node of address
// excluded (a node killed on purpose), which must be seen failed or as a
// replica.
func (c *RedisCluster) healthy(ctx context.Context, clients []*redis.Client, replicas int, excluded *RedisProcess) error {
	for _, cl := range clients {
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster state not ok", cl.Options().Addr)
		}
		view, err := clusterView(ctx, cl)
		if err != nil {
			return err
		}
		n := 0
		for _, node := range view {
			switch {
			case excluded != nil && node.addr == excluded.Addr():
				if !node.has("fail") && !node.has("slave") {
					return fmt.Errorf("%s sees %s (killed) as %v", cl.Options().Addr, node.addr, node.flags)
				}
				continue
			case node.has("fail") || node.has("fail?") || node.has("handshake") || node.has("noaddr"):
				return fmt.Errorf("%s sees %s as %v", cl.Options().Addr, node.addr, node.flags)
			case node.has("slave"):
				n++
			}
		}
		if n != replicas {
			return fmt.Errorf("%s sees %d replicas, want %d", cl.Options().Addr, n, replicas)
		}
	}
	// A replica serves failover only once its copy is in sync.
	for _, cl := range clients {
		info, err := cl.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if strings.Contains(info, "role:slave") && !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("%s: replication link not up", cl.Options().Addr)
		}
	}
	return nil
}

// Master returns the node that serves key's slot now, by the view of a
// live node.
func (c *RedisCluster) Master(ctx context.Context, key string) (*RedisProcess, error) {
	var lastErr error = errors.New("no node running")
	for _, p := range c.Nodes() {
		if !p.Running() {
			continue
		}
		cl := p.client()
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		var shards []redis.ClusterShard
		if err == nil {
			shards, err = cl.ClusterShards(ctx).Result()
		}
		_ = cl.Close()
		if err != nil {
			lastErr = err
			continue
		}
		return c.serving(shards, slot)
	}
	return nil, fmt.Errorf("redis cluster: who serves %q: %w", key, lastErr)
}

// serving finds the node of this cluster that is the master of slot in
// a CLUSTER SHARDS answer.
func (c *RedisCluster) serving(shards []redis.ClusterShard, slot int64) (*RedisProcess, error) {
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if slot < r.Start || slot > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role != "master" {
					continue
				}
				for _, p := range c.Nodes() {
					if p.Port == int(n.Port) {
						return p, nil
					}
				}
				return nil, fmt.Errorf("redis cluster: slot %d served by port %d, not a node of this cluster", slot, n.Port)
			}
		}
	}
	return nil, fmt.Errorf("redis cluster: slot %d not served", slot)
}

// Busiest returns the running master holding the most keys.
func (c *RedisCluster) Busiest(ctx context.Context) (*RedisProcess, int64, error) {
	var best *RedisProcess
	var most int64 = -1
	for _, p := range c.Nodes() {
		if !p.Running() {
			continue
		}
		cl := p.client()
		info, err := cl.Info(ctx, "replication").Result()
		var n int64
		if err == nil && strings.Contains(info, "role:master") {
			n, err = cl.DBSize(ctx).Result()
		} else if err == nil {
			n = -1 // a replica
		}
		_ = cl.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("redis cluster: %s: %w", p.Addr(), err)
		}
		if n > most {
			best, most = p, n
		}
	}
	if best == nil || most < 0 {
		return nil, 0, errors.New("redis cluster: no running master")
	}
	return best, most, nil
}

// KillAndFailOver SIGKILLs the master p and waits until its replica serves
// its slots: every other node reports the cluster ok with p failed. It
// fails at once if p has no replica to promote (the cluster would stay
// down until p is back).
func (c *RedisCluster) KillAndFailOver(ctx context.Context, p *RedisProcess) error {
	var live []*redis.Client
	for _, n := range c.Nodes() {
		if n != p && n.Running() {
			cl := n.client()
			defer cl.Close()
			live = append(live, cl)
		}
	}
	cl := p.client()
	view, err := clusterView(ctx, cl)
	_ = cl.Close()
	if err != nil {
		return fmt.Errorf("redis cluster: CLUSTER NODES on %s: %w", p.Addr(), err)
	}
	var self clusterNode
	replicas := 0
	for _, n := range view {
		if n.has("myself") {
			self = n
		}
		if n.has("slave") && !n.has("fail") {
			replicas++
		}
	}
	if !self.has("master") {
		return fmt.Errorf("redis cluster: %s is not a master (%v)", p.Addr(), self.flags)
	}
	own := 0
	for _, n := range view {
		if n.has("slave") && !n.has("fail") && n.masterID == self.id {
			own++
		}
	}
	if own == 0 {
		return fmt.Errorf("redis cluster: %s has no replica to promote", p.Addr())
	}
	p.Kill()
	// The killed master's replica becomes a master: one replica fewer.
	return poll(ctx, 60*time.Second, "redis cluster: failover of "+p.Addr(), func(ctx context.Context) error {
		return c.healthy(ctx, live, replicas-1, p)
	})
}

// Rejoin starts a killed node again and waits until the cluster sees it as
// a replica in sync (a failed-over master comes back as its successor's
// replica), every node reporting the cluster ok.
func (c *RedisCluster) Rejoin(ctx context.Context, p *RedisProcess) error {
	if err := p.Start(ctx); err != nil {
		return err
	}
	var clients []*redis.Client
	for _, n := range c.Nodes() {
		if n.Running() {
			cl := n.client()
			defer cl.Close()
			clients = append(clients, cl)
		}
	}
	return poll(ctx, 60*time.Second, "redis cluster: "+p.Addr()+" rejoins as a replica", func(ctx context.Context) error {
		return c.healthy(ctx, clients, len(c.Replicas), nil)
	})
}
