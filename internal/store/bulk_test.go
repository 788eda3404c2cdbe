package store_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// A batch of started fires, some that also ended with their own results,
// is written with one UPDATE (MySQL: one locking read and one UPDATE),
// each row getting its own values; a row whose claim is not the caller's
// any more is left alone and reported. The same holds for FinishAttempts.
func TestStartsAndResultsOfABatchAreOneStatement(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		var fs []store.Execution
		for i := range 5 {
			fs = append(fs, store.Execution{App: b.app, TaskCode: "bulk", RunTime: t0 + int64(i)*1000, Replica: "r1"})
		}
		rows, err := b.store.InsertFires(b.ctx, fs)
		require.NoError(t, err)
		ids := []int64{rows[0].ID, rows[1].ID, rows[2].ID, rows[3].ID, rows[4].ID}
		started, err := b.store.StartFires(b.ctx, b.app, ids, "r1", t0)
		require.NoError(t, err)
		require.Len(t, started, 5)

		rec := &recorder{}
		s := store.New(b.db.Session(&gorm.Session{Logger: rec}), store.WithNow(func() time.Time { return time.UnixMilli(b.clock.Load()) }))
		starts := []store.Start{
			{ID: rows[0].ID, Replica: "r1", StartedMs: rows[0].RunTime},
			{ID: rows[1].ID, Replica: "r1", StartedMs: rows[1].RunTime,
				Finish: &store.Result{Status: store.StatusSucceeded, Output: "one", FinishedMs: rows[1].RunTime + 7}},
			{ID: rows[2].ID, Replica: "r1", StartedMs: rows[2].RunTime,
				Finish: &store.Result{Status: store.StatusFailed, Error: "two", FinishedMs: rows[2].RunTime + 9}},
			{ID: rows[3].ID, Replica: "r1", StartedMs: rows[3].RunTime + 5}, // not what StartFires recorded
			{ID: rows[4].ID, Replica: "r1", StartedMs: rows[4].RunTime,
				Finish: &store.Result{Status: store.StatusSucceeded, StartedMs: rows[4].RunTime + 3, LatenessMs: 3, FinishedMs: rows[4].RunTime + 4}},
		}
		oks, err := s.MarkRunning(b.ctx, starts)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, true, false, true}, oks)
		require.Equal(t, 3, updates(rec.statements()), "one statement per shape of row: plain start, start and end, start and end with its own start")

		want := []struct {
			status, output, error string
			started, duration     int64
		}{
			{store.StatusRunning, "", "", rows[0].RunTime, 0},
			{store.StatusSucceeded, "one", "", rows[1].RunTime, 7},
			{store.StatusFailed, "", "two", rows[2].RunTime, 9},
			{store.StatusScheduled, "", "", rows[3].RunTime, 0},
			{store.StatusSucceeded, "", "", rows[4].RunTime + 3, 1},
		}
		for i, w := range want {
			e, readErr := b.store.Execution(b.ctx, rows[i].ID)
			require.NoError(t, readErr)
			require.Equal(t, w.status, e.Status, "row %d", i)
			require.Equal(t, w.output, e.Output, "row %d", i)
			require.Equal(t, w.error, e.Error, "row %d", i)
			require.Equal(t, w.started, e.StartedMs, "row %d", i)
			require.Equal(t, w.duration, e.DurationMs, "row %d", i)
		}

		rec2 := &recorder{}
		s = store.New(b.db.Session(&gorm.Session{Logger: rec2}), store.WithNow(func() time.Time { return time.UnixMilli(b.clock.Load()) }))
		oks, err = s.FinishAttempts(b.ctx, []store.Finish{
			{ID: rows[0].ID, Attempt: 1, Result: store.Result{Status: store.StatusSucceeded, Output: "late", FinishedMs: rows[0].RunTime + 20}},
			{ID: rows[1].ID, Attempt: 1, Result: store.Result{Status: store.StatusSucceeded, FinishedMs: rows[1].RunTime + 30}}, // already ended
		})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, oks)
		require.Equal(t, 1, updates(rec2.statements()))
		e, err := b.store.Execution(b.ctx, rows[0].ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusSucceeded, e.Status)
		require.Equal(t, "late", e.Output)
		require.Equal(t, int64(20), e.DurationMs, "duration from the start the row holds")
		e, err = b.store.Execution(b.ctx, rows[1].ID)
		require.NoError(t, err)
		require.Equal(t, "one", e.Output, "a settled attempt keeps its result")
	})
}

