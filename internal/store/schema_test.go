package store_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

var models = []any{&store.Task{}, &store.AppState{}, &store.Execution{}, &store.Slot{}, &store.Replica{}, &store.HandlerChunk{}, &store.Action{}, &store.Alert{}, &store.Rollup{}, &store.Calendar{}, &store.Attempt{}, &store.SchemaMark{}}

// ddl matches statements that change the schema.
var ddl = regexp.MustCompile(`(?i)^\s*(CREATE|ALTER|DROP|RENAME)\b`)

// schemaChanges runs Migrate in full, as on a database without the mark of
// this version's schema, and returns the DDL statements it issued.
func schemaChanges(t *testing.T, b *bundle) []string {
	t.Helper()
	forgetSchemaMark(t, b.db)
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
			// The retry index, which no tag declares (it differs by database).
			indexes, err := store.ExecutionIndexes(b.db)
			require.NoError(t, err)
			for _, name := range indexes {
				require.True(t, m.HasIndex(&store.Execution{}, name), "index %s on xtimer_executions", name)
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

// Replicas started together on an empty database migrate at once, each on
// its own connection: none of them may fail on a table, type or index
// another one created meanwhile.
func TestMigratesAtOnceAllSucceed(t *testing.T) {
	t.Parallel()
	for _, backend := range testsvc.Backends() {
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			db := backend.Open(t)
			const replicas = 4
			errs := make(chan error, replicas)
			for range replicas {
				go func() { errs <- store.New(db).Migrate(context.Background()) }()
			}
			for range replicas {
				require.NoError(t, <-errs)
			}
			require.Empty(t, schemaChanges(t, open(t, db)), "the migrations left the schema complete")
		})
	}
}

// A database migrated by an earlier version keeps indexes AutoMigrate no
// longer declares; Migrate drops the ones that were replaced.
func TestMigrateDropsRetiredIndexes(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		m := b.db.Migrator()
		forgetSchemaMark(t, b.db)
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

	forgetSchemaMark(t, b.db)
	require.NoError(t, b.db.Exec("ALTER TABLE xtimer_executions RESET (fillfactor)").Error)
	require.NoError(t, b.store.Migrate(b.ctx))
	require.Equal(t, "fillfactor=50", options(), "a table from before the fill factor gets it")
}

// retryIndexDef returns the definition of index name as PostgreSQL or
// SQLite keeps it (MySQL keeps none as text).
func retryIndexDef(t *testing.T, b *bundle, name string) string {
	t.Helper()
	var def []string
	query := "SELECT indexdef FROM pg_indexes WHERE indexname = ?"
	if b.db.Dialector.Name() == "sqlite" {
		query = "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?"
	}
	require.NoError(t, b.db.Raw(query, name).Scan(&def).Error)
	require.Len(t, def, 1, "index %s", name)
	return def[0]
}

// Where the database has partial indexes, the retry index holds only the
// rows waiting for a retry, and a database migrated by an earlier version
// has its whole-table retry index replaced; MySQL keeps the whole one.
func TestMigrateMakesTheRetryIndexPartialWhereItCan(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		m := b.db.Migrator()
		if b.db.Dialector.Name() == "mysql" {
			require.True(t, m.HasIndex(&store.Execution{}, "xtimer_executions_retry"))
			require.False(t, m.HasIndex(&store.Execution{}, "xtimer_executions_retrying"))
			return
		}
		require.False(t, m.HasIndex(&store.Execution{}, "xtimer_executions_retry"))
		require.Regexp(t, `\(app, next_attempt_ms\) WHERE \(?\(?status\)?(::text)? = 'retrying'`, retryIndexDef(t, b, "xtimer_executions_retrying"))

		// As an earlier version left it: the whole retry index, no partial
		// one, and no mark of this version's schema.
		forgetSchemaMark(t, b.db)
		require.NoError(t, b.db.Exec("DROP INDEX xtimer_executions_retrying").Error)
		require.NoError(t, b.db.Exec("CREATE INDEX xtimer_executions_retry ON xtimer_executions (app, status, next_attempt_ms)").Error)
		require.NoError(t, b.store.Migrate(b.ctx))
		require.False(t, m.HasIndex(&store.Execution{}, "xtimer_executions_retry"), "the whole index is dropped")
		require.True(t, m.HasIndex(&store.Execution{}, "xtimer_executions_retrying"))
		require.Empty(t, schemaChanges(t, b), "nothing left to change")
	})
}

// DueRetries must find its rows along the partial index in every plan
// PostgreSQL may pick for it, the generic plan of a prepared statement
// included (the driver prepares and caches statements): the status in its
// condition is a literal the planner can match to the index's.
func TestDueRetriesReadsThePartialIndexInAGenericPlan(t *testing.T) {
	t.Parallel()
	b := open(t, testsvc.Postgres(t))
	require.NoError(t, b.store.Migrate(b.ctx))

	// 20,000 finished fires and 500 waiting for a retry.
	for i := range 20 {
		runTimes := make([]int64, 1000)
		for j := range runTimes {
			runTimes[j] = t0 + int64(i*1000+j)*1000
		}
		_, err := b.store.InsertFires(b.ctx, fires(b.app, fmt.Sprintf("task-%02d", i), runTimes...))
		require.NoError(t, err)
	}
	require.NoError(t, b.db.Exec("UPDATE xtimer_executions SET status = ? WHERE app = ?", store.StatusSucceeded, b.app).Error)
	require.NoError(t, b.db.Exec("UPDATE xtimer_executions SET status = ?, next_attempt_ms = run_time + 5000 WHERE app = ? AND id % 40 = 0",
		store.StatusRetrying, b.app).Error)
	require.NoError(t, b.db.Exec("ANALYZE xtimer_executions").Error)

	// The statement and arguments DueRetries sends, as the driver gets them.
	var sql string
	var vars []any
	require.NoError(t, b.db.Callback().Query().After("gorm:query").Register("test:due_retries", func(tx *gorm.DB) {
		if strings.Contains(tx.Statement.SQL.String(), "next_attempt_ms <=") {
			sql, vars = tx.Statement.SQL.String(), append([]any(nil), tx.Statement.Vars...)
		}
	}))
	due, err := b.store.DueRetries(b.ctx, b.app, t0+100_000_000, 100)
	require.NoError(t, err)
	require.Len(t, due, 100)
	require.NotEmpty(t, sql, "DueRetries' statement was not seen")
	require.Len(t, vars, 3, "the app, the instant and the limit: %q", sql)

	var plan []string
	require.NoError(t, b.db.Connection(func(conn *gorm.DB) error {
		for _, stmt := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE due_retries AS " + sql} {
			if err := conn.Exec(stmt).Error; err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		args := make([]string, len(vars))
		for i, v := range vars {
			args[i] = literal(t, v)
		}
		return conn.Raw("EXPLAIN EXECUTE due_retries(" + strings.Join(args, ", ") + ")").Scan(&plan).Error
	}))
	joined := strings.Join(plan, "\n")
	require.Contains(t, joined, "xtimer_executions_retrying", "the generic plan of %q:\n%s", sql, joined)
}

// literal writes v, a string or an integer, as an SQL literal.
func literal(t *testing.T, v any) string {
	t.Helper()
	switch v := v.(type) {
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case int, int64:
		return fmt.Sprint(v)
	}
	t.Fatalf("argument %v of type %T", v, v)
	return ""
}
