package store_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

var models = []any{&store.Task{}, &store.AppState{}, &store.Execution{}, &store.Slot{}, &store.Replica{}, &store.HandlerChunk{}, &store.Action{}, &store.Alert{}, &store.Rollup{}, &store.Calendar{}, &store.Attempt{}}

// ddl matches statements that change the schema.
var ddl = regexp.MustCompile(`(?i)^\s*(CREATE|ALTER|DROP|RENAME)\b`)

// schemaChanges runs Migrate and returns the DDL statements it issued.
func schemaChanges(t *testing.T, b *bundle) []string {
	t.Helper()
	rec := &recorder{}
	s := store.New(b.db.Session(&gorm.Session{Logger: rec}))
	require.NoError(t, s.Migrate(b.ctx))
	seen := rec.statements()
	require.NotEmpty(t, seen, "the recorder saw no statement at all")
	var changes []string
	for _, sql := range seen {
		if ddl.MatchString(sql) {
			changes = append(changes, sql)
		}
	}
	return changes
}

func TestMigrateTwiceChangesNothing(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		require.Empty(t, schemaChanges(t, b))
	})
}

func TestHandWrittenSchemaMatchesModels(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		open func(testing.TB) *gorm.DB
		file string
	}{
		{"mysql", testsvc.MySQL, "schema/mysql.sql"},
		{"postgres", testsvc.Postgres, "schema/postgres.sql"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := open(t, c.open(t))
			text, err := os.ReadFile(c.file)
			require.NoError(t, err)
			for _, stmt := range statements(string(text)) {
				require.NoError(t, b.db.Exec(stmt).Error, stmt)
			}

			m := b.db.Migrator()
			for _, model := range models {
				stmt := &gorm.Statement{DB: b.db}
				require.NoError(t, stmt.Parse(model))
				table := stmt.Schema.Table
				require.True(t, m.HasTable(model), "table %s", table)
				for _, f := range stmt.Schema.Fields {
					if f.DBName != "" {
						require.True(t, m.HasColumn(model, f.DBName), "column %s.%s", table, f.DBName)
					}
				}
				for _, idx := range stmt.Schema.ParseIndexes() {
					require.True(t, m.HasIndex(model, idx.Name), "index %s on %s", idx.Name, table)
				}
			}
			require.Empty(t, schemaChanges(t, b), "AutoMigrate after %s must change nothing", c.file)

			// And the hand-made tables work for the real queries.
			got, err := b.store.InsertFires(b.ctx, fires(b.app, "a", t0, t0+1000))
			require.NoError(t, err)
			require.Len(t, got, 2)
		})
	}
}

// statements splits an SQL file into statements, dropping "--" comments.
func statements(text string) []string {
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		lines = append(lines, line)
	}
	var out []string
	for _, s := range strings.Split(strings.Join(lines, "\n"), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// A database migrated by an earlier version keeps indexes AutoMigrate no
// longer declares; Migrate drops the ones that were replaced.
func TestMigrateDropsRetiredIndexes(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		m := b.db.Migrator()
		require.NoError(t, b.db.Exec("CREATE INDEX xtimer_executions_replica ON xtimer_executions (app, replica, status)").Error)
		require.True(t, m.HasIndex(&store.Execution{}, "xtimer_executions_replica"))
		require.NoError(t, b.store.Migrate(b.ctx))
		require.False(t, m.HasIndex(&store.Execution{}, "xtimer_executions_replica"))
		require.True(t, m.HasIndex(&store.Execution{}, "xtimer_executions_replica_time"))
		require.NoError(t, b.store.Migrate(b.ctx), "nothing left to drop")
	})
}

// On PostgreSQL, Migrate leaves half of each new page of the executions
// table free, for the start claim's HOT update; a fill factor a DBA set
// stays.
func TestMigrateLeavesRoomForStartsOnPostgres(t *testing.T) {
	t.Parallel()
	b := open(t, testsvc.Postgres(t))
	require.NoError(t, b.store.Migrate(b.ctx))
	options := func() (opts string) {
		require.NoError(t, b.db.Raw(`SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class
			WHERE oid = 'xtimer_executions'::regclass`).Scan(&opts).Error)
		return opts
	}
	require.Equal(t, "fillfactor=50", options())

	require.NoError(t, b.db.Exec("ALTER TABLE xtimer_executions SET (fillfactor = 80)").Error)
	require.Empty(t, schemaChanges(t, b), "a fill factor set by hand is left alone")
	require.Equal(t, "fillfactor=80", options())

	require.NoError(t, b.db.Exec("ALTER TABLE xtimer_executions RESET (fillfactor)").Error)
	require.NoError(t, b.store.Migrate(b.ctx))
	require.Equal(t, "fillfactor=50", options(), "a table from before the fill factor gets it")
}
