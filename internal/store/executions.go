package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Result is how an attempt ended, as FinishAttempt records it.
type Result struct {
	// Status is StatusSucceeded, StatusFailed, StatusTimedOut, or
	// StatusRetrying when the policy grants another attempt.
	Status string
	// Reason qualifies the status, e.g. ReasonReplicaLost; up to 64 bytes.
	Reason string
	// Output and Error are stored cut to MaxTextBytes.
	Output string
	Error  string
	// FinishedMs is when the attempt ended; duration_ms is computed from it.
	FinishedMs int64
	// NextAttemptMs is when the retry is due; required with StatusRetrying.
	NextAttemptMs int64
	// HTTPStatus is the response status of an HTTP callback attempt, 0
	// when there was no response (and for Go handlers).
	HTTPStatus int
	// StartedMs, when set, is when the attempt really started, later than
	// the start its row records (StartFires, StartAttempt) because it
	// waited in the replica's queues: started_ms and duration_ms follow it,
	// and LatenessMs replaces lateness_ms, so that the wait shows as
	// lateness. Zero keeps the recorded start.
	StartedMs  int64
	LatenessMs int64
	// TimedOut, with StatusRetrying, says the attempt stopped at its
	// timeout: its row of xtimer_attempts says timed_out, not failed.
	TimedOut bool
}

// Finish is one item of FinishAttempts.
type Finish struct {
	ID      int64
	Attempt int
	Result
	// Retried says the execution was retried by hand (RetryExecution): a
	// final status is then counted in its day's roll-up if the day was
	// rolled up, as RetryExecution took the old one out.
	Retried bool
}

// fireKey is the identity of a fire's row within one app: the fire, and
// the shard (0 for an unsharded fire).
type fireKey struct {
	code    string
	runTime int64
	shard   int
}

// InsertFires records fires and returns exactly the rows that this call
// inserted, with their IDs, ordered by (task_code, run_time). A fire whose
// row already exists, inserted earlier or by another replica at the same
// moment, is left alone and not returned: the caller arms only what it
// gets back, which is what makes a fire start at most once.
//
// Every row must name the same App. Replica, when set, records which
// replica owns the fire (see MarkStarted). Zero fields take defaults: Status
// scheduled (skipped is allowed too, to record misfires), Source schedule,
// MaxAttempts 1, ScheduledMs now. ID and Claim are set by the call.
//
// How it learns what it inserted: all rows of the call carry one fresh
// random Claim; a row that already existed keeps the claim of the call
// that created it, so after the INSERT the rows of the call's keys whose
// claim is ours are exactly ours. PostgreSQL's INSERT ... ON CONFLICT DO
// NOTHING RETURNING (and SQLite's) answers with exactly those rows,
// MariaDB's INSERT ... RETURNING with every row of the call's keys; MySQL
// reads them back. It all happens in one transaction, so an error means
// this call inserted nothing.
func (s *Store) InsertFires(ctx context.Context, fires []Execution) ([]Execution, error) {
	if len(fires) == 0 {
		return nil, nil
	}
	claim, err := nonce()
	if err != nil {
		return nil, err
	}
	rows, err := s.fireRows(fires, claim)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	// A fire's shards are recorded by one call or none: shard 0 first, the
	// fire's other shards only if this call inserted its shard 0. Two
	// replicas recording a fire at once (a slot taken over, the lock
	// backend down) may deal it differently, a broadcast fire even into
	// another number of shards; the unique key on shard 0 decides whose
	// deal stands.
	first, rest := rows, []Execution(nil)
	if i := slices.IndexFunc(rows, func(r Execution) bool { return r.Shard != 0 }); i >= 0 {
		first, rest = nil, nil
		for _, r := range rows {
			if r.Shard == 0 {
				first = append(first, r)
			} else {
				rest = append(rest, r)
			}
		}
	}
	err = s.rowTx(ctx, func(tx *gorm.DB) error {
		returns, insertErr := s.insertReturns(ctx, tx)
		if insertErr != nil {
			return insertErr
		}
		if insertErr = insertFireRows(ctx, tx, first, claim, returns); insertErr != nil || len(rest) == 0 {
			return insertErr
		}
		won := map[fireKey]bool{}
		for _, r := range first {
			if r.ID != 0 {
				won[fireKey{r.TaskCode, r.RunTime, 0}] = true
			}
		}
		rest = slices.DeleteFunc(rest, func(r Execution) bool { return !won[fireKey{r.TaskCode, r.RunTime, 0}] })
		if len(rest) == 0 {
			return nil
		}
		return insertFireRows(ctx, tx, rest, claim, returns)
	})
	if err != nil {
		return nil, err
	}
	// What this call inserted is what has an ID, kept in place: first is
	// sorted (fireRows), and so is rest.
	notOurs := func(r Execution) bool { return r.ID == 0 }
	mine := slices.DeleteFunc(first, notOurs)
	if len(rest) > 0 {
		mine = append(mine, slices.DeleteFunc(rest, notOurs)...)
		slices.SortFunc(mine, compareFires)
	}
	analyzeFresh(ctx, s.db, "xtimer_executions", &s.analyzedExecutions, len(mine))
	return mine, nil
}

