package store

import (
	"context"
	"fmt"
	"sync/atomic"

	"gorm.io/gorm"
)

// analyzeAfterRows is the size of an insert after which analyzeFresh and
// analyzeChanged look at the table.
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
// tried again after the next large insert. xtimer_tasks is analyzed so;
// xtimer_executions, which goes on changing, by analyzeChanged, whose
// first ANALYZE is this one.
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

// analyzeChanged analyzes xtimer_executions on PostgreSQL after an insert
// of many fires, whenever more of its rows changed since its last
// ANALYZE than it counted then: its first ANALYZE (analyzeFresh's rule,
// a table never analyzed) is followed by more, each when the table has
// about doubled in changes, until autovacuum's own, which counts a tenth,
// comes first. A young executions table changes faster than autovacuum
// looks at it (once a minute): its first statistics, taken after its
// first large insert, say every row is scheduled, and planned the tick's
// reads of the few scheduled rows (OwnedFires, PromoteLostStarts) as
// scans of the whole table or of a replica's rows, each second on every
// replica, until autovacuum analyzed it (bench/README.md, "PostgreSQL at
// 10,000 a second on a new table"). A table that holds history changes
// by a small part of its rows: its statistics stay true, and it is left
// to autovacuum.
//
// It looks and analyzes in the background, one look at a time per Store:
// the caller arms the fires it inserted without waiting for an ANALYZE,
// and the ANALYZE is a quick one (quickStatisticsTarget). SKIP_LOCKED: an ANALYZE or
// VACUUM under way (another replica's, autovacuum's) holds the lock this
// one needs; this one gives way rather than wait, and the next large
// insert looks again. Failing costs only speed, as for analyzeFresh.
func (s *Store) analyzeChanged(ctx context.Context, inserted int) {
	if inserted < analyzeAfterRows || s.db.Dialector.Name() != "postgres" ||
		!s.analyzingExecutions.CompareAndSwap(false, true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	go func() {
		defer s.analyzingExecutions.Store(false)
		defer cancel()
		db := s.db.WithContext(ctx)
		var due bool
		err := db.Raw(`SELECT (st.last_analyze IS NULL AND st.last_autoanalyze IS NULL) OR st.n_mod_since_analyze >= c.reltuples
			FROM pg_stat_user_tables st JOIN pg_class c ON c.oid = st.relid
			WHERE st.relid = 'xtimer_executions'::regclass`).Scan(&due).Error
		if err == nil && due {
			_ = db.Transaction(func(tx *gorm.DB) error {
				if err := tx.Exec(fmt.Sprintf("SET LOCAL default_statistics_target = %d", quickStatisticsTarget)).Error; err != nil {
					return err
				}
				return tx.Exec("ANALYZE (SKIP_LOCKED) xtimer_executions").Error
			})
		}
	}()
}

// quickStatisticsTarget is the statistics target of analyzeChanged's
// ANALYZE, for its transaction: it samples 300 rows per unit, 3,000,
// where autovacuum's, at the server's default of 100, samples 30,000 and
// reads as many pages. The tick's reads need only the share of scheduled
// rows and the spread of run times, which a small sample shows; it runs
// several times in a young table's first minute, beside thousands of
// fires a second, and autovacuum's own ANALYZE, which follows, keeps the
// finer statistics of a table that has stopped changing fast.
const quickStatisticsTarget = 10