// A batch larger than one statement (MySQL, MariaDB and SQLite: 200 rows
// a CASE; PostgreSQL: every row in one statement, its values as arrays)
// gives every row its own values, texts of any shape included, both when
// the start and result go together (MarkRunning) and when the result
// comes alone, its duration computed from the start the row holds
// (FinishAttempts).
func TestABigBatchGivesEveryRowItsOwnValues(t *testing.T) {
	texts := []string{"", `a "quoted" word`, `back\slash\`, "{braces},commas", "NULL", "line\nbreak", "ünïcödé 🙂", `\"`}
	eachDB(t, func(t *testing.T, b *bundle) {
		const n = 450
		var fs []store.Execution
		for i := range n {
			fs = append(fs, store.Execution{App: b.app, TaskCode: fmt.Sprintf("many-%03d", i), RunTime: t0 + int64(i%7)*1000, Replica: "r1"})
		}
		rows, err := b.store.InsertFires(b.ctx, fs)
		require.NoError(t, err)
		require.Len(t, rows, n)
		ids := make([]int64, n)
		for i, r := range rows {
			ids[i] = r.ID
		}
		_, err = b.store.StartFires(b.ctx, b.app, ids, "r1", t0)
		require.NoError(t, err)
		rec := &recorder{}
		s := store.New(b.db.Session(&gorm.Session{Logger: rec}), store.WithNow(func() time.Time { return time.UnixMilli(b.clock.Load()) }))

		// Even rows start and end in one write; odd rows start, then end.
		var starts []store.Start
		for i, r := range rows {
			st := store.Start{ID: r.ID, Replica: "r1", StartedMs: r.RunTime}
			if i%2 == 0 {
				st.Finish = &store.Result{Status: store.StatusSucceeded, Output: texts[i%len(texts)] + fmt.Sprint(i), FinishedMs: r.RunTime + int64(i)}
			}
			starts = append(starts, st)
		}
		oks, err := s.MarkRunning(b.ctx, starts)
		require.NoError(t, err)
		require.NotContains(t, oks, false)
		var finishes []store.Finish
		for i, r := range rows {
			if i%2 == 1 {
				finishes = append(finishes, store.Finish{ID: r.ID, Attempt: 1,
					Result: store.Result{Status: store.StatusFailed, Error: texts[i%len(texts)] + fmt.Sprint(i), FinishedMs: r.RunTime + int64(i)}})
			}
		}
		oks, err = s.FinishAttempts(b.ctx, finishes)
		require.NoError(t, err)
		require.NotContains(t, oks, false)
		if b.db.Dialector.Name() == "postgres" {
			// One statement per shape, and no CASE: its cost grows with the
			// square of the rows.
			require.Equal(t, 3, updates(rec.statements()), "a statement per shape of row: start, start and end, end")
			for _, q := range rec.statements() {
				require.False(t, caseOnID.MatchString(q), "a CASE on the id in %.200s", q)
			}
		}

		for i, r := range rows {
			e, readErr := b.store.Execution(b.ctx, r.ID)
			require.NoError(t, readErr)
			require.Equal(t, int64(i), e.DurationMs, "row %d", i)
			require.Equal(t, r.RunTime+int64(i), e.FinishedMs, "row %d", i)
			if i%2 == 0 {
				require.Equal(t, store.StatusSucceeded, e.Status, "row %d", i)
				require.Equal(t, texts[i%len(texts)]+fmt.Sprint(i), e.Output, "row %d", i)
			} else {
				require.Equal(t, store.StatusFailed, e.Status, "row %d", i)
				require.Equal(t, texts[i%len(texts)]+fmt.Sprint(i), e.Error, "row %d", i)
			}
		}
	})
}

// On PostgreSQL the claim and the batched starts find their rows by ID
// whatever the table's statistics say. Analyzed before this replica had
// any row, the table looks as if it held none of its scheduled rows, and
// a plan along the replica's index (one row, estimated) then compared
// each of thousands of rows with every ID of the batch: 20 s for 3,000
// fires in the throughput benchmark.
func TestBatchesFindTheirRowsByIDWhateverTheStatistics(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		if b.db.Dialector.Name() != "postgres" {
			t.Skip("the plans of PostgreSQL")
		}
		require.NoError(t, b.db.Exec("ALTER TABLE xtimer_executions SET (autovacuum_enabled = false)").Error)
		insert := func(replica string, n int, at int64) []int64 {
			var fs []store.Execution
			for i := range n {
				fs = append(fs, store.Execution{App: b.app, TaskCode: fmt.Sprintf("%s-%05d", replica, i), RunTime: at, Replica: replica})
			}
			rows, err := b.store.InsertFires(b.ctx, fs)
			require.NoError(t, err)
			ids := make([]int64, len(rows))
			for i, r := range rows {
				ids[i] = r.ID
			}
			return ids
		}
		insert("gone", 2000, t0)
		require.NoError(t, b.db.Exec("ANALYZE xtimer_executions").Error)
		ids := insert("r1", 20000, t0+1000)[:3000]

		rec := &recorder{}
		s := store.New(b.db.Session(&gorm.Session{Logger: rec}), store.WithNow(func() time.Time { return time.UnixMilli(b.clock.Load()) }))
		started, err := s.StartFires(b.ctx, b.app, ids, "r1", t0+1000)
		require.NoError(t, err)
		require.Len(t, started, len(ids))
		starts := make([]store.Start, len(ids))
		for i, id := range ids {
			starts[i] = store.Start{ID: id, Replica: "r1", StartedMs: t0 + 1000,
				Finish: &store.Result{Status: store.StatusSucceeded, FinishedMs: t0 + 1000 + int64(i)}}
		}
		oks, err := s.MarkRunning(b.ctx, starts)
		require.NoError(t, err)
		require.NotContains(t, oks, false)

		plans := 0
		for _, q := range rec.statements() {
			if !strings.HasPrefix(strings.TrimSpace(q), "UPDATE") {
				continue
			}
			var plan []string
			require.NoError(t, b.db.Raw("EXPLAIN "+q).Scan(&plan).Error)
			joined := strings.Join(plan, "\n")
			for _, index := range []string{"xtimer_executions_replica_time", "xtimer_executions_status"} {
				require.False(t, strings.Contains(joined, index), "%.100s planned along %s:\n%.600s", q, index, joined)
			}
			require.False(t, strings.Contains(joined, "Seq Scan on xtimer_executions"), "%.100s scans the table:\n%.600s", q, joined)
			// The replica's condition filters rows found by ID (the
			// primary key, or where they meet the batch's IDs), never a
			// scan whose estimate the statistics decide.
			node := ""
			for _, line := range plan {
				trimmed := strings.TrimSpace(line)
				if strings.HasPrefix(trimmed, "Filter:") && strings.Contains(trimmed, "replica") {
					require.Contains(t, node, "xtimer_executions_pkey", "%.100s: the replica filtered on %s", q, node)
				} else if !strings.HasPrefix(trimmed, "Index Cond:") && !strings.HasPrefix(trimmed, "Join Filter:") &&
					!strings.HasPrefix(trimmed, "Hash Cond:") {
					node = trimmed
				}
			}
			plans++
		}
		require.Equal(t, 2, plans, "the claim and the starts")
	})
}

