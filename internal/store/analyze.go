package store

import (
	"context"
	"sync/atomic"

	"gorm.io/gorm"
)

// analyzeAfterRows is the size of an insert after which analyzeFresh looks
// at the table.
const analyzeAfterRows = 1000

// analyzeFresh analyzes table on PostgreSQL after an insert of many rows,
// if it was never analyzed; seen remembers that it was, and it looks no
// more. PostgreSQL plans a table without statistics with default guesses,
// and plans a statement it ran five times once for any parameters; both
// went badly here until autovacuum, which looks once a minute, got to the
// table:
//
//   - xtimer_executions (bench/'s steady workload, 1,000 tasks every
//     second, a new database): an equality keeps 0.5% of the rows, by which
//     a scan of one replica's or one status's rows looks cheaper than the
//     primary key for 500 ids, and StartFires, on the fire path, ran that
//     slow plan;
//   - xtimer_tasks (a replica registering 10,000 tasks in a new database):
//     the read-back of the inserted rows, 500 codes a statement, was planned
//     as a scan of the app's rows filtered by a list of 500 parameters, each
//     row compared with each code, instead of one probe of the (app, code)
//     index per code.
//
// db may be a transaction, whose own inserted rows ANALYZE counts; there
// it runs under a savepoint, so that its failure does not abort the
// transaction. A failed ANALYZE costs only speed, not the insert: it is
// tried again after the next large insert.
func analyzeFresh(ctx context.Context, db *gorm.DB, table string, seen *atomic.Bool, inserted int) {
	if inserted < analyzeAfterRows || db.Dialector.Name() != "postgres" || seen.Load() {
		return
	}
	db = db.WithContext(ctx)
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		const sp = "xtimer_analyze"
		if db.SavePoint(sp).Error != nil {
			return
		}
		if !analyzeIfNever(db, table) {
			// An error aborts a PostgreSQL transaction; this undoes it. If
			// even that fails, the caller's next statement reports it.
			db.RollbackTo(sp)
			return
		}
		if db.Exec("RELEASE SAVEPOINT "+sp).Error != nil {
			return
		}
	} else if !analyzeIfNever(db, table) {
		return
	}
	seen.Store(true)
}

// analyzeIfNever runs ANALYZE on table unless it was analyzed already,
// and reports whether the table has statistics now.
func analyzeIfNever(db *gorm.DB, table string) bool {
	var never bool
	err := db.Raw(`SELECT last_analyze IS NULL AND last_autoanalyze IS NULL
		FROM pg_stat_user_tables WHERE relid = ?::regclass`, table).Scan(&never).Error
	return err == nil && (!never || db.Exec("ANALYZE "+table).Error == nil)
}
