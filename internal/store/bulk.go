package store

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gorm.io/gorm"
)

// column is a column of xtimer_executions that updateRows matches or
// sets. The constants are in name order, the order a statement assigns
// them in, as gorm's UpdateColumns does with a map: MySQL evaluates
// assignments left to right.
type column uint8

const (
	colAttempt column = iota
	colDurationMs
	colError
	colFinishedMs
	colHTTPStatus
	colLatenessMs
	colNextAttemptMs
	colOutput
	colReason
	colReplica
	colStartedMs
	colStatus
	colUpdatedMs
	numColumns
)

// columnNames are the columns' SQL names; columnSlots their place in
// rowValues' nums, or texts for a text column (columnText).
var (
	columnNames = [numColumns]string{"attempt", "duration_ms", "error", "finished_ms", "http_status",
		"lateness_ms", "next_attempt_ms", "output", "reason", "replica", "started_ms", "status", "updated_ms"}
	columnText  = [numColumns]bool{colError: true, colOutput: true, colReason: true, colReplica: true, colStatus: true}
	columnSlots = func() (slots [numColumns]uint8) {
		var nums, texts uint8
		for c := range numColumns {
			if columnText[c] {
				slots[c], texts = texts, texts+1
			} else {
				slots[c], nums = nums, nums+1
			}
		}
		return slots
	}()
)

const (
	numTextColumns = 5
	numIntColumns  = int(numColumns) - numTextColumns
)

// columns is a set of columns, one bit each.
type columns uint16

func (cs columns) has(c column) bool { return cs&(1<<c) != 0 }

// rowValues are one row's values of some columns: an integer or a text,
// by the column, or for an integer column in sinceStart the integer minus
// the row's started_ms as it was before the update. Typed fields, not a
// map of column to value: the status writer builds two of these for every
// fire, and a map of boxed values per row was the largest share of a
// replica's allocations.
type rowValues struct {
	cols       columns
	sinceStart columns
	nums       [numIntColumns]int64
	texts      [numTextColumns]string
}

func (v *rowValues) num(c column, n int64) {
	v.cols |= 1 << c
	v.sinceStart &^= 1 << c
	v.nums[columnSlots[c]] = n
}

// minusStarted sets integer column c to n - started_ms.
func (v *rowValues) minusStarted(c column, n int64) {
	v.num(c, n)
	v.sinceStart |= 1 << c
}

func (v *rowValues) text(c column, s string) {
	v.cols |= 1 << c
	v.texts[columnSlots[c]] = s
}

// same reports whether v and w have the same value in column c.
func (v *rowValues) same(w *rowValues, c column) bool {
	if columnText[c] {
		return v.texts[columnSlots[c]] == w.texts[columnSlots[c]]
	}
	return v.nums[columnSlots[c]] == w.nums[columnSlots[c]] && v.sinceStart.has(c) == w.sinceStart.has(c)
}

// rowUpdate is one execution row's part of a bulk update: the row with
// this id gets the values in set, if it still has those in match.
type rowUpdate struct {
	id    int64
	match rowValues
	set   rowValues
}

// shape is what rows of one statement share: the columns they match and
// set, and which of those are relative to started_ms.
type shape struct{ match, set, sinceStart columns }

func (r *rowUpdate) shape() shape {
	return shape{match: r.match.cols, set: r.set.cols, sinceStart: r.set.sinceStart | r.match.sinceStart}
}

// bulkMaxBytes bounds the bytes of text values of one bulk statement
// (MariaDB's default max_allowed_packet is 16 MiB; an output may be 64
// KiB). Placeholders need no bound of their own (PostgreSQL and MySQL
// refuse more than 65,535): on PostgreSQL a column's values are one
// array, and elsewhere only texts are placeholders, at most one per text
// column a row matches or sets (a CASE's THEN), for caseMaxRows rows.
const bulkMaxBytes = 4 << 20

