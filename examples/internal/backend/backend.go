// Package backend opens the database and Redis the examples run on, from
// the same flags in every example.
package backend

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// OpenDB opens dsn: "" for a SQLite file in dir, mysql://user:pass@host:port/db
// or postgres://user:pass@host:port/db?sslmode=disable.
func OpenDB(dsn, dir string) (*gorm.DB, string, error) {
	cfg := &gorm.Config{Logger: logger.Discard}
	switch {
	case dsn == "":
		path := filepath.Join(dir, "xtimer.db")
		db, err := gorm.Open(sqlite.Open("file:"+path+"?_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate"), cfg)
		return db, "sqlite " + path, err
	case strings.HasPrefix(dsn, "mysql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, "", fmt.Errorf("-dsn %q: %w", dsn, err)
		}
		pass, _ := u.User.Password()
		my := fmt.Sprintf("%s:%s@tcp(%s)%s?parseTime=true&multiStatements=false", u.User.Username(), pass, u.Host, u.Path)
		db, err := gorm.Open(mysql.Open(my), cfg)
		return db, "mysql " + u.Host + u.Path, err
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		db, err := gorm.Open(postgres.Open(dsn), cfg)
		return db, "postgres", err
	}
	return nil, "", fmt.Errorf("-dsn %q: want mysql://user:pass@host:port/db or postgres://user@host:port/db", dsn)
}

// OpenRedis connects to addr ("" for none) and checks it answers.
func OpenRedis(ctx context.Context, addr string) (redis.UniversalClient, error) {
	if addr == "" {
		return nil, nil
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: time.Second})
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("-redis %s: %w", addr, err)
	}
	return rdb, nil
}
