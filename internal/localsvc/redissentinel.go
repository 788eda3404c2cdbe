package localsvc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Settings of the Sentinel topologies started here.
const (
	// SentinelMasterName is the name the Sentinels monitor the master under.
	SentinelMasterName = "xtimer"
	// SentinelQuorum Sentinels must agree that the master is down.
	SentinelQuorum = 2
	// SentinelDownAfter is down-after-milliseconds: a master silent this
	// long is down for a Sentinel.
	SentinelDownAfter = time.Second
	// SentinelFailoverTimeout is failover-timeout: a failover that did not
	// finish is tried again after twice this.
	SentinelFailoverTimeout = 3 * time.Second
)

// RedisSentinel is a Redis master with replicas and three Sentinels
// monitoring it as SentinelMasterName. Nodes are the data nodes (Nodes[0]
// the master at the start); after a failover the Sentinels name the
// master (Master).
type RedisSentinel struct {
	Nodes     []*RedisProcess
	Sentinels []*RedisProcess
}

// StartRedisSentinel starts a master, replicas replicas of it and three
// Sentinels (quorum SentinelQuorum, SentinelDownAfter,
// SentinelFailoverTimeout), with their files under dir, and waits until
// every replica is in sync and every Sentinel knows the replicas and the
// other Sentinels, so that a failover can run. On an error the processes
// started are stopped.
func StartRedisSentinel(ctx context.Context, dir string, replicas int) (*RedisSentinel, error) {
	if replicas < 1 {
		return nil, fmt.Errorf("redis sentinel: replicas = %d, want at least 1 (a failover promotes one)", replicas)
	}
	s := &RedisSentinel{}
	// Data nodes read a config file, which Sentinel rewrites (CONFIG
	// REWRITE) when it makes a node a replica: a node restarted after a
	// failover comes back in its new role.
	node := func(replicaOf int) func(int, string) ([]string, error) {
		return func(port int, d string) ([]string, error) {
			var b strings.Builder
			a := nodeArgs(port, d)
			for i := 0; i+1 < len(a); i += 2 {
				v := a[i+1]
				if v == "" {
					v = `""`
				}
				fmt.Fprintf(&b, "%s %s\n", strings.TrimPrefix(a[i], "--"), v)
			}
			if replicaOf > 0 {
				fmt.Fprintf(&b, "replicaof 127.0.0.1 %d\n", replicaOf)
			}
			path := filepath.Join(d, "redis.conf")
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				return nil, err
			}
			return []string{path}, nil
		}
	}
	master, err := startRedis(ctx, dir, "node", node(0))
	if err != nil {
		return nil, err
	}
	s.Nodes = append(s.Nodes, master)
	for range replicas {
		p, err := startRedis(ctx, dir, "node", node(master.Port))
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.Nodes = append(s.Nodes, p)
	}
	sentinel := func(port int, d string) ([]string, error) {
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n"+
			"sentinel monitor %s 127.0.0.1 %d %d\n"+
			"sentinel down-after-milliseconds %[3]s %[6]d\n"+
			"sentinel failover-timeout %[3]s %[7]d\n"+
			"sentinel parallel-syncs %[3]s 1\n",
			port, d, SentinelMasterName, master.Port, SentinelQuorum,
			SentinelDownAfter.Milliseconds(), SentinelFailoverTimeout.Milliseconds())
		path := filepath.Join(d, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		return []string{path, "--sentinel"}, nil
	}
	for range 3 {
		p, err := startRedis(ctx, dir, "sentinel", sentinel)
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.Sentinels = append(s.Sentinels, p)
	}
	if err := poll(ctx, 60*time.Second, "redis sentinel: ready to fail over", func(ctx context.Context) error {
		return s.ready(ctx, master.Addr(), replicas)
	}); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// SentinelAddrs are the Sentinels' addresses: the SentinelAddrs of a
// redis.FailoverClient.
func (s *RedisSentinel) SentinelAddrs() []string {
	var out []string
	for _, p := range s.Sentinels {
		out = append(out, p.Addr())
	}
	return out
}

// Stop stops every process.
func (s *RedisSentinel) Stop() {
	stopAll(append(append([]*RedisProcess(nil), s.Sentinels...), s.Nodes...))
}