// caseMaxRows bounds the rows of one statement on MySQL, MariaDB and
// SQLite, where a value that differs from row to row is a CASE on the id:
// each row's CASE compares its id with the statement's ids one by one, so
// a statement's cost grows with the square of its rows. (PostgreSQL joins
// arrays of values instead: updateJoined.)
const caseMaxRows = 200

// updateRows applies many rowUpdates with a few statements instead of one
// each: a batch of quick fires started and ended in the same 50 ms is one
// UPDATE, not hundreds of round trips that load the database and delay
// the next claim. Rows are grouped by shape (the columns they match and
// set); each group becomes one statement per chunk,
//
//	UPDATE xtimer_executions SET c = CASE id WHEN 12 THEN 34 ... END, ...
//	WHERE id IN (12, ...) AND <where> AND m = CASE id WHEN 12 THEN ? ... END ...
//
// (integers as literals, texts as placeholders: appendValue), where a
// column with the same value for the whole chunk is written once
// (c = 34); on PostgreSQL the other values go as arrays joined on the id
// instead (updateJoined). Groups go in the order of their shapes, and
// each group's rows in id order, so concurrent batches lock rows in the
// same order. where (with vars) is the condition every row must meet. It
// returns the ids of the rows it updated; run it in a transaction.
func (s *Store) updateRows(tx *gorm.DB, where string, vars []any, rows []rowUpdate) ([]int64, error) {
	order := make([]*rowUpdate, len(rows))
	for i := range rows {
		order[i] = &rows[i]
	}
	slices.SortFunc(order, func(a, b *rowUpdate) int {
		x, y := a.shape(), b.shape()
		return cmp.Or(cmp.Compare(x.match, y.match), cmp.Compare(x.set, y.set),
			cmp.Compare(x.sinceStart, y.sinceStart), cmp.Compare(a.id, b.id))
	})
	var done []int64
	for len(order) > 0 {
		sh := order[0].shape()
		n := 1
		for n < len(order) && order[n].shape() == sh {
			n++
		}
		group := order[:n]
		order = order[n:]
		// PostgreSQL joins a column's values as one array, whatever the
		// rows; a CASE costs the square of its rows.
		maxRows := len(group)
		if tx.Dialector.Name() != "postgres" {
			maxRows = caseMaxRows
		}
		for from := 0; from < len(group); {
			to, size := from, 0
			for to < len(group) && to-from < maxRows && (to == from || size+textBytes(group[to]) <= bulkMaxBytes) {
				size += textBytes(group[to])
				to++
			}
			ids, err := s.updateChunk(tx, where, vars, group[from:to])
			if err != nil {
				return done, err
			}
			done = append(done, ids...)
			from = to
		}
	}
	return done, nil
}

func textBytes(r *rowUpdate) int {
	n := 0
	for _, t := range r.set.texts {
		n += len(t)
	}
	return n
}

// updateChunk is one statement of updateRows: rows share their shape.
func (s *Store) updateChunk(tx *gorm.DB, where string, vars []any, rows []*rowUpdate) ([]int64, error) {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	if tx.Dialector.Name() == "postgres" {
		return updateJoined(tx, where, vars, rows, ids)
	}
	// byRow renders column c of every row: one value when they agree,
	// otherwise a CASE on the id.
	byRow := func(c column, of valuesOf, sql *strings.Builder, args *[]any) {
		if shared(rows, c, of) {
			appendValue(sql, args, of(rows[0]), c, false)
			return
		}
		sql.WriteString("CASE id")
		for _, r := range rows {
			sql.WriteString(" WHEN ")
			appendInt(sql, r.id)
			sql.WriteString(" THEN ")
			appendValue(sql, args, of(r), c, false)
		}
		sql.WriteString(" END")
	}
	var cond strings.Builder
	var condArgs []any
	cond.WriteString("id IN ")
	appendInts(&cond, ids)
	cond.WriteString(" AND (" + where + ")")
	condArgs = append(condArgs, vars...)
	matches(rows, byRow, &cond, &condArgs)
	set, setArgs := assignments(rows, byRow)
	if tx.Dialector.Name() == "sqlite" {
		return scanIDs(tx, "UPDATE xtimer_executions SET "+set+" WHERE "+cond.String()+" RETURNING id",
			append(setArgs, condArgs...)...)
	}
	// MySQL/MariaDB have no RETURNING: the rows that meet the conditions
	// are read and locked first, so the update changes exactly those.
	got, err := scanIDs(tx, "SELECT id FROM xtimer_executions WHERE "+cond.String()+" ORDER BY id FOR UPDATE", condArgs...)
	if err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, nil
	}
	var in strings.Builder
	appendInts(&in, got)
	err = tx.Exec("UPDATE xtimer_executions SET "+set+" WHERE id IN "+in.String(), setArgs...).Error
	return got, err
}

