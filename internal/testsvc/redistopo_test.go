package testsvc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The cluster serves every slot: keys that hash to many slots, spread over
// the three masters, are all written and read back.
func TestRedisClusterServesEverySlot(t *testing.T) {
	t.Parallel()
	c := testsvc.StartRedisCluster(t)
	require.Len(t, c.Addrs, 3)
	ctx := context.Background()
	masters := map[string]bool{}
	for i := range 64 {
		key := fmt.Sprintf("probe:%d", i)
		require.NoError(t, c.Client.Set(ctx, key, i, 0).Err())
		got, err := c.Client.Get(ctx, key).Int()
		require.NoError(t, err)
		require.Equal(t, i, got)
		m, err := c.Topology.Master(ctx, key)
		require.NoError(t, err)
		masters[m.Addr()] = true
	}
	require.Len(t, masters, 3, "64 keys over 16384 slots land on every master")
}

// Killing the master promotes the replica: a key written before the kill
// (and replicated) is read back through the failover client from the
// promoted node, and the killed node rejoins as a replica.
func TestRedisSentinelPromotesTheReplica(t *testing.T) {
	t.Parallel()
	s := testsvc.StartRedisSentinel(t)
	require.Len(t, s.SentinelAddrs, 3)
	ctx := context.Background()
	require.NoError(t, s.Client.Set(ctx, "probe", "before", 0).Err())
	require.NoError(t, s.Client.Do(ctx, "WAIT", 1, 5000).Err(), "the replica has the key")

	killed, promoted := s.KillMaster(t)
	require.NotEqual(t, killed, promoted)
	require.Eventually(t, func() bool {
		got, err := s.Client.Get(ctx, "probe").Result()
		return err == nil && got == "before"
	}, time.Minute, 100*time.Millisecond, "the failover client reads from the promoted master")

	s.Rejoin(t, killed)
	require.NoError(t, s.Client.Set(ctx, "probe", "after", 0).Err())
}
