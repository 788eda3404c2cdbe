package xtimer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Bounds of Health.
const (
	// healthTimeout bounds each of the DB and Redis pings of Health.
	healthTimeout = time.Second
	// healthTickAge: a loop whose last tick is older is not healthy. The
	// loop ticks every second; a tick stuck on the database shows here.
	healthTickAge = 5 * time.Second
)

// Health is what Scheduler.Health found: OK when every component is.
type Health struct {
	OK    bool            `json:"ok"`
	DB    ComponentHealth `json:"db"`
	Redis ComponentHealth `json:"redis"`
	Loop  ComponentHealth `json:"loop"`
}

// ComponentHealth is the state of one component of a Scheduler.
type ComponentHealth struct {
	OK bool `json:"ok"`
	// Detail says why a component is not OK, or what was checked.
	Detail string `json:"detail,omitempty"`
	// Latency is the ping's round trip for DB and Redis, and the age of
	// the last tick for Loop.
	Latency time.Duration `json:"latency_ns"`
}

// healthState is what the engine's components record for Health and for
// logging an outage once when it starts and once when it ends (noteDB,
// noteRedis). Its fields are atomics: any component writes them.
type healthState struct {
	lastTick  atomic.Int64 // Unix nanoseconds of the start of the last tick, 0 before the first
	dbDown    atomic.Bool
	redisDown atomic.Bool
}

func (h *healthState) tick(now time.Time) { h.lastTick.Store(now.UnixNano()) }

// Health checks the database (a ping, within a second), Redis (a PING
// when Options.Redis is set) and the tick loop (running, and its last tick
// younger than 5 s by the scheduler's clock). It is cheap enough for a
// readiness probe every few seconds; the admin console serves it as
// GET api/health.
func (s *Scheduler) Health(ctx context.Context) Health {
	h := Health{DB: s.dbHealth(ctx), Redis: s.redisHealth(ctx), Loop: s.loopHealth()}
	h.OK = h.DB.OK && h.Redis.OK && h.Loop.OK
	return h
}

func (s *Scheduler) dbHealth(ctx context.Context) ComponentHealth {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	begin := time.Now()
	sqlDB, err := s.opts.DB.DB()
	if err == nil {
		err = sqlDB.PingContext(ctx)
	}
	c := ComponentHealth{OK: err == nil, Latency: time.Since(begin)}
	if err != nil {
		c.Detail = fmt.Sprintf("ping: %v", err)
	}
	return c
}

func (s *Scheduler) redisHealth(ctx context.Context) ComponentHealth {
	if s.opts.Redis == nil {
		if s.opts.Locker != nil {
			return ComponentHealth{OK: true, Detail: "Options.Locker, not checked"}
		}
		return ComponentHealth{OK: true, Detail: "in-process lock"}
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	begin := time.Now()
	err := s.opts.Redis.Ping(ctx).Err()
	c := ComponentHealth{OK: err == nil, Latency: time.Since(begin)}
	if err != nil {
		c.Detail = fmt.Sprintf("ping: %v (slot claims fall back to the database)", err)
	}
	return c
}

func (s *Scheduler) loopHealth() ComponentHealth {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	switch state {
	case stateNew:
		return ComponentHealth{Detail: "scheduler not started"}
	case stateStopped:
		return ComponentHealth{Detail: "scheduler stopped"}
	}
	last := s.health.lastTick.Load()
	if last == 0 {
		// Start has returned and the loop has not ticked yet: it does
		// within a second.
		return ComponentHealth{OK: true, Detail: "starting"}
	}
	age := max(s.clock.Now().Sub(time.Unix(0, last)), 0)
	if age >= healthTickAge {
		return ComponentHealth{Detail: fmt.Sprintf("last tick %s ago (want less than %s)", age.Round(time.Millisecond), healthTickAge), Latency: age}
	}
	return ComponentHealth{OK: true, Detail: fmt.Sprintf("last tick %s ago", age.Round(time.Millisecond)), Latency: age}
}

// noteDB logs the database going away and coming back, once each.
func (s *Scheduler) noteDB(err error) {
	if err != nil && errors.Is(err, context.Canceled) {
		return
	}
	if err != nil {
		s.metrics.dbError()
	}
	changed := s.health.dbDown.Swap(err != nil) != (err != nil)
	switch {
	case err != nil && changed:
		s.log.Error("database unreachable: no fire is recorded or started until it is back", "err", err)
	case err != nil:
		s.log.Debug("database still unreachable", "err", err)
	case changed:
		s.log.Info("database reachable again")
	}
}

func (s *Scheduler) noteRedis(err error) {
	changed := s.health.redisDown.Swap(err != nil) != (err != nil)
	s.metrics.lockFallback(err != nil)
	if changed {
		s.alerts.fallback(err != nil, err)
	}
	switch {
	case err != nil && changed:
		s.log.Warn("slot lock unavailable: claims fall back to the database unique key", "err", err)
	case err == nil && changed:
		s.log.Info("slot lock available again")
	}
}