// ready checks that every Sentinel names master, knows replicas replicas
// in sync and the two other Sentinels, and sees nothing down.
func (s *RedisSentinel) ready(ctx context.Context, master string, replicas int) error {
	for _, p := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: p.Addr(), DialTimeout: time.Second, MaxRetries: -1})
		m, err := sc.Master(ctx, SentinelMasterName).Result()
		if err == nil {
			var reps []map[string]string
			reps, err = sc.Replicas(ctx, SentinelMasterName).Result()
			if err == nil {
				err = sentinelSees(p, m, master, reps, replicas)
			}
		}
		_ = sc.Close()
		if err != nil {
			return err
		}
	}
	for _, n := range s.Nodes {
		if n.Addr() == master || !n.Running() {
			continue
		}
		if err := inSync(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func sentinelSees(p *RedisProcess, m map[string]string, master string, reps []map[string]string, replicas int) error {
	if got := m["ip"] + ":" + m["port"]; got != master {
		return fmt.Errorf("sentinel %s names master %s, want %s", p.Addr(), got, master)
	}
	if strings.Contains(m["flags"], "down") {
		return fmt.Errorf("sentinel %s sees the master as %s", p.Addr(), m["flags"])
	}
	if m["num-other-sentinels"] != "2" {
		return fmt.Errorf("sentinel %s knows %s other sentinels, want 2", p.Addr(), m["num-other-sentinels"])
	}
	up := 0
	for _, r := range reps {
		if !strings.Contains(r["flags"], "down") && !strings.Contains(r["flags"], "disconnected") && r["master-link-status"] == "ok" {
			up++
		}
	}
	if up < replicas {
		return fmt.Errorf("sentinel %s sees %d replicas in sync, want %d", p.Addr(), up, replicas)
	}
	return nil
}

// inSync checks that n is a replica whose link to its master is up.
func inSync(ctx context.Context, n *RedisProcess) error {
	cl := n.client()
	defer cl.Close()
	info, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_link_status:up") {
		return fmt.Errorf("%s is not a replica in sync", n.Addr())
	}
	return nil
}

// Master returns the data node every live Sentinel names master; an error
// while they disagree or name none of the nodes.
func (s *RedisSentinel) Master(ctx context.Context) (*RedisProcess, error) {
	var named string
	for _, p := range s.Sentinels {
		if !p.Running() {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: p.Addr(), DialTimeout: time.Second, MaxRetries: -1})
		addr, err := sc.GetMasterAddrByName(ctx, SentinelMasterName).Result()
		_ = sc.Close()
		if err != nil {
			return nil, fmt.Errorf("sentinel %s: %w", p.Addr(), err)
		}
		if len(addr) != 2 {
			return nil, fmt.Errorf("sentinel %s: get-master-addr-by-name answered %v", p.Addr(), addr)
		}
		got := addr[0] + ":" + addr[1]
		if named != "" && got != named {
			return nil, fmt.Errorf("sentinels disagree: %s and %s", named, got)
		}
		named = got
	}
	for _, n := range s.Nodes {
		if n.Addr() == named {
			return n, nil
		}
	}
	if named == "" {
		return nil, errors.New("no sentinel running")
	}
	return nil, fmt.Errorf("sentinels name %s, not a node of this topology", named)
}

// KillMaster SIGKILLs the current master and waits until every Sentinel
// names another node, which answers as a master. It returns the killed
// node (Rejoin starts it again) and the promoted one.
func (s *RedisSentinel) KillMaster(ctx context.Context) (killed, promoted *RedisProcess, err error) {
	killed, err = s.Master(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !killed.Running() {
		return nil, nil, fmt.Errorf("redis sentinel: the master %s is not running", killed.Addr())
	}
	killed.Kill()
	err = poll(ctx, 60*time.Second, "redis sentinel: a replica promoted after "+killed.Addr()+" was killed", func(ctx context.Context) error {
		m, merr := s.Master(ctx)
		if merr != nil {
			return merr
		}
		if m == killed {
			return errors.New("the sentinels still name the killed master")
		}
		cl := m.client()
		defer cl.Close()
		role, rerr := cl.Do(ctx, "ROLE").Slice()
		if rerr != nil {
			return rerr
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s answers ROLE %v", m.Addr(), role)
		}
		promoted = m
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return killed, promoted, nil
}

// Rejoin starts a killed node again and waits until the set is whole: the
// Sentinels have made it a replica of the current master, in sync, or,
// where they failed over once more to it (on a loaded machine a Sentinel
// may judge the promoted master down after down-after-milliseconds of
// silence, and the restarted node is then the only replica to promote),
// it is the master and every other running node replicates it in sync.
func (s *RedisSentinel) Rejoin(ctx context.Context, p *RedisProcess) error {
	if err := p.Start(ctx); err != nil {
		return err
	}
	return poll(ctx, 60*time.Second, "redis sentinel: "+p.Addr()+" rejoins the set", func(ctx context.Context) error {
		m, err := s.Master(ctx)
		if err != nil {
			return err
		}
		if m != p {
			return inSync(ctx, p)
		}
		for _, n := range s.Nodes {
			if n != p && n.Running() {
				if err := inSync(ctx, n); err != nil {
					return fmt.Errorf("the sentinels failed over to the restarted node: %w", err)
				}
			}
		}
		return nil
	})
}
