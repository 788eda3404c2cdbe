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
		require.Eventually(t, analyzed, 30*time.Second, 10*time.Millisecond, "1,500 fires into a table never analyzed")
	})
}

// On PostgreSQL the tick's reads of the scheduled rows (OwnedFires,
// PromoteLostStarts) go along the status index in a plain index scan,
// which marks the dead entries it finds: a fire leaves one there when it
// settles, and the reads after it step over the marked ones without
// reading their rows again. A bitmap or sequential scan marks none.
func TestTickReadsMarkTheStatusIndexsDeadEntries(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		if b.db.Dialector.Name() != "postgres" {
			t.Skip("PostgreSQL's index entries")
		}
		// VACUUM would remove the dead entries instead.
		require.NoError(t, b.db.Exec("ALTER TABLE xtimer_executions SET (autovacuum_enabled = false)").Error)
		require.NoError(t, b.db.Exec("CREATE EXTENSION IF NOT EXISTS pageinspect").Error)
		// dead counts the rows whose entries are marked dead: an entry of
		// a key many rows share lists them all (a posting list).
		dead := func() (n int64) {
			require.NoError(t, b.db.Raw(`SELECT coalesce(sum(coalesce(cardinality(tids), 1)), 0)
				FROM generate_series(1, pg_relation_size('xtimer_executions_status') / 8192 - 1) blk,
				LATERAL bt_page_items('xtimer_executions_status', blk::int) WHERE dead`).Scan(&n).Error)
			return n
		}
		analyses := func() (n int64) {
			require.NoError(t, b.db.Raw(`SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'xtimer_executions'::regclass`).Scan(&n).Error)
			return n
		}
		const second = int64(1000)
		var rows []store.Execution
		for i := range 6000 { // a minute of 100 fires a second, by three replicas
			rows = append(rows, store.Execution{App: b.app, TaskCode: fmt.Sprintf("task-%03d", i%100), RunTime: t0 + int64(i/100)*second,
				Replica: fmt.Sprintf("r%d", i%3)})
		}
		_, err := b.store.InsertFires(b.ctx, rows)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return analyses() == 1 }, 30*time.Second, 10*time.Millisecond)
		// settle has the fires of [from, to) run: each row's scheduled
		// entry is dead.
		settle := func(from, to int64) {
			require.NoError(t, b.db.Exec(`UPDATE xtimer_executions SET status = 'succeeded', attempt = 1, started_ms = run_time,
				finished_ms = run_time + 1 WHERE run_time >= ? AND run_time < ?`, from, to).Error)
		}
		// Statistics a little behind the table, as between two of
		// analyzeChanged's.
		settle(t0, t0+10*second)
		require.NoError(t, b.db.Exec("ANALYZE xtimer_executions").Error)
		settle(t0+10*second, t0+20*second)
		require.Zero(t, dead())
		now := t0 + 25*second
		b.set(now)
		// A scan marks an entry once its row is dead to every transaction
		// of the server: a snapshot older than the update (another
		// session's, the background ANALYZE's) holds it back a while.
		// So each read is made again until the entries it reads are
		// marked; a scan that marks none never gets there.
		marks := func(read func() error, rows int64, msg string) {
			deadline := time.Now().Add(30 * time.Second)
			for {
				require.NoError(t, read())
				if dead() >= rows {
					return
				}
				require.True(t, time.Now().Before(deadline), "%s: %d rows marked dead, want %d", msg, dead(), rows)
				time.Sleep(20 * time.Millisecond)
			}
		}
		marks(func() error {
			_, err := b.store.OwnedFires(b.ctx, b.app, "r1", now-5*second, 200)
			return err
		}, 2000, "OwnedFires, up to now-5 s")
		settle(t0+20*second, t0+30*second)
		marks(func() error {
			_, err := b.store.PromoteLostStarts(b.ctx, b.app, []string{"r0", "r1", "r2"}, now-60*second)
			return err
		}, 3000, "PromoteLostStarts, up to now+10 s")
	})
}

