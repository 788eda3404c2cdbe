package xtimer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

func TestHealthFollowsTheLoopFromNewToStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), clock: clock}, nil)
	h := s.Health(ctx)
	require.False(t, h.OK)
	require.True(t, h.DB.OK, "%+v", h.DB)
	require.Equal(t, ComponentHealth{Detail: "scheduler not started"}, h.Loop)

	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	require.Equal(t, ComponentHealth{OK: true, Detail: "starting"}, s.Health(ctx).Loop, "Start returned; the loop ticks within a second")
	require.Eventually(t, func() bool {
		if s.Health(ctx).Loop.Detail != "starting" {
			return true
		}
		clock.Advance(100 * time.Millisecond)
		return false
	}, 10*time.Second, 10*time.Millisecond)
	h = s.Health(ctx)
	require.True(t, h.OK, "%+v", h)
	require.Contains(t, h.Loop.Detail, "last tick ")

	// A tick stuck on the database: internal/engine/health_test.go.

	require.NoError(t, s.Stop(ctx))
	require.Equal(t, ComponentHealth{Detail: "scheduler stopped"}, s.Health(ctx).Loop)
}

func TestHealthPingsRedisWhenConfigured(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t)}, func(o *Options) { o.Redis = testsvc.Redis(t) })
	h := s.Health(context.Background())
	require.True(t, h.Redis.OK, "%+v", h.Redis)
	require.Empty(t, h.Redis.Detail)
	require.Positive(t, h.Redis.Latency)
}
