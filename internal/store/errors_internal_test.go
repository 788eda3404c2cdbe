package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// openSQLiteNoWait opens the SQLite file path with no busy timeout, so that
// a write behind another connection's lock fails at once with SQLITE_BUSY.
func openSQLiteNoWait(t *testing.T, path string) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(sqlite.Open("file:"+path+"?_busy_timeout=0&_txlock=immediate"), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = sqlDB.Close() })
	return db
}

func TestSQLiteErrorsAreToldApartByTheirCodesNotTheirText(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "codes.db")
	a, b := openSQLiteNoWait(t, path), openSQLiteNoWait(t, path)
	require.NoError(t, a.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT UNIQUE)").Error)
	require.NoError(t, a.Exec("INSERT INTO kv VALUES ('a', 'x')").Error)

	err := a.Exec("INSERT INTO kv VALUES ('a', 'y')").Error
	code, extended, ok := sqliteCodes(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, 19, code&0xff, "SQLITE_CONSTRAINT")
	require.Equal(t, sqliteConstraintPrimaryKey, extended)
	require.True(t, duplicateKey(err))
	require.True(t, duplicateKey(fmt.Errorf("store: create: %w", err)), "wrapped")
	require.False(t, retryable(err))

	err = a.Exec("INSERT INTO kv VALUES ('b', 'x')").Error
	_, extended, ok = sqliteCodes(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, sqliteConstraintUnique, extended)
	require.True(t, duplicateKey(err))

	// b holds the write lock: a's write is refused at once, and a retry of
	// the transaction is what resolves that.
	tx := b.Begin()
	require.NoError(t, tx.Error)
	require.NoError(t, tx.Exec("INSERT INTO kv VALUES ('c', 'z')").Error)
	err = a.Exec("INSERT INTO kv VALUES ('d', 'w')").Error
	code, _, ok = sqliteCodes(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, sqliteBusy, code&0xff)
	require.True(t, retryable(err))
	require.True(t, retryable(errors.Join(errors.New("rollback failed"), fmt.Errorf("tx: %w", err))), "joined and wrapped")
	require.False(t, duplicateKey(err))
	require.NoError(t, tx.Rollback().Error)

	// Text alone decides nothing.
	require.False(t, retryable(errors.New("database is locked (SQLITE_BUSY)")))
	require.False(t, duplicateKey(errors.New("UNIQUE constraint failed: kv.k")))
	require.True(t, duplicateKey(fmt.Errorf("translated: %w", gorm.ErrDuplicatedKey)), "a DB opened with TranslateError")
}
