package xtimer

import (
	"context"
	"fmt"
	"time"
)

// healthTimeout bounds each of the DB and Redis pings of Health.
const healthTimeout = time.Second

// Health is what Scheduler.Health found: OK when every component is.
type Health struct {
	OK    bool            `json:"ok"`
	DB    ComponentHealth `json:"db"`
	Redis ComponentHealth `json:"redis"`
	Loop  ComponentHealth `json:"loop"`
	// Clock is the replica's clock against the database's
	// (Options.ClockReference): not OK while it is beyond
	// Options.MaxClockSkew and the replica claims nothing. Its Latency is
	// the offset's uncertainty (half the round trip of the best sample).
	Clock ComponentHealth `json:"clock"`
}

// ComponentHealth is the state of one component of a Scheduler.
type ComponentHealth struct {
	OK bool `json:"ok"`
	// Detail says why a component is not OK, or what was checked.
	Detail string `json:"detail,omitempty"`
	// Latency is the ping's round trip for DB and Redis, the age of the
	// last tick for Loop, and the offset's uncertainty for Clock.
	Latency time.Duration `json:"latency_ns"`
}

// Health checks the database (a ping, within a second), Redis (a PING
// when Options.Redis is set) and the tick loop (running, and its last tick
// younger than 5 s by the scheduler's clock) and the clock (within
// Options.MaxClockSkew of the database's, as last measured). It is cheap enough for a
// readiness probe every few seconds; the admin console serves it as
// GET api/health.
func (s *Scheduler) Health(ctx context.Context) Health {
	h := Health{DB: s.dbHealth(ctx), Redis: s.redisHealth(ctx), Loop: s.loopHealth(), Clock: s.clockHealth()}
	h.OK = h.DB.OK && h.Redis.OK && h.Loop.OK && h.Clock.OK
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
	ok, detail, age := s.eng.LoopHealth()
	return ComponentHealth{OK: ok, Detail: detail, Latency: age}
}

func (s *Scheduler) clockHealth() ComponentHealth {
	ok, detail, uncertainty := s.eng.ClockHealth()
	return ComponentHealth{OK: ok, Detail: detail, Latency: uncertainty}
}