// valuesOf picks a row's values to match or to set.
type valuesOf func(*rowUpdate) *rowValues

func matchOf(r *rowUpdate) *rowValues { return &r.match }
func setOf(r *rowUpdate) *rowValues   { return &r.set }

// columnSQL renders column c of every row of a statement, the values
// from of, into sql and args.
type columnSQL func(c column, of valuesOf, sql *strings.Builder, args *[]any)

// assignments is the SET list of a statement: every column rows set, in
// name order.
func assignments(rows []*rowUpdate, byRow columnSQL) (string, []any) {
	var set strings.Builder
	var args []any
	for c := range numColumns {
		if !rows[0].set.cols.has(c) {
			continue
		}
		if set.Len() > 0 {
			set.WriteString(", ")
		}
		set.WriteString(columnNames[c] + " = ")
		byRow(c, setOf, &set, &args)
	}
	return set.String(), args
}

// matches appends to a statement's conditions one per column rows match,
// in name order.
func matches(rows []*rowUpdate, byRow columnSQL, cond *strings.Builder, args *[]any) {
	for c := range numColumns {
		if rows[0].match.cols.has(c) {
			cond.WriteString(" AND " + columnNames[c] + " = ")
			byRow(c, matchOf, cond, args)
		}
	}
}

// shared reports whether every row has the same value in column c.
func shared(rows []*rowUpdate, c column, of valuesOf) bool {
	first := of(rows[0])
	for _, r := range rows[1:] {
		if !first.same(of(r), c) {
			return false
		}
	}
	return true
}

// updateJoined is updateChunk on PostgreSQL: the values that differ from
// row to row go as one array per column, unnested beside the ids and
// joined on them,
//
//	UPDATE xtimer_executions SET c = v.c1, d = (v.c2 - started_ms) ...
//	FROM unnest($ids::bigint[], $c1::bigint[], ...) AS v(vid, c1, ...)
//	WHERE xtimer_executions.id = v.vid
//	  AND (v.vid IS NOT NULL AND <where> AND m = v.c3 ...) IS TRUE
//
// so a row costs one lookup, where a CASE on the id compares it with
// every id of the statement (n² comparisons per column), and a batch is
// one statement whatever its size.
func updateJoined(tx *gorm.DB, where string, vars []any, rows []*rowUpdate, ids []int64) ([]int64, error) {
	idArray := pgBigints(ids)
	arrays := []any{idArray}
	casts := []string{"?::bigint[]"}
	names := []string{"vid"}
	byRow := func(c column, of valuesOf, sql *strings.Builder, args *[]any) {
		if shared(rows, c, of) {
			appendValue(sql, args, of(rows[0]), c, true)
			return
		}
		slot := columnSlots[c]
		if columnText[c] {
			texts := make([]string, len(rows))
			for i, r := range rows {
				texts[i] = of(r).texts[slot]
			}
			arrays, casts = append(arrays, pgTexts(texts)), append(casts, "?::text[]")
		} else {
			nums := make([]int64, len(rows))
			for i, r := range rows {
				nums[i] = of(r).nums[slot]
			}
			arrays, casts = append(arrays, pgBigints(nums)), append(casts, "?::bigint[]")
		}
		name := fmt.Sprintf("c%d", len(names))
		names = append(names, name)
		if of(rows[0]).sinceStart.has(c) {
			sql.WriteString("(v." + name + " - started_ms)")
		} else {
			sql.WriteString("v." + name)
		}
	}
	set, setArgs := assignments(rows, byRow)
	// The conditions are one test, (v.vid IS NOT NULL AND ...) IS TRUE:
	// it reads v, so PostgreSQL applies it where the rows meet v's, never
	// while it scans the table. A filter on the scan would be estimated
	// from the statistics, which put a replica's scheduled rows at one
	// when the table grew since it was analyzed (or the replica started
	// since): the plan then drove from that "one row" and scanned v's
	// thousands of IDs once for each row it found, 20 s for 3,000 fires in
	// the throughput benchmark. The table is found by the batch's IDs
	// alone, id = ANY($ids) on the primary key, estimated at their number:
	// joined on v without it, a table that statistics put at a few times
	// the batch was scanned whole into a hash, 0.4-1.4 s a statement on a
	// table of 200,000 rows grown since its last ANALYZE.
	var cond strings.Builder
	condArgs := append([]any{idArray}, vars...)
	cond.WriteString("xtimer_executions.id = ANY(?::bigint[]) AND xtimer_executions.id = v.vid AND (v.vid IS NOT NULL AND (" + where + ")")
	matches(rows, byRow, &cond, &condArgs)
	cond.WriteString(") IS TRUE")
	args := append(setArgs, arrays...)
	args = append(args, condArgs...)
	return scanIDs(tx, "UPDATE xtimer_executions SET "+set+
		" FROM unnest("+strings.Join(casts, ", ")+") AS v("+strings.Join(names, ", ")+")"+
		" WHERE "+cond.String()+" RETURNING xtimer_executions.id", args...)
}

