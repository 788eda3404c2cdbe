package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The three databases run on this machine, so their clocks are this
// process's: the clock DBNow reads lies between the instants before and
// after the query, give or take the database's rounding.
func TestDBNowReadsTheDatabasesClock(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		s := store.New(b.db)
		for range 3 {
			before := time.Now()
			got, err := s.DBNow(context.Background())
			after := time.Now()
			require.NoError(t, err)
			require.False(t, got.Before(before.Add(-time.Millisecond)), "db %s, sent %s", got, before)
			require.False(t, got.After(after.Add(time.Millisecond)), "db %s, received %s", got, after)
		}
	})
}

// On MySQL/MariaDB, the session's time zone does not move the clock read.
func TestDBNowIgnoresTheMySQLSessionTimeZone(t *testing.T) {
	t.Parallel()
	db := testsvc.MySQL(t)
	require.NoError(t, db.Connection(func(conn *gorm.DB) error {
		for _, zone := range []string{"+05:30", "-11:00", "+00:00"} {
			require.NoError(t, conn.Exec("SET time_zone = ?", zone).Error)
			before := time.Now()
			got, err := store.New(conn).DBNow(context.Background())
			require.NoError(t, err)
			require.WithinRange(t, got, before.Add(-time.Millisecond), time.Now().Add(time.Millisecond), "time zone %s", zone)
		}
		return nil
	}))
}
