package backend

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpenDBRefusesMalformedDSNsWithoutConnecting(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dsn, want string }{
		{"", "want mysql://"},
		{"mysql://bad-dsn", `"mysql://bad-dsn": want mysql://user:pass@host:port/db (host and database name required)`},
		{"mysql://root:hunter2@db:3306", `"mysql://root:xxxxx@db:3306": want mysql://`},
		{"postgres://root:hunter2@/xtimer", `"postgres://root:xxxxx@/xtimer": want postgres://`},
		{"postgresql://db:5432", `"postgresql://db:5432": want postgres://`},
		{"sqlserver://sa:hunter2@db/x", `"sqlserver://sa:xxxxx@db/x": unknown scheme "sqlserver"`},
		{"mysql://root:hun%zzter2@db/x", `"mysql://xxxxx@db/x": not a valid URL`},
	} {
		t.Run(c.dsn, func(t *testing.T) {
			_, _, err := OpenDB(c.dsn)
			require.ErrorIs(t, err, ErrBadDSN)
			require.ErrorContains(t, err, c.want)
			require.NotContains(t, err.Error(), "hunter2")
		})
	}
}

func TestOpenDBOpensSQLiteFilePath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.db")
	db, where, err := OpenDB(path)
	require.NoError(t, err)
	require.Equal(t, "sqlite", db.Dialector.Name())
	require.Equal(t, "sqlite "+path, where)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	require.NoError(t, sqlDB.Close())

	_, _, err = OpenDB(filepath.Join(t.TempDir(), "missing-dir", "x.db"))
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrBadDSN, "a file that cannot be opened is not a malformed DSN")
}

func TestOpenRedisWithoutAddressIsNil(t *testing.T) {
	t.Parallel()
	rdb, err := OpenRedis(context.Background(), "")
	require.NoError(t, err)
	require.Nil(t, rdb)
}