// insertFireRows inserts rows (fireRows' output: one app, one claim,
// sorted by key) in tx, and sets the IDs of those that were not there
// before; the others' are left 0 (a try of the transaction that failed
// leaves none of its IDs for the next). The
// rows that differ only in task, run time and attempts allowed (all of a
// planned slot's, usually) go in one statement per insertFiresChunk, the
// rest of their values bound once and those three as arrays (PostgreSQL)
// or a JSON document (MySQL/MariaDB, SQLite): with GORM's batched INSERT
// of 20 placeholders a row, a minute of thousands of fires a second took
// longer to record than the minute lasts (bench/README.md's performance report
// has BenchmarkInsertFires before and after). The inserted rows are those
// that carry our claim: where the INSERT answers with its rows (returns:
// all but MySQL, see insertReturns), among those; on MySQL, read back by
// their keys after the INSERT.
func insertFireRows(ctx context.Context, tx *gorm.DB, rows []Execution, claim string, returns bool) error {
	dialect := tx.Dialector.Name()
	for i := range rows {
		rows[i].ID = 0
	}
	items := make([]int, len(rows))
	for i := range items {
		items[i] = i
	}
	order, groups := groupBy(items, func(i int) Execution {
		shape := rows[i]
		shape.TaskCode, shape.RunTime, shape.MaxAttempts, shape.PlannedMs, shape.Shard = "", 0, 0, 0, 0
		return shape
	})
	for gi, shape := range order {
		idx := groups[gi]
		for from := 0; from < len(idx); from += insertFiresChunk {
			chunk := idx[from:min(from+insertFiresChunk, len(idx))]
			codes, runTimes, attempts := make([]string, len(chunk)), make([]int64, len(chunk)), make([]int64, len(chunk))
			for k, i := range chunk {
				codes[k], runTimes[k], attempts[k] = rows[i].TaskCode, rows[i].RunTime, int64(rows[i].MaxAttempts)
			}
			// The columns only some fires need join the statement only for
			// the chunks that hold such a fire: a jittered one's planned
			// start, a shard's index.
			var perRow []rowColumn
			for _, c := range []struct {
				name string
				of   func(Execution) int64
			}{
				{"planned_ms", func(r Execution) int64 { return r.PlannedMs }},
				{"shard", func(r Execution) int64 { return int64(r.Shard) }},
			} {
				if col, ok := optionalColumn(c.name, chunk, rows, c.of); ok {
					perRow = append(perRow, col)
				}
			}
			var shared []sharedColumn
			if shape.Shards != 0 || shape.Broadcast { // the fire's shards
				shared = append(shared, sharedColumn{"shards", "bigint", shape.Shards}, sharedColumn{"broadcast", "boolean", shape.Broadcast})
			}
			if shape.Params != "" || shape.Note != "" { // a manual run's parameters and note
				shared = append(shared, sharedColumn{"params", "text", shape.Params}, sharedColumn{"note", "text", shape.Note})
			}
			q, source, err := insertFiresSQL(dialect, codes, runTimes, attempts, perRow, shared)
			if err != nil {
				return err
			}
			args := append([]any{shape.App, shape.Claim, shape.UpdatedMs, shape.Status, shape.Reason, shape.Source,
				shape.Attempt, shape.Replica, shape.ScheduledMs, shape.StartedMs, shape.FinishedMs, shape.LatenessMs,
				shape.DurationMs, shape.HTTPStatus, shape.Output, shape.Error, shape.NextAttemptMs}, source...)
			if !returns {
				if _, err = tx.Statement.ConnPool.ExecContext(ctx, q, args...); err != nil {
					return fmt.Errorf("store: insert %d fires from %s at %d: %w", len(chunk), codes[0], runTimes[0], err)
				}
				continue
			}
			// PostgreSQL and SQLite answer with the rows they inserted,
			// MariaDB with those it found too: the rows of our claim are
			// ours.
			ours := "true"
			if dialect == "mysql" {
				ours, args = "claim = ?", append(args, claim)
			}
			rs, err := tx.Statement.ConnPool.QueryContext(ctx, q+" RETURNING id, task_code, run_time, shard, "+ours, args...)
			if err = markInserted(rows, rs, err); err != nil {
				return fmt.Errorf("store: insert %d fires from %s at %d: %w", len(chunk), codes[0], runTimes[0], err)
			}
		}
	}
	if returns {
		return nil
	}
	// rows are sorted by task: each read takes the keys of insertChunk
	// tasks, through the unique index.
	for from := 0; from < len(rows); {
		codes := make([]any, 0, min(insertChunk, len(rows)-from))
		minRun, maxRun := rows[from].RunTime, rows[from].RunTime
		to := from
		for ; to < len(rows); to++ {
			if r := rows[to]; to == from || r.TaskCode != rows[to-1].TaskCode {
				if len(codes) == insertChunk {
					break
				}
				codes = append(codes, r.TaskCode)
			}
			minRun, maxRun = min(minRun, rows[to].RunTime), max(maxRun, rows[to].RunTime)
		}
		q := "SELECT id, task_code, run_time, shard, true FROM xtimer_executions WHERE app = ? AND task_code IN (" + placeholders(len(codes)) +
			") AND run_time BETWEEN ? AND ? AND claim = ?"
		args := append(append([]any{rows[from].App}, codes...), minRun, maxRun, claim)
		rs, err := tx.Statement.ConnPool.QueryContext(ctx, q, args...)
		if err = markInserted(rows, rs, err); err != nil {
			return fmt.Errorf("store: read back inserted fires: %w", err)
		}
		from = to
	}
	return nil
}

