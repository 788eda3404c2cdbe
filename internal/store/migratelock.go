package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"gorm.io/gorm"
)

// migrateLockKey is the PostgreSQL advisory lock Migrate's transaction
// holds: a number no other key of xtimer uses (the bytes of "xtimerMG").
// Advisory locks are per database, as the tables are.
const migrateLockKey int64 = 0x7874696d65724d47

// migrateLockName is the MySQL/MariaDB named lock Migrate holds. Named
// locks are per server, so the name carries the database's (hashed: a
// name is at most 64 characters, a database's name alone may be 64).
const migrateLockName = "CONCAT('xtimer_migrate_', MD5(DATABASE()))"

// sqliteMigrations holds a mutex per SQLite file ("" for a database in
// memory) that a migration of this process holds.
var sqliteMigrations sync.Map

// lockMigration takes, on the MySQL/MariaDB or SQLite connection conn is
// pinned to, the lock that makes the migrations of replicas started
// together run one after the other: without it, two AutoMigrates on an
// empty database both see a table missing and the second CREATE fails on
// the first one's. (PostgreSQL's is taken by Migrate's transaction.) It
// waits as long as ctx allows. MySQL's DDL commits as it goes, so the
// lock is the session's: unlock releases it, and a connection whose wait
// was cut short, or whose release failed, is closed rather than given back
// to the pool holding it. SQLite has no such lock: the migrations of one
// process on one file take turns on a mutex of the file's (processes that
// share a file are not served; Start retries a migration that failed).
func lockMigration(ctx context.Context, conn *gorm.DB) (unlock func(), err error) {
	switch conn.Dialector.Name() {
	case "mysql":
	case "sqlite":
		var file string
		if err := conn.Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file).Error; err != nil {
			return nil, fmt.Errorf("store: migrate: find the database file: %w", err)
		}
		mu, _ := sqliteMigrations.LoadOrStore(file, new(sync.Mutex))
		mu.(*sync.Mutex).Lock()
		return mu.(*sync.Mutex).Unlock, nil
	default: // PostgreSQL (Migrate's transaction), or no dialect xtimer supports
		return func() {}, nil
	}
	// GET_LOCK returns 1 once it holds the lock, 0 when it timed out and
	// NULL when it failed; RELEASE_LOCK 1 when it released it.
	take := "SELECT GET_LOCK(" + migrateLockName + ", " + strconv.FormatInt(lockWaitSeconds(ctx), 10) + ")"
	if err := returnsOne(conn.Raw(take)); err != nil {
		// A wait cut short may still have been granted the lock.
		discard(conn)
		return nil, fmt.Errorf("store: migrate: wait for the migration of another replica: %w", err)
	}
	return func() {
		// Released even when ctx has ended: the lock must not outlive Migrate.
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultQueryTimeout)
		defer cancel()
		if returnsOne(conn.WithContext(bg).Raw("SELECT RELEASE_LOCK("+migrateLockName+")")) != nil {
			discard(conn)
		}
	}, nil
}

// discard makes the pool close the connection conn is pinned to when it
// is given back, ending its session and the session's locks.
func discard(conn *gorm.DB) {
	if c, ok := conn.Statement.ConnPool.(*sql.Conn); ok {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// returnsOne runs q, a statement that returns one number, and fails unless
// that number is 1.
func returnsOne(q *gorm.DB) error {
	var got sql.NullInt64
	if err := q.Scan(&got).Error; err != nil {
		return err
	}
	if !got.Valid {
		return fmt.Errorf("%s returned NULL", q.Statement.SQL.String())
	}
	if got.Int64 != 1 {
		return fmt.Errorf("%s returned %d", q.Statement.SQL.String(), got.Int64)
	}
	return nil
}

// lockWaitSeconds is how long GET_LOCK may wait: until ctx's deadline, at
// least a second; without a deadline, as long as it takes (a year).
func lockWaitSeconds(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return int64((365 * 24 * time.Hour).Seconds())
	}
	return max(1, int64(math.Ceil(time.Until(d).Seconds())))
}