// On PostgreSQL the executions table is analyzed again by a large insert
// once more of its rows changed than its last ANALYZE counted. A young
// table's first statistics, taken at its first insert, say every row is
// scheduled, and plan the tick's reads of the few scheduled rows
// (OwnedFires, PromoteLostStarts) as scans of the whole table; those of
// the table as it has become plan them along an index.
func TestChangedExecutionsTableIsAnalyzedAgain(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		if b.db.Dialector.Name() != "postgres" {
			t.Skip("the statistics of PostgreSQL")
		}
		// Autovacuum would analyze it too, in its own time.
		require.NoError(t, b.db.Exec("ALTER TABLE xtimer_executions SET (autovacuum_enabled = false)").Error)
		analyses := func() (n int64) {
			require.NoError(t, b.db.Raw(`SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'xtimer_executions'::regclass`).Scan(&n).Error)
			return n
		}
		const second = int64(1000)
		record := func(code string, from int64) {
			runs := make([]int64, 1500)
			for i := range runs {
				runs[i] = from + int64(i)*second/300 // 300 fires a second
			}
			rows := fires(b.app, code, runs...)
			for i := range rows {
				rows[i].Replica = fmt.Sprintf("r%d", i%3) // three replicas
			}
			_, err := b.store.InsertFires(b.ctx, rows)
			require.NoError(t, err)
		}
		record("first", t0)
		require.Eventually(t, func() bool { return analyses() == 1 }, 30*time.Second, 10*time.Millisecond, "the first large insert")
		// The fires that ran since: the first ones, and 100,000 more.
		require.NoError(t, b.db.Exec(`UPDATE xtimer_executions SET status = 'succeeded', attempt = 1, started_ms = run_time, finished_ms = run_time + 1`).Error)
		require.NoError(t, b.db.Exec(`INSERT INTO xtimer_executions (app, task_code, run_time, status, replica, attempt, max_attempts,
				started_ms, finished_ms, output, error)
			SELECT ?, 'ran', ?::bigint + g * 2, 'succeeded', 'r' || g % 3, 1, 1, ?::bigint + g * 2, ?::bigint + g * 2 + 1, '', ''
			FROM generate_series(1, 100000) g`, b.app, t0+5*second, t0+5*second, t0+5*second).Error)
		now := t0 + 205*second
		b.set(now)
		// offStatus lists the tick's reads not planned along the status
		// index, whose conditions (app, status, run_time) find the few
		// scheduled rows: a scan of the table, or of one replica's rows.
		offStatus := func() (off []string) {
			rec := &recorder{}
			s := store.New(b.db.Session(&gorm.Session{Logger: rec}), store.WithNow(func() time.Time { return time.UnixMilli(b.clock.Load()) }))
			_, err := s.OwnedFires(b.ctx, b.app, "r1", now-5*second, 200)
			require.NoError(t, err)
			_, err = s.PromoteLostStarts(b.ctx, b.app, []string{"r0", "r1", "r2"}, now-60*second)
			require.NoError(t, err)
			reads := 0
			for _, q := range rec.statements() {
				if q = strings.TrimSpace(q); !strings.HasPrefix(q, "SELECT") || strings.HasPrefix(q, "SELECT set_config") {
					continue // not a read of rows
				}
				reads++
				var plan []string
				require.NoError(t, b.db.Raw("EXPLAIN "+q).Scan(&plan).Error)
				if joined := strings.Join(plan, "\n"); !regexp.MustCompile(`Index Scan (using|on) xtimer_executions_status`).MatchString(joined) {
					off = append(off, fmt.Sprintf("%.90s:\n%.500s", q, joined))
				}
			}
			require.Equal(t, 2, reads, "the tick's two reads")
			return off
		}
		require.Len(t, offStatus(), 2, "planned by the first statistics")
		// The server counts the changes once their sessions report them.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var counted bool
			require.NoError(t, b.db.Raw(`SELECT st.n_mod_since_analyze >= c.reltuples FROM pg_stat_user_tables st
				JOIN pg_class c ON c.oid = st.relid WHERE st.relid = 'xtimer_executions'::regclass`).Scan(&counted).Error)
			if counted {
				break
			}
			require.True(t, time.Now().Before(deadline), "the server never counted the changes")
		}
		// A large insert looks, unless this store is still looking after
		// the first one: the next one does.
		for i, deadline := 0, time.Now().Add(30*time.Second); ; i++ {
			record(fmt.Sprintf("next-%d", i), now)
			analyzed := false
			for wait := time.Now().Add(time.Second); !analyzed && time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
				analyzed = analyses() == 2
			}
			if analyzed {
				break
			}
			require.True(t, time.Now().Before(deadline), "a large insert into a table that changed")
		}
		require.Empty(t, offStatus(), "planned by the statistics of the table as it is")
	})
}