// Servers of the mysql dialect, as insertReturns learns them.
const (
	flavorUnknown int32 = iota
	flavorMySQL
	flavorMariaDB
)

// insertReturns tells whether an INSERT answers with its rows (RETURNING)
// on the database of tx: PostgreSQL's and SQLite's do (3.35 on), and so
// does MariaDB's (10.5 on; xtimer needs 10.6 for JSON_TABLE), where
// reading the rows back after the INSERT slowed replicas recording at
// once (BenchmarkInsertFiresConcurrent). MySQL has no RETURNING. Which
// server stands behind the mysql dialect is asked once.
func (s *Store) insertReturns(ctx context.Context, tx *gorm.DB) (bool, error) {
	if tx.Dialector.Name() != "mysql" {
		return true, nil
	}
	if f := s.flavor.Load(); f != flavorUnknown {
		return f == flavorMariaDB, nil
	}
	var version string
	if err := tx.Statement.ConnPool.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return false, fmt.Errorf("store: read the server's version: %w", err)
	}
	f := flavorMySQL
	if strings.Contains(version, "MariaDB") {
		f = flavorMariaDB
	}
	s.flavor.Store(f)
	return f == flavorMariaDB, nil
}

// insertFiresChunk is the most fires one statement of insertFireRows
// inserts.
const insertFiresChunk = 10_000

// markInserted reads the (id, task_code, run_time, shard, ours) rows that
// rs answers, and sets the ID of each row of rows (sorted by key) that it
// names as ours. A key that is not one of rows (a task code that differs
// in case only, on MySQL's case-insensitive collation) is not ours. The
// code is read into the driver's own buffer and compared there, never
// made a string: a recorded minute answers with every one of its fires.
func markInserted(rows []Execution, rs *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	defer rs.Close()
	var (
		id, runTime int64
		code        sql.RawBytes
		shard       int
		ours        bool
	)
	for rs.Next() {
		if err := rs.Scan(&id, &code, &runTime, &shard, &ours); err != nil {
			return err
		}
		if !ours {
			continue
		}
		i := sort.Search(len(rows), func(i int) bool {
			r := &rows[i]
			return r.TaskCode > string(code) || r.TaskCode == string(code) && (r.RunTime > runTime || r.RunTime == runTime && r.Shard >= shard)
		})
		if i < len(rows) && rows[i].TaskCode == string(code) && rows[i].RunTime == runTime && rows[i].Shard == shard {
			rows[i].ID = id
		}
	}
	return rs.Err()
}

// rowColumn is a column whose value differs from fire to fire, beyond
// the task code, run time and attempts allowed that every insert carries.
type rowColumn struct {
	name   string
	values []int64
}

// sharedColumn is a column that all the fires of one statement share,
// beyond the 17 every insert carries; pgType is its PostgreSQL type.
type sharedColumn struct {
	name, pgType string
	value        any
}

// optionalColumn is the column name of the rows of chunk, when at least
// one of them has a value other than 0 there (of reads it); ok is false
// when none has, and the column keeps its default.
func optionalColumn(name string, chunk []int, rows []Execution, of func(Execution) int64) (col rowColumn, ok bool) {
	for k, i := range chunk {
		if of(rows[i]) == 0 {
			continue
		}
		values := make([]int64, len(chunk))
		for k2, i2 := range chunk[k:] {
			values[k+k2] = of(rows[i2])
		}
		return rowColumn{name, values}, true
	}
	return rowColumn{}, false
}

