package testsvc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Default addresses, used when the matching environment variable is unset.
const (
	DefaultRedisAddr   = "127.0.0.1:6379"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/"
	DefaultPostgresDSN = "host=127.0.0.1 port=5432 user=postgres sslmode=disable"
)

// MaxOpenConns bounds each pool this package opens, so that many parallel
// tests stay under the servers' connection limits (100 on a default
// PostgreSQL). A test that needs more may raise it on db.DB().
const MaxOpenConns = 20

// pingTimeout bounds how long a server may take to answer before the test
// treats it as absent.
const pingTimeout = 3 * time.Second

// Backend is one SQL database a test body can run on.
type Backend struct {
	// Name is the GORM dialect name: "sqlite", "mysql" or "postgres".
	Name string
	// Open returns a fresh, empty database private to t, or skips t (fails
	// it under XTIMER_REQUIRE_SERVICES=1) when the server does not answer.
	Open func(t testing.TB) *gorm.DB
}

// Backends returns SQLite, MySQL and PostgreSQL, in that order. Opening is
// left to each subtest so that an absent server skips only its own subtests.
func Backends() []Backend {
	return []Backend{
		{Name: "sqlite", Open: SQLite},
		{Name: "mysql", Open: MySQL},
		{Name: "postgres", Open: Postgres},
	}
}

// App returns a namespace no other test uses: "t" followed by 12 hex digits.
// It is valid as an xtimer App, in Redis keys and in database names. Tests
// that share the Redis server put it in their keys (Options.App does so).
func App(t testing.TB) string {
	t.Helper()
	return "t" + randomHex(t)
}

// Redis returns a client of its own on the shared Redis server, closed when
// the test ends. It never flushes anything: keep keys apart with App(t).
func Redis(t testing.TB) redis.UniversalClient {
	t.Helper()
	addr := env("XTIMER_REDIS_ADDR", DefaultRedisAddr)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}})
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		unavailable(t, "Redis at "+addr, err,
			`redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no`)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// MySQL creates a database xtimer_t_<random> on the MySQL/MariaDB server of
// XTIMER_MYSQL_DSN, returns a pool on it and drops it when the test ends.
func MySQL(t testing.TB) *gorm.DB {
	t.Helper()
	dsn := env("XTIMER_MYSQL_DSN", DefaultMySQLDSN)
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testsvc: XTIMER_MYSQL_DSN %q: %v", dsn, err)
	}
	cfg.DBName = ""
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["charset"] = "utf8mb4"
	admin := openOrSkip(t, "MySQL at "+cfg.Addr, mysql.Open(cfg.FormatDSN()),
		"start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd")

	name := "xtimer_t_" + randomHex(t)
	if err = admin.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4").Error; err != nil {
		closeDB(admin)
		t.Fatalf("testsvc: create MySQL database %s: %v", name, err)
	}
	cfg.DBName = name
	db, err := gorm.Open(mysql.Open(cfg.FormatDSN()), gormConfig())
	if err != nil {
		dropAndClose(admin, "DROP DATABASE IF EXISTS "+name)
		t.Fatalf("testsvc: open MySQL database %s: %v", name, err)
	}
	limitPool(db)
	t.Cleanup(func() {
		closeDB(db)
		dropAndClose(admin, "DROP DATABASE IF EXISTS "+name)
	})
	return db
}

// Postgres creates a database xtimer_t_<random> on the PostgreSQL server of
// XTIMER_POSTGRES_DSN, returns a pool on it and drops it (WITH (FORCE),
// PostgreSQL 13+) when the test ends.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	dsn := env("XTIMER_POSTGRES_DSN", DefaultPostgresDSN)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("testsvc: XTIMER_POSTGRES_DSN %q: %v", dsn, err)
	}
	where := fmt.Sprintf("PostgreSQL at %s:%d", cfg.Host, cfg.Port)
	admin := openOrSkip(t, where, postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cfg)}),
		"pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start")

	name := "xtimer_t_" + randomHex(t)
	if err = admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		closeDB(admin)
		t.Fatalf("testsvc: create PostgreSQL database %s: %v", name, err)
	}
	own := cfg.Copy()
	own.Database = name
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: stdlib.OpenDB(*own)}), gormConfig())
	if err != nil {
		dropAndClose(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		t.Fatalf("testsvc: open PostgreSQL database %s: %v", name, err)
	}
	limitPool(db)
	t.Cleanup(func() {
		closeDB(db)
		dropAndClose(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return db
}

// SQLite opens a database file in t.TempDir() in WAL mode with a 10-second
// busy timeout, and BEGIN IMMEDIATE for transactions so that concurrent
// writers wait for each other instead of failing on a lock upgrade. It needs
// cgo (the mattn/go-sqlite3 driver).
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "xtimer.db")
	dsn := "file:" + path + "?_journal_mode=WAL&_busy_timeout=10000&_txlock=immediate&_foreign_keys=1"
	db, err := gorm.Open(sqlite.Open(dsn), gormConfig())
	if err != nil {
		t.Fatalf("testsvc: open SQLite %s: %v", path, err)
	}
	if err := db.Exec("SELECT 1").Error; err != nil {
		closeDB(db)
		t.Fatalf("testsvc: SQLite %s (needs cgo and a C compiler): %v", path, err)
	}
	limitPool(db)
	t.Cleanup(func() { closeDB(db) })
	return db
}

// openOrSkip opens an administrative pool on a server and pings it; a server
// that does not answer skips the test (or fails it, see unavailable).
func openOrSkip(t testing.TB, what string, d gorm.Dialector, start string) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(d, gormConfig())
	if err == nil {
		var sqlDB interface{ PingContext(context.Context) error }
		sqlDB, err = db.DB()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
			err = sqlDB.PingContext(ctx)
			cancel()
		}
		if err != nil {
			closeDB(db)
		}
	}
	if err != nil {
		unavailable(t, what, err, start)
	}
	db.Logger = db.Logger.LogMode(logger.Silent) // CREATE/DROP DATABASE are noise
	return db
}

// unavailable skips t, saying how to start the missing server, or fails it
// when XTIMER_REQUIRE_SERVICES=1.
func unavailable(t testing.TB, what string, err error, start string) {
	t.Helper()
	msg := fmt.Sprintf("testsvc: %s does not answer (%v); start it with `%s`, or run `bash .ci/run` which starts every service and runs all tests", what, err, start)
	if os.Getenv("XTIMER_REQUIRE_SERVICES") == "1" {
		t.Fatal(msg + " [XTIMER_REQUIRE_SERVICES=1, so this fails instead of skipping]")
	}
	t.Skip(msg)
}

func gormConfig() *gorm.Config {
	l := logger.Default.LogMode(logger.Silent)
	if os.Getenv("XTIMER_TEST_SQL") == "1" {
		l = logger.New(log.New(os.Stderr, "", log.LstdFlags), logger.Config{
			SlowThreshold: time.Second,
			LogLevel:      logger.Info,
		})
	}
	return &gorm.Config{Logger: l}
}

func limitPool(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(MaxOpenConns)
	}
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

func dropAndClose(admin *gorm.DB, drop string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.WithContext(ctx).Exec(drop).Error; err != nil {
		// The test is over; a leftover database is harmless, so say so and go on.
		log.Printf("testsvc: %s: %v", drop, err)
	}
	closeDB(admin)
}

func randomHex(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testsvc: random name: %v", err)
	}
	return hex.EncodeToString(b[:])
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
