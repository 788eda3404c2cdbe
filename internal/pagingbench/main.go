// Command pagingbench measures the console's keyset paging
// (store.ListExecutions) on a large xtimer_executions table, and checks
// that every page it loads is right.
//
//	go run ./internal/pagingbench -db postgres -rows 10000000
//	go run ./internal/pagingbench -db mysql -rows 10000000 -reuse
//	go run ./internal/pagingbench -db sqlite -rows 20000   # the CI smoke
//
// It works in a database of its own, xtimer_paging (for SQLite a file in
// os.TempDir()), never the shared test database: it drops and recreates it
// unless -reuse is given, runs store.Migrate, and seeds -rows executions of
// one app with server-side generation (see seed.go). With -reuse a table
// seeded earlier with the same -rows is kept as it is.
//
// Then it loads pages of 50 rows for each console filter (see measure.go),
// prints p50, p95 and max per filter as a Markdown table, and checks every
// page on the way: rows match the filter, (run_time, id) strictly descends
// across pages, no row comes twice, and walks that reach the end return
// exactly as many rows as an independent COUNT(*). Any failed check makes
// it exit with status 1.
//
// Then (-cases console or all) it adds an app of -tasks tasks and loads
// every page and JSON list of the console through admin's http.Handler:
// tasks, text searches, executions with each filter, a task's page
// (console.go), checking each answer, and prints a second table.
//
// Servers come from the same variables and defaults as internal/testsvc:
// XTIMER_POSTGRES_DSN and XTIMER_MYSQL_DSN, with the database part replaced
// by xtimer_paging.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The databases the bench owns on the MySQL and PostgreSQL servers (for
// SQLite, files in os.TempDir()): one for paging, one for -retention.
const (
	pagingDB    = "xtimer_paging"
	retentionDB = "xtimer_retention"
)

func main() {
	backend := flag.String("db", "sqlite", "backend: postgres, mysql or sqlite")
	rows := flag.Int64("rows", 10_000_000, "executions to seed")
	pages := flag.Int("pages", 50, "page loads (or calls) measured per query")
	reuse := flag.Bool("reuse", false, "keep the xtimer_paging database when it holds -rows rows already")
	seed := flag.Uint64("seed", 1, "seed of the random tasks, days and cursors")
	retention := flag.Bool("retention", false, "measure the retention sweep instead of paging (see retention.go)")
	tasks := flag.Int("tasks", 0, "tasks of the app, for the console cases (console.go); 0 means -rows/10, at least 2,000")
	only := flag.String("only", "", "console cases whose name contains this text only (all when empty)")
	cases := flag.String("cases", "all", "what to measure: store (ListExecutions and the store's other reads), console (pages and API lists through admin's handler) or all")
	flag.Parse()

	if *retention {
		if err := runRetention(*backend, *rows); err != nil {
			fmt.Fprintln(os.Stderr, "pagingbench -retention:", err)
			os.Exit(1)
		}
		return
	}

	if err := run(*backend, *rows, *tasks, *cases, *only, *pages, *reuse, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "pagingbench:", err)
		os.Exit(1)
	}
}

func run(backend string, rows int64, tasks int, cases, only string, pages int, reuse bool, seed uint64) error {
	switch {
	case pages < 1:
		return fmt.Errorf("-pages %d: want 1 or more", pages)
	case cases != "all" && cases != "store" && cases != "console":
		return fmt.Errorf("-cases %q: want store, console or all", cases)
	case tasks == 0:
		tasks = max(int(rows/10), minTasks)
	case tasks < minTasks:
		return fmt.Errorf("-tasks %d: want 0 (for -rows/10) or at least %d: the %d tasks with executions and as many generated ones, which the searches look for",
			tasks, minTasks, taskCount)
	}
	ctx := context.Background()
	db, st, p, seeded, err := prepare(ctx, backend, pagingDB, reuse, rows)
	if err != nil {
		return err
	}
	defer closeDB(db)
	if err := seedTasks(ctx, st); err != nil {
		return err
	}
	var storeErr error
	if cases != "console" {
		storeErr = measure(ctx, st, p, seeded, pages, seed)
		if cases == "store" {
			return storeErr
		}
	}
	if err := seedManyTasks(ctx, db, tasks); err != nil {
		return err
	}
	if err := rollUpHistory(ctx, st, p); err != nil {
		return err
	}
	results, consoleErr := measureConsole(ctx, db, st, p, tasks, only, pages, seed)
	if len(results) > 0 {
		printConsoleTable(tasks, p, results)
	}
	return errors.Join(storeErr, consoleErr)
}