// insertFiresSQL is insertFireRows' statement on one dialect, and the
// arguments that carry the fires' task codes, run times and attempts
// allowed (and the perRow columns), after the 17 values the fires share
// (app, claim, updated_ms, status, reason, source, attempt, replica,
// scheduled_ms, started_ms, finished_ms, lateness_ms, duration_ms,
// http_status, output, error, next_attempt_ms). The shared columns (a
// sharded fire's shards, a manual run's params and note) come after them
// in the arguments; the columns of neither list keep their defaults.
func insertFiresSQL(dialect string, codes []string, runTimes, attempts []int64, perRow []rowColumn, shared []sharedColumn) (string, []any, error) {
	columns := `INSERT INTO xtimer_executions (app, claim, updated_ms, status, reason, source, attempt, replica,
		scheduled_ms, started_ms, finished_ms, lateness_ms, duration_ms, http_status, output, error, next_attempt_ms,
		task_code, run_time, max_attempts`
	for _, c := range perRow {
		columns += ", " + c.name
	}
	for _, c := range shared {
		columns += ", " + c.name
	}
	columns += ") "
	switch dialect {
	case "postgres":
		pick := `SELECT $1::text, $2::text, $3::bigint, $4::text, $5::text, $6::text, $7::bigint, $8::text,
			$9::bigint, $10::bigint, $11::bigint, $12::bigint, $13::bigint, $14::bigint, $15::text, $16::text, $17::bigint,
			f.code, f.run_time, f.max_attempts`
		arrays, names, source := "$18::text[], $19::bigint[], $20::bigint[]", "code, run_time, max_attempts", []any{codes, runTimes, attempts}
		for _, c := range perRow {
			source = append(source, c.values)
			arrays += fmt.Sprintf(", $%d::bigint[]", 17+len(source))
			names += ", " + c.name
			pick += ", f." + c.name
		}
		for _, c := range shared {
			source = append(source, c.value)
			pick += fmt.Sprintf(", $%d::%s", 17+len(source), c.pgType)
		}
		return columns + pick + `
			FROM unnest(` + arrays + `) AS f(` + names + `) ON CONFLICT DO NOTHING`, source, nil
	}
	doc, err := jsonFires(codes, runTimes, attempts, perRow)
	if err != nil {
		return "", nil, err
	}
	// The shared values come between the 17 and the document, in the
	// order of their placeholders.
	pickShared, source := "", []any{}
	for _, c := range shared {
		pickShared += ", ?"
		source = append(source, c.value)
	}
	source = append(source, doc)
	const common = `SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, `
	if dialect == "mysql" {
		cols, pick := "code VARCHAR(128) PATH '$[0]', run_time BIGINT PATH '$[1]', max_attempts BIGINT PATH '$[2]'", "f.code, f.run_time, f.max_attempts"
		for i, c := range perRow {
			cols += fmt.Sprintf(", %s BIGINT PATH '$[%d]'", c.name, 3+i)
			pick += ", f." + c.name
		}
		return columns + common + pick + pickShared + `
			FROM JSON_TABLE(?, '$[*]' COLUMNS (` + cols + `)) AS f
			ON DUPLICATE KEY UPDATE claim = xtimer_executions.claim`, source, nil
	}
	// SQLite: "WHERE true" tells its parser that ON starts the upsert, not
	// a join's constraint.
	pick := `json_extract(f.value, '$[0]'), json_extract(f.value, '$[1]'), json_extract(f.value, '$[2]')`
	for i := range perRow {
		pick += fmt.Sprintf(", json_extract(f.value, '$[%d]')", 3+i)
	}
	return columns + common + pick + pickShared + `
		FROM json_each(?) AS f WHERE true ON CONFLICT DO NOTHING`, source, nil
}