// pgTexts is texts as a PostgreSQL array literal, each element quoted.
func pgTexts(texts []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, t := range texts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(arrayEscaper.Replace(t))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var arrayEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// appendValue writes v's value of column c. A text is a placeholder. On
// PostgreSQL an integer is one too, with a cast (a CASE of untyped
// parameters is text there), or (? - started_ms). Elsewhere an integer
// is written into the SQL as a literal: a statement of 200 rows had
// hundreds of integer arguments, each boxed, then converted by GORM,
// database/sql and the driver in turn, for the status writer's every
// batch. A literal of an int64 is digits and a sign, nothing to escape.
func appendValue(sql *strings.Builder, args *[]any, v *rowValues, c column, pg bool) {
	slot := columnSlots[c]
	switch {
	case columnText[c]:
		sql.WriteString("?")
		*args = append(*args, v.texts[slot])
	case pg && v.sinceStart.has(c):
		sql.WriteString("(? - started_ms)")
		*args = append(*args, v.nums[slot])
	case pg:
		sql.WriteString("CAST(? AS BIGINT)")
		*args = append(*args, v.nums[slot])
	case v.sinceStart.has(c):
		sql.WriteString("(")
		appendInt(sql, v.nums[slot])
		sql.WriteString(" - started_ms)")
	default:
		appendInt(sql, v.nums[slot])
	}
}

// appendInt writes n as an SQL integer literal.
func appendInt(sql *strings.Builder, n int64) {
	var digits [20]byte
	sql.Write(strconv.AppendInt(digits[:0], n, 10))
}

// appendInts writes ids as a parenthesized list of literals, for IN.
func appendInts(sql *strings.Builder, ids []int64) {
	sql.WriteByte('(')
	for i, id := range ids {
		if i > 0 {
			sql.WriteByte(',')
		}
		appendInt(sql, id)
	}
	sql.WriteByte(')')
}

// scanIDs runs a statement that returns one column of ids, and reads them.
// Not Raw(...).Scan: GORM's Scan renders every statement with its
// arguments inlined (logger.ExplainSQL, regular expressions over the SQL)
// for a trace recorder, whatever the logger's level. For these statements
// of up to 1,000 ids that was a visible share of a replica's CPU in the
// steady benchmark, and it sat inside the start claim's round trip.
func scanIDs(tx *gorm.DB, sql string, args ...any) ([]int64, error) {
	rows, err := tx.Raw(sql, args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
