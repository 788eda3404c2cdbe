package store

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The name's trigram index holds only the names that are not the task's
// code, and the search's condition repeats that predicate: PostgreSQL can
// then answer a text from the two trigram indexes. Were the condition one
// it could not match to the predicate, every search would read the whole
// table. The index of every name that earlier versions created is
// replaced by Migrate.
func TestTextSearchIsServedByBothTrigramIndexesOnPostgres(t *testing.T) {
	t.Parallel()
	db := testsvc.Postgres(t)
	ctx := context.Background()
	st := New(db)
	require.NoError(t, st.Migrate(ctx))
	var def string
	require.NoError(t, db.Raw("SELECT indexdef FROM pg_indexes WHERE indexname = ?", trgmNameIndex).Scan(&def).Error)
	require.Contains(t, def, "WHERE ((name)::text <> (code)::text)")

	// As an earlier version left it, without the mark of this version's
	// schema (schemamark.go).
	require.NoError(t, db.Exec("DELETE FROM xtimer_schema").Error)
	require.NoError(t, db.Exec("DROP INDEX "+trgmNameIndex).Error)
	require.NoError(t, db.Exec("CREATE INDEX xtimer_tasks_name_trgm ON xtimer_tasks USING gin (lower(name) gin_trgm_ops)").Error)
	require.NoError(t, st.Migrate(ctx))
	m := db.Migrator()
	require.False(t, m.HasIndex(&Task{}, "xtimer_tasks_name_trgm"), "the index of every name is dropped")
	require.True(t, m.HasIndex(&Task{}, trgmNameIndex))

	// With scans of the table and plain index scans off, only bitmap scans
	// of the trigram indexes serve the condition; a branch no index serves
	// leaves a Seq Scan in the plan.
	var plan []string
	err := db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
			return err
		}
		if err := tx.Exec("SET LOCAL enable_indexscan = off").Error; err != nil {
			return err
		}
		return tx.Raw("EXPLAIN SELECT id FROM xtimer_tasks WHERE "+substringCond, substringArgs("nightly")...).Scan(&plan).Error
	})
	require.NoError(t, err)
	text := strings.Join(plan, "\n")
	require.Contains(t, text, trgmCodeIndex, text)
	require.Contains(t, text, trgmNameIndex, text)
	require.NotContains(t, text, "Seq Scan", text)
}
