package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// A Migrate waits while another replica's migration holds the lock, fails
// naming that wait when its deadline passes first, and once it ran, leaves
// the lock free: no connection of its pool keeps it.
func TestMigrateWaitsForAnotherReplicasMigration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		open          func(testing.TB) *gorm.DB
		take, tryTake string
		release       string
	}{
		{"postgres", testsvc.Postgres, "SELECT pg_advisory_lock($1)", "SELECT pg_try_advisory_lock($1)::int", "SELECT pg_advisory_unlock($1)"},
		{"mysql", testsvc.MySQL, "SELECT GET_LOCK(" + migrateLockName + ", 0)", "SELECT GET_LOCK(" + migrateLockName + ", 0)",
			"SELECT RELEASE_LOCK(" + migrateLockName + ")"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := c.open(t)
			sqlDB, err := db.DB()
			require.NoError(t, err)
			other, err := sqlDB.Conn(ctx) // the other replica's session
			require.NoError(t, err)
			defer other.Close()
			var args []any
			if c.name == "postgres" {
				args = []any{migrateLockKey}
			}
			_, err = other.ExecContext(ctx, c.take, args...)
			require.NoError(t, err)

			short, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			err = New(db).Migrate(short)
			require.ErrorContains(t, err, "wait for the migration of another replica")
			require.False(t, db.Migrator().HasTable(&Task{}), "nothing migrated behind the other's lock")

			_, err = other.ExecContext(ctx, c.release, args...)
			require.NoError(t, err)
			require.NoError(t, New(db).Migrate(ctx))
			require.True(t, db.Migrator().HasTable(&Task{}))
			var got int
			require.NoError(t, other.QueryRowContext(ctx, c.tryTake, args...).Scan(&got))
			require.Equal(t, 1, got, "Migrate released its lock")
		})
	}
}
