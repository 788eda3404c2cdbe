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
// (c = ?). Columns are assigned in name order, as gorm's UpdateColumns
// does with a map: MySQL evaluates assignments left to right. where (with
// vars) is the condition every row must meet. It returns the ids of the
// rows it updated; run it in a transaction.
func (s *Store) updateRows(tx *gorm.DB, where string, vars []any, rows []rowUpdate) ([]int64, error) {
	groups := map[string][]rowUpdate{}
	var order []string
	for _, r := range rows {
		k := strings.Join(slices.Sorted(maps.Keys(r.match)), ",") + "|" + strings.Join(slices.Sorted(maps.Keys(r.set)), ",")
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var done []int64
	for _, k := range order {
		g := groups[k]
		slices.SortFunc(g, func(a, b rowUpdate) int { return cmp.Compare(a.id, b.id) })
		perRow := 2*(len(g[0].match)+len(g[0].set)) + 1
		for from := 0; from < len(g); {
			to, size := from, 0
			for to < len(g) && (to-from+1)*perRow <= bulkMaxVars && (to == from || size+textBytes(g[to]) <= bulkMaxBytes) {
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
	pg := tx.Dialector.Name() == "postgres"
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	// byRow renders column c of every row: one value when they agree,
	// otherwise a CASE on the id.
	byRow := func(c string, of func(rowUpdate) map[string]any, sql *strings.Builder, args *[]any) {
		first := of(rows[0])[c]
		same := true
		for _, r := range rows[1:] {
			if !sameValue(of(r)[c], first) {
				same = false
				break
			}
		}
		if same {
			appendValue(sql, args, first, pg)
			return
		}
		sql.WriteString("CASE id")
		for _, r := range rows {
			sql.WriteString(" WHEN ? THEN ")
			*args = append(*args, r.id)
			appendValue(sql, args, of(r)[c], pg)
		}
		sql.WriteString(" END")
	}
	var cond strings.Builder
	var condArgs []any
	cond.WriteString("id IN ? AND (" + where + ")")
	condArgs = append(condArgs, ids)
	condArgs = append(condArgs, vars...)
	for _, c := range slices.Sorted(maps.Keys(rows[0].match)) {
		cond.WriteString(" AND " + c + " = ")
		byRow(c, func(r rowUpdate) map[string]any { return r.match }, &cond, &condArgs)
	}
	var set strings.Builder
	var setArgs []any
	for i, c := range slices.Sorted(maps.Keys(rows[0].set)) {
		if i > 0 {
			set.WriteString(", ")
		}
		set.WriteString(c + " = ")
		byRow(c, func(r rowUpdate) map[string]any { return r.set }, &set, &setArgs)
	}
	if name := tx.Dialector.Name(); name == "postgres" || name == "sqlite" {
		return scanIDs(tx, "UPDATE xtimer_executions SET "+set.String()+" WHERE "+cond.String()+" RETURNING id",
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
	err = tx.Exec("UPDATE xtimer_executions SET "+set.String()+" WHERE id IN ?", append(setArgs, got)...).Error
	return got, err
}

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
