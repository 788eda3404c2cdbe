package store

import "context"

// analyzeAfterRows is the size of an insert of fires after which
// analyzeFresh looks at the executions table.
const analyzeAfterRows = 1000

// analyzeFresh analyzes the executions table on PostgreSQL after an
// insert of many fires, if it was never analyzed. PostgreSQL plans a
// table without statistics with default guesses (an equality keeps 0.5%
// of the rows), by which a scan of one replica's or one status's rows
// looks cheaper than the primary key for 500 ids: in bench/'s steady
// workload (1,000 tasks every second, a new database), StartFires of 500
// fires took 100-550 ms instead of about 5 ms until autovacuum, which
// looks once a minute, got to the table. A failed ANALYZE costs only
// speed, not the insert: it is tried again after the next large insert.
// Once the table has statistics, autovacuum keeps them, and this looks no
// more.
func (s *Store) analyzeFresh(ctx context.Context, inserted int) {
	if inserted < analyzeAfterRows || s.db.Dialector.Name() != "postgres" || s.analyzed.Load() {
		return
	}
	var never bool
	err := s.db.WithContext(ctx).Raw(`SELECT last_analyze IS NULL AND last_autoanalyze IS NULL
		FROM pg_stat_user_tables WHERE relid = 'xtimer_executions'::regclass`).Scan(&never).Error
	if err != nil {
		return
	}
	if never && s.db.WithContext(ctx).Exec("ANALYZE xtimer_executions").Error != nil {
		return
	}
	s.analyzed.Store(true)
}
