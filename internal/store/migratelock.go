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

// migrateLockKey is the PostgreSQL advisory lock a migration's
// transaction holds: a number no other key of xtimer uses (the bytes of "xtimerMG").
// Advisory locks are per database, as the tables are.
const migrateLockKey int64 = 0x7874696d65724d47

// migrateLockName is the MySQL/MariaDB named lock a migration holds. Named
// locks are per server, so the name carries the database's (hashed: a
// name is at most 64 characters, a database's name alone may be 64).
const migrateLockName = "CONCAT('xtimer_migrate_', MD5(DATABASE()))"

// sqliteMigrations holds a mutex per SQLite file ("" for a database in
// memory) that a migration of this process holds.
var sqliteMigrations sync.Map

// migrateLocked runs migrate while it holds the lock that makes the
// migrations of replicas started together run one after the other:
// without it, two AutoMigrates on an empty database both see a table
// missing and the second CREATE fails on the first one's. It waits for the
// lock as long as ctx allows.
//   - PostgreSQL, whose DDL is transactional: migrate is one transaction
//     (Store.tx) behind a transaction-level advisory lock, released at its
//     end whatever happens, through a pooler that hands each transaction
//     its own server connection too.
//   - MySQL/MariaDB, whose DDL commits as it goes: migrate runs on one
//     connection holding a named lock of its session (namedLock).
//   - SQLite: the migrations of one process on one file take turns on a
//     mutex of the file's (processes that share a file are not served;
//     Start retries a migration that failed).
func (s *Store) migrateLocked(ctx context.Context, migrate func(db *gorm.DB) error) error {
	switch s.db.Dialector.Name() {
	case "postgres":
		return s.tx(ctx, func(tx *gorm.DB) error { // abandoned by the server if this replica goes silent in it
			if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", migrateLockKey).Error; err != nil {
				return fmt.Errorf("store: migrate: wait for the migration of another replica: %w", err)
			}
			return migrate(tx)
		})
	case "mysql":
		return s.db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
			// Connection's DB keeps one statement for every call; a
			// session gives each call its own, as s.db does.
			db := conn.Session(&gorm.Session{})
			unlock, err := namedLock(ctx, db)
			if err != nil {
				return err
			}
			defer unlock()
			return migrate(db)
		})
	case "sqlite":
		db := s.db.WithContext(ctx)
		var file string
		if err := db.Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file).Error; err != nil {
			return fmt.Errorf("store: migrate: find the database file: %w", err)
		}
		mu, _ := sqliteMigrations.LoadOrStore(file, new(sync.Mutex))
		mu.(*sync.Mutex).Lock()
		defer mu.(*sync.Mutex).Unlock()
		return migrate(db)
	default: // no dialect xtimer supports
		return migrate(s.db.WithContext(ctx))
	}
}

// namedLock takes MySQL's named lock of the migration on the connection
// conn is pinned to. The lock is the session's: unlock releases it, and a
// connection whose wait was cut short, or whose release failed, is closed
// rather than given back to the pool holding it.
func namedLock(ctx context.Context, conn *gorm.DB) (unlock func(), err error) {
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