// jsonFires is a JSON array of [code, run time, attempts allowed]
// triples, each followed by the fire's values of the perRow columns.
func jsonFires(codes []string, runTimes, attempts []int64, perRow []rowColumn) (string, error) {
	var b strings.Builder
	b.Grow(len(codes) * 40)
	b.WriteByte('[')
	for i, code := range codes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		if err := writeJSONString(&b, code); err != nil {
			return "", fmt.Errorf("store: encode task code %q: %w", code, err)
		}
		b.WriteByte(',')
		appendInt(&b, runTimes[i])
		b.WriteByte(',')
		appendInt(&b, attempts[i])
		for _, c := range perRow {
			b.WriteByte(',')
			appendInt(&b, c.values[i])
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String(), nil
}

// fireRows validates fires and returns them with defaults applied, the
// claim set, duplicates dropped (the first row of a key kept), sorted by
// key so that concurrent callers lock index entries in the same order.
func (s *Store) fireRows(fires []Execution, claim string) ([]Execution, error) {
	now := s.nowMs()
	app := fires[0].App
	rows := make([]Execution, 0, len(fires))
	for i, f := range fires {
		switch {
		case f.App != app:
			return nil, fmt.Errorf("store: insert fires: row %d app %q differs from row 0 app %q", i, f.App, app)
		case f.App == "" || len(f.App) > 64:
			return nil, fmt.Errorf("store: insert fires: row %d app %q: want 1 to 64 bytes", i, f.App)
		case f.TaskCode == "" || len(f.TaskCode) > 128:
			return nil, fmt.Errorf("store: insert fires: row %d task_code %q: want 1 to 128 bytes", i, f.TaskCode)
		case f.Status != "" && f.Status != StatusScheduled && f.Status != StatusSkipped:
			return nil, fmt.Errorf("store: insert fires: row %d (%s at %d) status %q: want %q or %q",
				i, f.TaskCode, f.RunTime, f.Status, StatusScheduled, StatusSkipped)
		case f.Source != "" && f.Source != SourceSchedule && f.Source != SourceManual &&
			f.Source != SourceRetry && f.Source != SourceCatchup && f.Source != SourceBackfill:
			return nil, fmt.Errorf("store: insert fires: row %d (%s at %d) source %q: want schedule, manual, retry, catchup or backfill",
				i, f.TaskCode, f.RunTime, f.Source)
		case len(f.Replica) > 128:
			return nil, fmt.Errorf("store: insert fires: row %d replica %q: want at most 128 bytes", i, f.Replica)
		case len(f.Reason) > 64:
			return nil, fmt.Errorf("store: insert fires: row %d reason %q: want at most 64 bytes", i, f.Reason)
		case len(f.Note) > MaxNoteBytes:
			return nil, fmt.Errorf("store: insert fires: row %d (%s at %d) note of %d bytes: want at most %d",
				i, f.TaskCode, f.RunTime, len(f.Note), MaxNoteBytes)
		case f.PlannedMs != 0 && f.PlannedMs < f.RunTime:
			return nil, fmt.Errorf("store: insert fires: row %d (%s at %d) planned_ms %d: want 0 or at least the run time",
				i, f.TaskCode, f.RunTime, f.PlannedMs)
		case f.Shards < 0 || f.Shard < 0 || (f.Shards > 0 && f.Shard >= f.Shards) || (f.Shards == 0 && f.Shard != 0):
			return nil, fmt.Errorf("store: insert fires: row %d (%s at %d) shard %d of %d: want 0 <= shard < shards, or both 0",
				i, f.TaskCode, f.RunTime, f.Shard, f.Shards)
		}
		f.ID, f.Claim, f.UpdatedMs = 0, claim, now
		f.Status = cmp.Or(f.Status, StatusScheduled)
		f.Source = cmp.Or(f.Source, SourceSchedule)
		f.MaxAttempts = max(f.MaxAttempts, 1)
		f.ScheduledMs = cmp.Or(f.ScheduledMs, now)
		if f.Status == StatusSkipped {
			f.FinishedMs = cmp.Or(f.FinishedMs, now)
		}
		f.Output, f.Error = cleanText(f.Output), cleanText(f.Error)
		rows = append(rows, f)
	}
	// Sorted stably, a key's first row comes first among its own, and is
	// the one kept.
	slices.SortStableFunc(rows, compareFires)
	return slices.CompactFunc(rows, func(a, b Execution) bool { return compareFires(a, b) == 0 }), nil
}

func compareFires(a, b Execution) int {
	return cmp.Or(cmp.Compare(a.TaskCode, b.TaskCode), cmp.Compare(a.RunTime, b.RunTime), cmp.Compare(a.Shard, b.Shard))
}

// StartAttempt moves an execution from scheduled or retrying to running
// under attempt number attempt (1 for the first attempt, n+1 after attempt
// n failed), recording replica, the start and the lateness. It is
// conditional on the row still being startable at attempt-1, so of several
// replicas racing for the same fire or retry exactly one gets true; the
// others get false and must not run the handler.
func (s *Store) StartAttempt(ctx context.Context, id int64, attempt int, replica string, startedMs int64) (bool, error) {
	if attempt < 1 {
		return false, fmt.Errorf("store: start execution %d: attempt %d: want 1 or more", id, attempt)
	}
	if replica == "" || len(replica) > 128 {
		return false, fmt.Errorf("store: start execution %d: replica %q: want 1 to 128 bytes", id, replica)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	// lateness_ms comes first: MySQL evaluates assignments left to right
	// and would otherwise see the new status.
	res := s.db.WithContext(ctx).Exec(`UPDATE xtimer_executions SET
		lateness_ms = ? - (CASE WHEN status = ? THEN next_attempt_ms ELSE run_time END),
		status = ?, attempt = ?, replica = ?, started_ms = ?, finished_ms = 0, duration_ms = 0, updated_ms = ?
		WHERE id = ? AND attempt = ? AND status IN (?, ?)`,
		startedMs, StatusRetrying,
		StatusRunning, attempt, replica, startedMs, s.nowMs(),
		id, attempt-1, StatusScheduled, StatusRetrying)
	if res.Error != nil {
		return false, fmt.Errorf("store: start execution %d attempt %d: %w", id, attempt, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// FinishAttempt records how attempt number attempt of an execution ended.
// It is conditional on the row still running that attempt: a late result
// of an attempt already settled (timed out, rescued as replica lost) is
// ignored and false is returned.
func (s *Store) FinishAttempt(ctx context.Context, id int64, attempt int, r Result) (bool, error) {
	oks, err := s.FinishAttempts(ctx, []Finish{{ID: id, Attempt: attempt, Result: r}})
	if err != nil {
		return false, err
	}
	return oks[0], nil
}

// FinishAttempts is FinishAttempt for many attempts in one transaction, so
// that status updates can be batched off the hot path. oks[i] tells
// whether finishes[i] was recorded. Nothing is recorded if any item is
// invalid.
func (s *Store) FinishAttempts(ctx context.Context, finishes []Finish) (oks []bool, err error) {
	rows := make([]rowUpdate, len(finishes))
	now := s.nowMs()
	for i, f := range finishes {
		rows[i].id = f.ID
		rows[i].match.num(colAttempt, int64(f.Attempt))
		if err = finishSet(&rows[i].set, f, now); err != nil {
			return nil, err
		}
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	// updateRows updates in id order, which makes concurrent batches lock
	// rows in the same order and keeps InnoDB from deadlocking them.
	err = s.rowTx(ctx, func(tx *gorm.DB) error {
		done, updateErr := s.updateRows(tx, "status = ?", []any{StatusRunning}, rows)
		if updateErr != nil {
			return fmt.Errorf("store: finish %d attempts: %w", len(finishes), updateErr)
		}
		oks = markDone(finishes, func(f Finish) int64 { return f.ID }, done)
		if recordErr := s.recordAttempts(tx, finishes, oks); recordErr != nil {
			return fmt.Errorf("store: finish %d attempts: %w", len(finishes), recordErr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return oks, nil
}

// finishSet sets in v the columns that record how attempt f ended, at
// nowMs.
func finishSet(v *rowValues, f Finish, nowMs int64) error {
	switch f.Status {
	case StatusSucceeded, StatusFailed, StatusTimedOut:
		f.NextAttemptMs = 0
	case StatusRetrying:
		if f.NextAttemptMs <= 0 {
			return fmt.Errorf("store: finish execution %d attempt %d: status retrying needs next_attempt_ms, got %d",
				f.ID, f.Attempt, f.NextAttemptMs)
		}
	default:
		return fmt.Errorf("store: finish execution %d attempt %d: status %q: want succeeded, failed, timed_out or retrying",
			f.ID, f.Attempt, f.Status)
	}
	if len(f.Reason) > 64 {
		return fmt.Errorf("store: finish execution %d: reason %q: want at most 64 bytes", f.ID, f.Reason)
	}
	if f.StartedMs < 0 || f.StartedMs > f.FinishedMs {
		return fmt.Errorf("store: finish execution %d attempt %d: started_ms %d: want 0 or at most finished_ms %d",
			f.ID, f.Attempt, f.StartedMs, f.FinishedMs)
	}
	v.text(colStatus, f.Status)
	v.text(colReason, f.Reason)
	v.num(colHTTPStatus, int64(f.HTTPStatus))
	v.text(colOutput, cleanText(f.Output))
	v.text(colError, cleanText(f.Error))
	v.num(colFinishedMs, f.FinishedMs)
	v.minusStarted(colDurationMs, f.FinishedMs)
	v.num(colNextAttemptMs, f.NextAttemptMs)
	v.num(colUpdatedMs, nowMs)
	if f.StartedMs > 0 {
		// Plain values, not relative to other columns: MySQL evaluates
		// assignments left to right and would see the new ones.
		v.num(colStartedMs, f.StartedMs)
		v.num(colLatenessMs, f.LatenessMs)
		v.num(colDurationMs, f.FinishedMs-f.StartedMs)
	}
	return nil
}

// SkipExecution settles a fire that has not started, scheduled or
// retrying at attempt number attempt (0 before the first start), as
// skipped with reason (ReasonPaused, ReasonOverlap, ReasonMisfire...).
// Like StartAttempt it is conditional, and returns false if the row moved on.
func (s *Store) SkipExecution(ctx context.Context, id int64, attempt int, reason string, atMs int64) (bool, error) {
	if reason == "" || len(reason) > 64 {
		return false, fmt.Errorf("store: skip execution %d: reason %q: want 1 to 64 bytes", id, reason)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	res := s.db.WithContext(ctx).Model(&Execution{}).
		Where("id = ? AND attempt = ? AND status IN ?", id, attempt, []string{StatusScheduled, StatusRetrying}).
		UpdateColumns(map[string]any{"status": StatusSkipped, "reason": reason, "finished_ms": atMs, "updated_ms": s.nowMs()})
	if res.Error != nil {
		return false, fmt.Errorf("store: skip execution %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Execution returns one execution by ID, or an error wrapping ErrNotFound.
func (s *Store) Execution(ctx context.Context, id int64) (Execution, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var e Execution
	found, err := takeOne(s.db.WithContext(ctx).Where("id = ?", id), &e)
	if err != nil {
		return Execution{}, fmt.Errorf("store: read execution %d: %w", id, err)
	}
	if !found {
		return Execution{}, notFound("execution %d", id)
	}
	return e, nil
}

// DueRetries returns up to limit executions of app waiting to retry whose
// next attempt is due at nowMs, the most overdue first. Reading them claims
// nothing: the caller starts each with StartAttempt(id, Attempt+1, ...).
func (s *Store) DueRetries(ctx context.Context, app string, nowMs int64, limit int) ([]Execution, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []Execution
	err := s.db.WithContext(ctx).
		Where("app = ? AND "+retryingRows+" AND next_attempt_ms <= ?", app, nowMs).
		Order("next_attempt_ms, id").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("store: read due retries of app %q: %w", app, err)
	}
	return out, nil
}

// LostExecutions returns up to limit running executions of app whose
// replica is not in live, the oldest start first. Reading them settles
// nothing: the caller applies the retry policy with FinishAttempt(s) and
// Reason ReasonReplicaLost, which is conditional on (status running, the
// same attempt), so a replica that was only slow and finishes in between,
// or another rescuer, cannot be overwritten.
func (s *Store) LostExecutions(ctx context.Context, app string, live []string, limit int) ([]Execution, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.db.WithContext(ctx).Where("app = ? AND status = ?", app, StatusRunning)
	if len(live) > 0 {
		q = q.Where("replica NOT IN ?", live)
	}
	var out []Execution
	if err := q.Order("started_ms, id").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("store: read lost executions of app %q: %w", app, err)
	}
	return out, nil
}

// RunningCount returns how many executions of one task are running
// anywhere in the fleet, for the overlap policy. Backfilled fires run
// beside the task's scheduled ones and are not counted (BackfillState).
func (s *Store) RunningCount(ctx context.Context, app, code string, runTime int64) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var n int64
	err := s.db.WithContext(ctx).Model(&Execution{}).
		Where("app = ? AND task_code = ? AND (status = ? OR status = ? AND started_ms > 0) AND source <> ? AND run_time <> ?",
			app, code, StatusRunning, StatusScheduled, SourceBackfill, runTime).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("store: count running executions of task %q: %w", code, err)
	}
	return n, nil
}

// Overlap is what a fire of a task that buffers or cancels overlapping
// fires checks before it starts (OverlapState).
type Overlap struct {
	// Going counts the task's runs not final yet: running, started, or
	// waiting for a retry; but for those asked to stop at or before
	// OverlapState's graceFrom whose replica has heart-beaten since.
	Going int64
	// Waiting counts the task's fires due before the checked one that
	// have not started: buffered fires ahead of it in the queue.
	Waiting int64
}

// OverlapState counts, anywhere in the fleet, the runs of task code that
// are going and the fires due before runTime that wait to start, leaving
// the fire with ID self out of both, and the other shards of its fire
// (same run time): a sharded fire's shards run together. A run asked to
// stop at or before graceFrom (Unix ms; negative: none) does not count as
// going if its replica has heart-beaten since the request: that replica
// runs, had the time to stop it, and its handler ignores its context. A
// run whose replica has not (frozen, cut off or killed since) counts
// until its row is settled, by that replica or as lost: a frozen process
// resumes its handler when it wakes. Backfilled fires are left out: they
// wait only for each other (BackfillState).
func (s *Store) OverlapState(ctx context.Context, app, code string, runTime, self, graceFrom int64) (Overlap, error) {
	return s.overlapState(ctx, app, code, runTime, self, graceFrom, "<>")
}

// overlapState is OverlapState over the task's backfilled fires (sourceOp
// "=") or its other fires ("<>").
func (s *Store) overlapState(ctx context.Context, app, code string, runTime, self, graceFrom int64, sourceOp string) (Overlap, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var o Overlap
	err := s.db.WithContext(ctx).Raw(`SELECT
		COALESCE(SUM(CASE WHEN (status <> ? OR started_ms > 0) AND (cancel_ms = 0 OR cancel_ms > ? OR NOT EXISTS (
			SELECT 1 FROM xtimer_replicas r WHERE r.app = e.app AND r.id = e.replica AND r.heartbeat_ms > e.cancel_ms))
			THEN 1 ELSE 0 END), 0) AS going,
		COALESCE(SUM(CASE WHEN status = ? AND started_ms = 0 AND run_time < ? THEN 1 ELSE 0 END), 0) AS waiting
		FROM xtimer_executions e WHERE app = ? AND task_code = ? AND status IN ? AND id <> ? AND run_time <> ? AND source `+sourceOp+` ?`,
		StatusScheduled, graceFrom, StatusScheduled, runTime, app, code,
		[]string{StatusScheduled, StatusRunning, StatusRetrying}, self, runTime, SourceBackfill).Scan(&o).Error
	if err != nil {
		return Overlap{}, fmt.Errorf("store: overlap state of task %q: %w", code, err)
	}
	return o, nil
}

// RequestCancel asks every earlier run of task code that goes (run time
// before runTime), but the fire with ID self, to stop, at now (Unix ms): a
// started or running one is marked (cancel_ms), for its replica to cancel
// the attempt (CancelRequested); one waiting for a retry has no attempt to
// stop and ends failed at once, reason ReasonCancelled. It returns how
// many runs it asked or ended. Backfilled fires are never asked. A later
// run is never asked: a stale fire (armed on a replica that was cut off
// while its row was taken over and run elsewhere) must not stop the run
// that came after it.
func (s *Store) RequestCancel(ctx context.Context, app, code string, self, runTime, now int64) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var n int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The other shards of the fire (same run time) are not earlier runs.
		marked := tx.Model(&Execution{}).
			Where("app = ? AND task_code = ? AND id <> ? AND run_time < ? AND cancel_ms = 0 AND (status = ? OR status = ? AND started_ms > 0) AND source <> ?",
				app, code, self, runTime, StatusRunning, StatusScheduled, SourceBackfill).
			Updates(map[string]any{"cancel_ms": now, "updated_ms": now})
		if marked.Error != nil {
			return marked.Error
		}
		waiting := "app = ? AND task_code = ? AND id <> ? AND run_time < ? AND status = ? AND source <> ?"
		var retried []int64 // retried by hand: final again, they count in their days' roll-ups
		if err := tx.Model(&Execution{}).Where(waiting+" AND reason = ?", app, code, self, runTime, StatusRetrying, SourceBackfill, ReasonRetried).
			Pluck("id", &retried).Error; err != nil {
			return err
		}
		ended := tx.Model(&Execution{}).
			Where(waiting, app, code, self, runTime, StatusRetrying, SourceBackfill).
			Updates(map[string]any{"status": StatusFailed, "reason": ReasonCancelled, "cancel_ms": now,
				"finished_ms": now, "next_attempt_ms": 0, "updated_ms": now})
		n = marked.RowsAffected + ended.RowsAffected
		if ended.Error != nil {
			return ended.Error
		}
		return s.countRetried(tx, retried)
	})
	if err != nil {
		return 0, fmt.Errorf("store: cancel the runs of task %q: %w", code, err)
	}
	return n, nil
}

// CancelRequested returns which of the executions ids a later fire asked
// to stop (RequestCancel) while they are not final.
func (s *Store) CancelRequested(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []int64
	err := s.db.WithContext(ctx).Model(&Execution{}).
		Where("id IN ? AND cancel_ms > 0 AND status IN ?", ids, []string{StatusScheduled, StatusRunning}).
		Pluck("id", &out).Error
	if err != nil {
		return nil, fmt.Errorf("store: read cancel requests: %w", err)
	}
	return out, nil
}

// RecentRunTime returns the mean run time of the last n attempts of app
// that ended (succeeded or failed, by id), and how many it found: what a
// replica that has just started can expect of its handlers until it has
// run some. Durations are whole milliseconds: a mean below one is
// returned as it is, 0 when every attempt took under a millisecond.
func (s *Store) RecentRunTime(ctx context.Context, app string, n int) (time.Duration, int, error) {
	if n < 1 {
		return 0, 0, fmt.Errorf("store: recent run time of app %q: n %d: want at least 1", app, n)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out struct {
		Total int64
		Count int
	}
	err := s.db.WithContext(ctx).Raw(`SELECT COALESCE(SUM(duration_ms), 0) AS total, COUNT(*) AS count FROM
		(SELECT duration_ms FROM xtimer_executions WHERE app = ? AND status IN ? ORDER BY id DESC LIMIT ?) recent`,
		app, []string{StatusSucceeded, StatusFailed}, n).Scan(&out).Error
	if err != nil {
		return 0, 0, fmt.Errorf("store: recent run time of app %q: %w", app, err)
	}
	if out.Count == 0 {
		return 0, 0, nil
	}
	return time.Duration(out.Total) * time.Millisecond / time.Duration(out.Count), out.Count, nil
}
