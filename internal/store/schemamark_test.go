package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// schemaMarks counts the rows of xtimer_schema.
func schemaMarks(t *testing.T, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Model(&store.SchemaMark{}).Count(&n).Error)
	return n
}

// forgetSchemaMark makes db's schema look like an earlier version's, which
// wrote no mark of this version's schema.
func forgetSchemaMark(t *testing.T, db *gorm.DB) {
	t.Helper()
	require.NoError(t, db.Exec("DELETE FROM xtimer_schema").Error)
}

// migrateStatements runs Migrate and returns every statement it issued.
func migrateStatements(t *testing.T, b *bundle) []string {
	t.Helper()
	rec := &recorder{}
	require.NoError(t, store.New(b.db.Session(&gorm.Session{Logger: rec})).Migrate(b.ctx))
	return rec.statements()
}

// A replica that restarts on a database its version migrated already
// reads two things, the tables and the mark, and changes nothing: no
// lock, no catalog queries of AutoMigrate's. A database missing a table,
// or marked by another version's schema, is migrated in full again, and
// marked anew.
func TestMigrateLeavesAMarkedSchemaAlone(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		require.Equal(t, int64(1), schemaMarks(t, b.db), "a complete migration leaves its mark")
		var mark store.SchemaMark
		require.NoError(t, b.db.First(&mark).Error)
		require.Len(t, mark.Fingerprint, 64)
		require.Equal(t, t0, mark.MigratedMs)

		seen := migrateStatements(t, b)
		require.Len(t, seen, 2, "the tables and the mark, nothing else: %q", seen)
		require.Contains(t, seen[0], "xtimer_schema", "the tables counted include the mark's own")
		require.Contains(t, seen[1], "xtimer_schema")

		// A table dropped by hand: its CREATE again.
		require.NoError(t, b.db.Migrator().DropTable(&store.Slot{}))
		seen = migrateStatements(t, b)
		require.True(t, containsStatement(seen, "CREATE TABLE", "xtimer_slots"), "%q", seen)
		require.True(t, b.db.Migrator().HasTable(&store.Slot{}))
		require.Len(t, migrateStatements(t, b), 2, "marked again")

		// Another version's mark, and an index that version did not have.
		mine := mark.Fingerprint
		require.NoError(t, b.db.Model(&store.SchemaMark{}).Where("id = 1").Update("fingerprint", "another version").Error)
		require.NoError(t, b.db.Migrator().DropIndex(&store.Execution{}, "xtimer_executions_replica_time"))
		seen = migrateStatements(t, b)
		require.True(t, containsStatement(seen, "CREATE INDEX", "xtimer_executions_replica_time"), "%q", seen)
		require.True(t, b.db.Migrator().HasIndex(&store.Execution{}, "xtimer_executions_replica_time"))
		require.NoError(t, b.db.First(&mark).Error)
		require.Equal(t, mine, mark.Fingerprint)
		require.Equal(t, int64(1), schemaMarks(t, b.db))
		require.Len(t, migrateStatements(t, b), 2)
	})
}

// containsStatement reports whether one of seen holds every one of parts.
func containsStatement(seen []string, parts ...string) bool {
	for _, s := range seen {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			return true
		}
	}
	return false
}
