package store

import (
	"context"
	"fmt"
	"math"
	"time"
)

// This file reads the database's clock, the reference every replica
// corrects its own by (internal/engine/clockref.go).

// DBNow returns the database server's clock, read in one query, to the
// microsecond where the database has it (SQLite: the millisecond of this
// process's clock, SQLite running in it). Each dialect's query is
// independent of the session's time zone:
//
//   - PostgreSQL: clock_timestamp(), the time as the statement runs (now()
//     would be the transaction's start);
//   - MySQL/MariaDB: UTC_TIMESTAMP(6) counted from the epoch, so that no
//     session time zone or daylight-saving rule converts it;
//   - SQLite: julianday('now').
func (s *Store) DBNow(ctx context.Context) (time.Time, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	db := s.db.WithContext(ctx)
	var (
		us  int64
		err error
	)
	switch name := db.Dialector.Name(); name {
	case "postgres":
		err = db.Raw("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint").Scan(&us).Error
	case "mysql":
		err = db.Raw("SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))").Scan(&us).Error
	case "sqlite":
		var days float64
		if err = db.Raw("SELECT julianday('now') - 2440587.5").Scan(&days).Error; err == nil {
			us = int64(math.Round(days * 86400e6))
		}
	default:
		return time.Time{}, fmt.Errorf("store: read the database's clock: dialect %q has no clock query", name)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("store: read the database's clock: %w", err)
	}
	return time.UnixMicro(us), nil
}
