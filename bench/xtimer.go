package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/xtimer-go/xtimer"
)

// xtimerSystem is xtimer with its recommended production setup: the
// Redis slot lock and a database, PostgreSQL or MariaDB. Every option but
// Workers (the harness's common pool size), App, InstanceID and Logger is
// left at its default: the defaults (16 buckets, claims 10 s ahead, 5 s
// heartbeats, 30 s replica timeout, retention sweep on) are what a user
// gets, and what the README's promises are measured with.
type xtimerSystem struct {
	dialect string // "postgres" or "mysql"
}

func newXtimer(dialect string) System { return xtimerSystem{dialect: dialect} }

func (x xtimerSystem) Name() string { return "xtimer-" + x.dialect }

func (x xtimerSystem) Run(ctx context.Context, env ReplicaEnv, tasks []TaskSpec, rec Recorder, ready func()) error {
	var dial gorm.Dialector
	switch x.dialect {
	case "postgres":
		if env.PostgresURL == "" {
			return errors.New("xtimer-postgres: the run has no PostgreSQL")
		}
		dial = postgres.Open(env.PostgresURL)
	case "mysql":
		if env.MySQLDSN == "" {
			return errors.New("xtimer-mysql: the run has no MariaDB")
		}
		dial = mysql.Open(env.MySQLDSN)
	default:
		return fmt.Errorf("xtimer: unknown dialect %q", x.dialect)
	}
	db, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	if sqlDB, dbErr := db.DB(); dbErr == nil {
		defer sqlDB.Close()
	}
	rdb := redis.NewClient(&redis.Options{Addr: env.RedisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()

	level := slog.LevelWarn
	if v := os.Getenv("XTIMER_BENCH_LOG"); v != "" {
		if err = level.UnmarshalText([]byte(v)); err != nil {
			return fmt.Errorf("XTIMER_BENCH_LOG=%q: want debug, info, warn or error: %w", v, err)
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	s, err := xtimer.New(xtimer.Options{
		DB: db, Redis: rdb, App: "bench", InstanceID: fmt.Sprintf("replica-%d", env.Replica),
		Workers: env.Workers, Logger: log,
	})
	if err != nil {
		return err
	}
	handler := func(_ context.Context, run *xtimer.Run) error {
		rec.Record(run.Code, run.Shard, run.ScheduledAt, time.Now())
		return nil
	}
	for _, t := range tasks {
		var opts []xtimer.TaskOption
		if t.Shards > 1 {
			opts = append(opts, xtimer.WithShards(t.Shards))
		}
		if err := s.Register(t.Code, t.Spec, handler, opts...); err != nil {
			return err
		}
	}
	// Start's own deadline (DefaultStartTimeout, 30 s) is for a database
	// that arrives late; the scale workload writes up to 1M task rows
	// first, so Start gets longer here.
	startCtx, cancelStart := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelStart()
	if err := s.Start(startCtx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ready()
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Stop(stopCtx)
}
