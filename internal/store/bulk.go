package store

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// rowUpdate is one execution row's part of a bulk update: the row with
// this id gets the values in set, if it still has those in match.
// Values are plain values or gorm.Expr on the row's old columns.
type rowUpdate struct {
	id    int64
	match map[string]any
	set   map[string]any
}

// Bounds of one bulk statement: placeholders (PostgreSQL and MySQL refuse
// more than 65,535) and bytes of text values (MariaDB's default
// max_allowed_packet is 16 MiB; an output may be 64 KiB).
const (
	bulkMaxVars  = 30000
	bulkMaxBytes = 4 << 20
)

// caseMaxRows bounds the rows of one statement on MySQL, MariaDB and
// SQLite, where a value that differs from row to row is a CASE on the id:
// each row's CASE compares its id with the statement's ids one by one, so
// a statement's cost grows with the square of its rows. (PostgreSQL joins
// arrays of values instead: updateJoined.)
const caseMaxRows = 200

// updateRows applies many rowUpdates with a few statements instead of one
// each: a batch of quick fires started and ended in the same 50 ms is one
// UPDATE, not hundreds of round trips that load the database and delay
// the next claim. Rows are grouped by the columns they match and set;
// each group becomes one statement per chunk,
//
//	UPDATE xtimer_executions SET c = CASE id WHEN ? THEN ? ... END, ...
//	WHERE id IN (...) AND <where> AND m = CASE id WHEN ? THEN ? ... END ...
//
// where a column with the same value for the whole chunk is written once
// (c = ?); on PostgreSQL the other values go as arrays joined on the id
// instead (updateJoined). Columns are assigned in name order, as gorm's UpdateColumns
// does with a map: MySQL evaluates assignments left to right. where (with
// vars) is the condition every row must meet. It returns the ids of the
// rows it updated; run it in a transaction.
func (s *Store) updateRows(tx *gorm.DB, where string, vars []any, rows []rowUpdate) ([]int64, error) {
	shapes := map[string]int{} // a shape's index in groups
	var groups [][]rowUpdate
	var key []byte
	for _, r := range rows {
		key = appendShape(append(appendShape(key[:0], r.match), '|'), r.set)
		i, ok := shapes[string(key)] // no copy of key to look it up
		if !ok {
			i = len(groups)
			shapes[string(key)] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	var done []int64
	for _, g := range groups {
		slices.SortFunc(g, func(a, b rowUpdate) int { return cmp.Compare(a.id, b.id) })
		perRow := 2*(len(g[0].match)+len(g[0].set)) + 1
		// PostgreSQL gets a column's values as one array: the rows do not
		// add placeholders there.
		maxRows := len(g)
		if tx.Dialector.Name() != "postgres" {
			maxRows = min(bulkMaxVars/perRow, caseMaxRows)
		}
		for from := 0; from < len(g); {
			to, size := from, 0
			for to < len(g) && to-from < maxRows && (to == from || size+textBytes(g[to]) <= bulkMaxBytes) {
				size += textBytes(g[to])
				to++
			}
			ids, err := s.updateChunk(tx, where, vars, g[from:to])
			if err != nil {
				return done, err
			}
			done = append(done, ids...)
			from = to
		}
	}
	return done, nil
}

// appendShape appends to b the columns of values, in order, each with the
// SQL of its expression if it is one: rows of one shape are one statement.
func appendShape(b []byte, values map[string]any) []byte {
	var names [16]string // a row's columns, on the stack
	cols := names[:0]
	for c := range values {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	for _, c := range cols {
		b = append(b, c...)
		if e, ok := values[c].(clause.Expr); ok {
			b = append(append(b, '='), e.SQL...)
		}
		b = append(b, ',')
	}
	return b
}

func textBytes(r rowUpdate) int {
	n := 0
	for _, v := range r.set {
		if s, ok := v.(string); ok {
			n += len(s)
		}
	}
	return n
}

// updateChunk is one statement of updateRows: rows share their columns.
func (s *Store) updateChunk(tx *gorm.DB, where string, vars []any, rows []rowUpdate) ([]int64, error) {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	if tx.Dialector.Name() == "postgres" {
		return updateJoined(tx, where, vars, rows, ids)
	}
	// byRow renders column c of every row: one value when they agree,
	// otherwise a CASE on the id.
	byRow := func(c string, of func(rowUpdate) map[string]any, sql *strings.Builder, args *[]any) {
		if first, same := sharedValue(rows, c, of); same {
			appendValue(sql, args, first, false)
			return
		}
		sql.WriteString("CASE id")
		for _, r := range rows {
			sql.WriteString(" WHEN ? THEN ")
			*args = append(*args, r.id)
			appendValue(sql, args, of(r)[c], false)
		}
		sql.WriteString(" END")
	}
	var cond strings.Builder
	var condArgs []any
	cond.WriteString("id IN ? AND (" + where + ")")
	condArgs = append(condArgs, ids)
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
	err = tx.Exec("UPDATE xtimer_executions SET "+set+" WHERE id IN ?", append(setArgs, got)...).Error
	return got, err
}

// columnSQL renders column c of every row of a statement, the values
// from of, into sql and args.
type columnSQL func(c string, of func(rowUpdate) map[string]any, sql *strings.Builder, args *[]any)

// assignments is the SET list of a statement: every column rows set, in
// name order.
func assignments(rows []rowUpdate, byRow columnSQL) (string, []any) {
	var set strings.Builder
	var args []any
	for i, c := range slices.Sorted(maps.Keys(rows[0].set)) {
		if i > 0 {
			set.WriteString(", ")
		}
		set.WriteString(c + " = ")
		byRow(c, setOf, &set, &args)
	}
	return set.String(), args
}

// matches appends to a statement's conditions one per column rows match,
// in name order.
func matches(rows []rowUpdate, byRow columnSQL, cond *strings.Builder, args *[]any) {
	for _, c := range slices.Sorted(maps.Keys(rows[0].match)) {
		cond.WriteString(" AND " + c + " = ")
		byRow(c, matchOf, cond, args)
	}
}

func matchOf(r rowUpdate) map[string]any { return r.match }
func setOf(r rowUpdate) map[string]any   { return r.set }

// sharedValue returns column c's value when every row has the same one.
func sharedValue(rows []rowUpdate, c string, of func(rowUpdate) map[string]any) (any, bool) {
	first := of(rows[0])[c]
	for _, r := range rows[1:] {
		if !sameValue(of(r)[c], first) {
			return nil, false
		}
	}
	return first, true
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
// one statement whatever its size. An expression (gorm.Expr), the same
// SQL on every row of a shape (appendShape), gets its placeholders' values as
// columns too. Values of other types than integers and strings are
// refused.
func updateJoined(tx *gorm.DB, where string, vars []any, rows []rowUpdate, ids []int64) ([]int64, error) {
	idArray := pgBigints(ids)
	arrays := []any{idArray}
	casts := []string{"?::bigint[]"}
	names := []string{"vid"}
	// column adds the values of one placeholder of column c, row by row,
	// as an array, and returns the name it has in v.
	column := func(values []any) (string, bool) {
		array, cast, ok := pgArray(values)
		if !ok {
			return "", false
		}
		arrays, casts = append(arrays, array), append(casts, cast)
		names = append(names, fmt.Sprintf("c%d", len(names)))
		return "v." + names[len(names)-1], true
	}
	var bad []string // columns whose values cannot go as an array
	byRow := func(c string, of func(rowUpdate) map[string]any, sql *strings.Builder, args *[]any) {
		if first, same := sharedValue(rows, c, of); same {
			appendValue(sql, args, first, true)
			return
		}
		if e, ok := of(rows[0])[c].(clause.Expr); ok {
			joined, ok := joinedExpr(rows, c, of, e, column)
			if !ok {
				bad = append(bad, c)
			}
			sql.WriteString(joined)
			return
		}
		values := make([]any, len(rows))
		for i, r := range rows {
			values[i] = of(r)[c]
		}
		name, ok := column(values)
		if !ok {
			bad = append(bad, c)
		}
		sql.WriteString(name)
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
	if len(bad) > 0 {
		return nil, fmt.Errorf("bulk update of %d rows: columns %v: want integers or strings row by row", len(rows), bad)
	}
	args := append(setArgs, arrays...)
	args = append(args, condArgs...)
	return scanIDs(tx, "UPDATE xtimer_executions SET "+set+
		" FROM unnest("+strings.Join(casts, ", ")+") AS v("+strings.Join(names, ", ")+")"+
		" WHERE "+cond.String()+" RETURNING xtimer_executions.id", args...)
}

// joinedExpr renders column c of rows when every row's value is an
// expression with e's SQL: each placeholder becomes a column of v.
func joinedExpr(rows []rowUpdate, c string, of func(rowUpdate) map[string]any, e clause.Expr,
	column func([]any) (string, bool),
) (string, bool) {
	for _, r := range rows {
		x, ok := of(r)[c].(clause.Expr)
		if !ok || x.SQL != e.SQL || len(x.Vars) != len(e.Vars) {
			return "", false
		}
	}
	parts := strings.Split(e.SQL, "?")
	if len(parts) != len(e.Vars)+1 {
		return "", false
	}
	var b strings.Builder
	b.WriteString("(" + parts[0])
	for j := range e.Vars {
		values := make([]any, len(rows))
		for i, r := range rows {
			values[i] = of(r)[c].(clause.Expr).Vars[j]
		}
		name, ok := column(values)
		if !ok {
			return "", false
		}
		b.WriteString(name + parts[j+1])
	}
	return b.String() + ")", true
}

// pgArray is values as one PostgreSQL array literal and its placeholder's
// cast, when they are all integers or all strings.
func pgArray(values []any) (array, cast string, ok bool) {
	ints, texts := make([]int64, 0, len(values)), make([]string, 0, len(values))
	for _, v := range values {
		switch v := v.(type) {
		case int:
			ints = append(ints, int64(v))
		case int64:
			ints = append(ints, v)
		case string:
			texts = append(texts, v)
		default:
			return "", "", false
		}
	}
	switch len(values) {
	case len(ints):
		return pgBigints(ints), "?::bigint[]", true
	case len(texts):
		return pgTexts(texts), "?::text[]", true
	}
	return "", "", false
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

// appendValue writes one value: a placeholder, with a cast on PostgreSQL
// for integers (a CASE of untyped parameters is text there), or a
// gorm.Expr as it is.
func appendValue(sql *strings.Builder, args *[]any, v any, pg bool) {
	switch v := v.(type) {
	case clause.Expr:
		sql.WriteString("(" + v.SQL + ")")
		*args = append(*args, v.Vars...)
	case int, int64:
		if pg {
			sql.WriteString("CAST(? AS BIGINT)")
		} else {
			sql.WriteString("?")
		}
		*args = append(*args, v)
	default:
		sql.WriteString("?")
		*args = append(*args, v)
	}
}

func sameValue(a, b any) bool {
	ea, aExpr := a.(clause.Expr)
	eb, bExpr := b.(clause.Expr)
	if aExpr || bExpr {
		return aExpr && bExpr && ea.SQL == eb.SQL && fmt.Sprint(ea.Vars) == fmt.Sprint(eb.Vars)
	}
	return a == b
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
