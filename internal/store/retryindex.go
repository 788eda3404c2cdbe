package store

import (
	"fmt"

	"gorm.io/gorm"
)

// retryingRows is the condition of the rows DueRetries reads. It is
// written into the query as a literal, not a parameter, so that the
// planner can prove it implies the partial index's condition, in a generic
// plan of a prepared statement too.
const retryingRows = "status = '" + StatusRetrying + "'"

// The index DueRetries reads is the one index of xtimer_executions that the
// model's tags do not declare, because it differs by database:
//
//   - PostgreSQL and SQLite: xtimer_executions_retrying (app,
//     next_attempt_ms) WHERE status = 'retrying'. Only rows waiting for a
//     retry are in it, so a fire's insert and its finish add no entry to
//     it. On PostgreSQL a finish (which changes the indexed status) writes
//     a new entry into every index the new row version belongs to: a fire
//     that succeeds at its first attempt writes 10 index entries, not 12.
//   - MySQL and MariaDB, which have no partial index: xtimer_executions_retry
//     (app, status, next_attempt_ms).
//
// The status index (app, status, run_time) would find the retrying rows as
// well, but unlike the scheduled and running ones they are not few: after
// an outage of what the handlers call, every failed fire can be waiting for
// its retry, and DueRetries would read and sort all of them at every tick.
const (
	retryIndexPartial = "xtimer_executions_retrying"
	retryIndexFull    = "xtimer_executions_retry"
)

// retryIndex returns the name of the retry index on dialect and the
// statement that creates it.
func retryIndex(dialect string) (name, create string) {
	if dialect == "mysql" {
		return retryIndexFull, "CREATE INDEX " + retryIndexFull + " ON xtimer_executions (app, status, next_attempt_ms)"
	}
	return retryIndexPartial, "CREATE INDEX " + retryIndexPartial + " ON xtimer_executions (app, next_attempt_ms) WHERE " + retryingRows
}

// ExecutionIndexes returns the names of the indexes Migrate makes on
// xtimer_executions in db's database, besides the primary key: the model's
// and the retry index.
func ExecutionIndexes(db *gorm.DB) ([]string, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(&Execution{}); err != nil {
		return nil, fmt.Errorf("store: parse the executions model: %w", err)
	}
	var names []string
	for _, idx := range stmt.Schema.ParseIndexes() {
		names = append(names, idx.Name)
	}
	name, _ := retryIndex(db.Dialector.Name())
	return append(names, name), nil
}

// CreateExecutionIndex creates the index name, one of ExecutionIndexes, on
// xtimer_executions.
func CreateExecutionIndex(db *gorm.DB, name string) error {
	if retry, create := retryIndex(db.Dialector.Name()); name == retry {
		if err := db.Exec(create).Error; err != nil {
			return fmt.Errorf("store: create index %s: %w", name, err)
		}
		return nil
	}
	if err := db.Migrator().CreateIndex(&Execution{}, name); err != nil {
		return fmt.Errorf("store: create index %s: %w", name, err)
	}
	return nil
}

// createRetryIndex creates the retry index when it is missing. Where it is
// the partial one, Migrate then drops the whole index earlier versions
// made everywhere (retiredIndexes), so that DueRetries always has one of
// them.
func createRetryIndex(db *gorm.DB) error {
	name, _ := retryIndex(db.Dialector.Name())
	if db.Migrator().HasIndex(&Execution{}, name) {
		return nil
	}
	if err := CreateExecutionIndex(db, name); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}