// prepare opens the database name, migrates it and seeds rows executions
// (unless reuse finds them there), and says how long seeding took.
func prepare(ctx context.Context, backend, name string, reuse bool, rows int64) (*gorm.DB, *store.Store, plan, time.Duration, error) {
	db, err := open(ctx, backend, name, reuse)
	if err != nil {
		return nil, nil, plan{}, 0, err
	}
	st := store.New(db, store.WithQueryTimeout(10*time.Minute))
	p, err := newPlan(rows)
	if err == nil {
		err = st.Migrate(ctx)
	}
	var seeded time.Duration
	if err == nil {
		seeded, err = seedIfNeeded(ctx, db, p)
	}
	if err != nil {
		closeDB(db)
		return nil, nil, plan{}, 0, err
	}
	return db, st, p, seeded, nil
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

// open creates (or, with reuse, keeps) the database name and returns a
// pool on it.
func open(ctx context.Context, backend, dbName string, reuse bool) (*gorm.DB, error) {
	// Discard, not Silent: the SQLite migrator logs GetIndexes through Debug().
	cfg := &gorm.Config{Logger: logger.Discard}
	switch backend {
	case "postgres":
		pc, err := pgx.ParseConfig(env("XTIMER_POSTGRES_DSN", testsvc.DefaultPostgresDSN))
		if err != nil {
			return nil, fmt.Errorf("XTIMER_POSTGRES_DSN: %w", err)
		}
		admin, err := gorm.Open(postgres.New(postgres.Config{Conn: stdlib.OpenDB(*pc)}), cfg)
		if err != nil {
			return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
		}
		var n int64
		if err := admin.WithContext(ctx).Raw("SELECT COUNT(*) FROM pg_database WHERE datname = ?", dbName).Scan(&n).Error; err != nil {
			return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
		}
		if err := recreate(ctx, admin, reuse, n > 0,
			"DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)", "CREATE DATABASE "+dbName); err != nil {
			return nil, err
		}
		own := pc.Copy()
		own.Database = dbName
		return gorm.Open(postgres.New(postgres.Config{Conn: stdlib.OpenDB(*own)}), cfg)
	case "mysql":
		mc, err := gomysql.ParseDSN(env("XTIMER_MYSQL_DSN", testsvc.DefaultMySQLDSN))
		if err != nil {
			return nil, fmt.Errorf("XTIMER_MYSQL_DSN: %w", err)
		}
		mc.DBName, mc.ParseTime, mc.Loc = "", true, time.UTC
		if mc.Params == nil {
			mc.Params = map[string]string{}
		}
		mc.Params["charset"] = "utf8mb4"
		admin, err := gorm.Open(mysql.Open(mc.FormatDSN()), cfg)
		if err != nil {
			return nil, fmt.Errorf("connect to MySQL: %w", err)
		}
		var n int64
		if err := admin.WithContext(ctx).Raw("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", dbName).Scan(&n).Error; err != nil {
			return nil, fmt.Errorf("connect to MySQL: %w", err)
		}
		if err := recreate(ctx, admin, reuse, n > 0,
			"DROP DATABASE IF EXISTS "+dbName, "CREATE DATABASE "+dbName+" CHARACTER SET utf8mb4"); err != nil {
			return nil, err
		}
		mc.DBName = dbName
		return gorm.Open(mysql.Open(mc.FormatDSN()), cfg)
	case "sqlite":
		path := filepath.Join(os.TempDir(), dbName+".db")
		if !reuse {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
					return nil, err
				}
			}
		}
		return gorm.Open(sqlite.Open("file:"+path+"?_journal_mode=WAL&_busy_timeout=10000"), cfg)
	}
	return nil, fmt.Errorf("-db %q: want postgres, mysql or sqlite", backend)
}

// recreate drops and creates the bench's database, or only creates it
// when reuse is set and it does not exist yet.
func recreate(ctx context.Context, admin *gorm.DB, reuse, exists bool, drop, create string) error {
	defer func() {
		if sqlDB, err := admin.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}()
	if reuse && exists {
		return nil
	}
	for _, stmt := range []string{drop, create} {
		if err := admin.WithContext(ctx).Exec(stmt).Error; err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
