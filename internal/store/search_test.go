package store_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// A user who may not create pg_trgm (neither superuser nor the database's
// owner) still migrates: Migrate warns, naming the extension, and the
// search scans instead of reading trigram indexes. Once a DBA has created
// the extension, the next Migrate adds the indexes.
func TestMigrateWithoutPgTrgmWarnsAndSearchStillFinds(t *testing.T) {
	t.Parallel()
	owner := testsvc.Postgres(t)
	var dbName string
	require.NoError(t, owner.Raw("SELECT current_database()").Scan(&dbName).Error)
	suffix := make([]byte, 6)
	_, err := rand.Read(suffix)
	require.NoError(t, err)
	role, password := "xtimer_noext_"+hex.EncodeToString(suffix), hex.EncodeToString(suffix)
	require.NoError(t, owner.Exec("CREATE ROLE "+role+" LOGIN PASSWORD '"+password+"'").Error)
	t.Cleanup(func() {
		owner.Exec("DROP OWNED BY " + role)
		owner.Exec("DROP ROLE IF EXISTS " + role)
	})
	require.NoError(t, owner.Exec("GRANT USAGE, CREATE ON SCHEMA public TO "+role).Error)

	dsn := os.Getenv("XTIMER_POSTGRES_DSN")
	if dsn == "" {
		dsn = testsvc.DefaultPostgresDSN
	}
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.User, cfg.Password, cfg.Database = role, password, dbName
	sqlDB := stdlib.OpenDB(*cfg)
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })

	var logs bytes.Buffer
	b := open(t, db)
	st := store.New(db, store.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	require.NoError(t, st.Migrate(b.ctx))
	var warning struct {
		Level, Msg, Extension string
	}
	require.NoError(t, json.Unmarshal(logs.Bytes(), &warning), "one warning: %s", logs.String())
	require.Equal(t, "WARN", warning.Level)
	require.Equal(t, "pg_trgm", warning.Extension)
	require.Contains(t, warning.Msg, "pg_trgm is missing")
	m := db.Migrator()
	require.False(t, m.HasIndex(&store.Task{}, "xtimer_tasks_code_trgm"))
	require.Equal(t, int64(0), schemaMarks(t, db), "a migration without the trigram indexes is not marked done")

	_, err = st.UpsertTasks(b.ctx, []*store.Task{
		{App: b.app, Code: "billing-50", Name: "50 percent off", Spec: "@every 1m"},
		{App: b.app, Code: "alpha", Name: "Alpha job", Spec: "@every 1m"},
	})
	require.NoError(t, err)
	for text, want := range map[string][]string{"illing": {"billing-50"}, "ob": {"alpha"}, "zzz": nil} {
		require.Equal(t, want, listTasks(t, &bundle{ctx: b.ctx, db: db, store: st, app: b.app}, store.TaskFilter{App: b.app, Text: text}, 0), text)
	}

	require.NoError(t, owner.Exec("CREATE EXTENSION pg_trgm").Error)
	logs.Reset()
	require.NoError(t, st.Migrate(b.ctx))
	require.Empty(t, logs.String())
	require.True(t, m.HasIndex(&store.Task{}, "xtimer_tasks_code_trgm"))
	require.True(t, m.HasIndex(&store.Task{}, "xtimer_tasks_own_name_trgm"))
	require.Equal(t, int64(1), schemaMarks(t, db))
}
