package testsvc

import (
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Reopen returns a second, independent pool on the database of db (one
// made by MySQL or Postgres), as another replica process would have: tests
// that run several schedulers in one process give each its own pool. The
// pool is closed when the test ends; the database is dropped by the call
// that created it.
func Reopen(t testing.TB, db *gorm.DB) *gorm.DB {
	t.Helper()
	name := db.Migrator().CurrentDatabase()
	var d gorm.Dialector
	switch db.Dialector.Name() {
	case "mysql":
		cfg, err := gomysql.ParseDSN(env("XTIMER_MYSQL_DSN", DefaultMySQLDSN))
		if err != nil {
			t.Fatalf("testsvc: XTIMER_MYSQL_DSN: %v", err)
		}
		cfg.DBName, cfg.ParseTime = name, true
		d = mysql.Open(cfg.FormatDSN())
	case "postgres":
		cfg, err := pgx.ParseConfig(env("XTIMER_POSTGRES_DSN", DefaultPostgresDSN))
		if err != nil {
			t.Fatalf("testsvc: XTIMER_POSTGRES_DSN: %v", err)
		}
		cfg.Database = name
		d = postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cfg)})
	default:
		t.Fatalf("testsvc: Reopen works on mysql and postgres, not %s", db.Dialector.Name())
	}
	again, err := gorm.Open(d, gormConfig())
	if err != nil {
		t.Fatalf("testsvc: reopen %s database %s: %v", db.Dialector.Name(), name, err)
	}
	limitPool(again)
	t.Cleanup(func() { closeDB(again) })
	return again
}