var caseOnID = regexp.MustCompile(`CASE (xtimer_executions\.)?id`)

// updates counts the UPDATE statements among sqls.
// A claim of more fires than one statement's chunk claims exactly the rows
// that are the caller's to start; on PostgreSQL it is one UPDATE, so one
// commit, however many fires: at default durability a statement per 500
// fires waited for a WAL flush each, and a burst's claim came after its
// run time.
func TestABigClaimTakesTheCallersRowsInOneStatementOnPostgres(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		var fs []store.Execution
		for i := range 1203 {
			replica := "r1"
			if i%100 == 7 {
				replica = "r2" // another replica's fire: not claimed
			}
			fs = append(fs, store.Execution{App: b.app, TaskCode: fmt.Sprintf("big-%04d", i), RunTime: t0, Replica: replica})
		}
		rows, err := b.store.InsertFires(b.ctx, fs)
		require.NoError(t, err)
		ids := make([]int64, len(rows))
		var want []int64
		for i, r := range rows {
			ids[i] = r.ID
			if r.Replica == "r1" {
				want = append(want, r.ID)
			}
		}
		rec := &recorder{}
		s := store.New(b.db.Session(&gorm.Session{Logger: rec}), store.WithNow(func() time.Time { return time.UnixMilli(b.clock.Load()) }))
		started, err := s.StartFires(b.ctx, b.app, ids, "r1", t0)
		require.NoError(t, err)
		require.ElementsMatch(t, want, started)
		if b.db.Dialector.Name() == "postgres" {
			require.Equal(t, 1, updates(rec.statements()))
		}
		again, err := b.store.StartFires(b.ctx, b.app, ids, "r1", t0)
		require.NoError(t, err)
		require.Empty(t, again, "a fire is claimed once")
	})
}

func updates(sqls []string) int {
	n := 0
	for _, q := range sqls {
		if strings.HasPrefix(strings.TrimSpace(q), "UPDATE") {
			n++
		}
	}
	return n
}

// On PostgreSQL, a large insert of fires into an executions table that was
// never analyzed analyzes it, so that the next claims are planned on the
// primary key; a small one leaves that to autovacuum.
func TestLargeFirstInsertAnalyzesTheExecutionsTable(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		if b.db.Dialector.Name() != "postgres" {
			return // MySQL and SQLite keep their statistics as rows change
		}
		analyzed := func() bool {
			var done bool
			require.NoError(t, b.db.Raw(`SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relid = 'xtimer_executions'::regclass`).Scan(&done).Error)
			return done
		}
		_, err := b.store.InsertFires(b.ctx, fires(b.app, "small", t0, t0+1000))
		require.NoError(t, err)
		require.False(t, analyzed(), "two fires do not call for ANALYZE")
		runs := make([]int64, 1500)
		for i := range runs {
			runs[i] = t0 + int64(i)*1000
		}
		_, err = b.store.InsertFires(b.ctx, fires(b.app, "large", runs...))
		require.NoError(t, err)
		require.True(t, analyzed(), "1,500 fires into a table never analyzed")
	})
}
