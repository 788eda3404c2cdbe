package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The history condition (-history N): before a steady or throughput run
// of an xtimer system, the executions table holds N rows of earlier runs
// of the app's own tasks, as it does in a database that has run for weeks.
//
// The coordinator seeds once per backend and N, into a cluster of its
// own: it copies the empty template, starts the database on it, runs
// store.Migrate (the replicas' own migration, which then finds the tables
// in place), fills xtimer_executions with server-side generated rows
// (generate_series on PostgreSQL, the SEQUENCE engine's seq_X_to_Y on
// MariaDB, as internal/pagingbench/seed.go does), builds the indexes after
// the rows, vacuums and analyzes (what autovacuum would have done by
// then), and stops the database cleanly. That cluster is then the
// template every run with that history is copied from (cp -a of a few
// GB: seconds, not the minutes of seeding).
//
// The rows: app "bench" (xtimer.go's App), tasks taskCode(0) to
// taskCode(historyTasks-1), the steady workload's 1,000 tasks and the
// first 1,000 of every throughput step, each fire of a task historyStep
// apart on whole seconds, the newest an hour before the seeding and the
// oldest within historySpan of it: all inside the engine's default
// Retention (30 days), so the sweeper deletes none of them during a run,
// and all in the past, so that no fire of the run has the (task,
// run_time) of a seeded row. Final statuses only, as pagingbench mixes
// them: 95% succeeded, 3% failed, 1% timed_out, 1% skipped; 97%
// schedule, 2% retry, 1% manual.
const (
	historyTasks = 1000
	historySpan  = 28 * 24 * time.Hour
	historyGap   = time.Hour // between the newest seeded row and the seeding
	historyEpoch = 2 * 24 * time.Hour
)

// seedKey names a seeded cluster.
type seedKey struct {
	postgres bool // else MariaDB
	rows     int64
}

// seededCluster is a cluster seeded with a history, or why it is not.
type seededCluster struct {
	data string // the data dir to copy
	took time.Duration
	err  error
}

// postgresData is the PostgreSQL data dir a run with history rows starts
// from: the empty template, or one seeded with them.
func (t *templates) postgresData(history int64) (string, error) {
	if err := t.postgres(); err != nil {
		return "", err
	}
	if history == 0 {
		return t.pgData, nil
	}
	sc := t.seed(seedKey{postgres: true, rows: history})
	return sc.data, sc.err
}

// mariadbData is postgresData for MariaDB.
func (t *templates) mariadbData(history int64) (string, error) {
	if err := t.mariadb(); err != nil {
		return "", err
	}
	if history == 0 {
		return t.myData, nil
	}
	sc := t.seed(seedKey{postgres: false, rows: history})
	return sc.data, sc.err
}

// seedTime is how long seeding the cluster of (backend, rows) took.
func (t *templates) seedTime(postgres bool, rows int64) time.Duration {
	if sc := t.seeded[seedKey{postgres, rows}]; sc != nil {
		return sc.took
	}
	return 0
}

// seed returns the cluster of k, seeding it the first time (a failure is
// kept too: the next run of the same history is n/a at once).
func (t *templates) seed(k seedKey) *seededCluster {
	if sc := t.seeded[k]; sc != nil {
		return sc
	}
	if t.seeded == nil {
		t.seeded = map[seedKey]*seededCluster{}
	}
	name := "mariadb"
	if k.postgres {
		name = "postgres"
	}
	dir := filepath.Join(t.root, fmt.Sprintf("%s-history-%d", name, k.rows))
	sc := &seededCluster{}
	t.seeded[k] = sc
	fmt.Fprintf(os.Stderr, "bench: seeding %s rows of history on %s (once; later runs copy the cluster)\n", num(k.rows), name)
	began := time.Now()
	if err := os.Mkdir(dir, 0o755); err != nil {
		sc.err = err
		return sc
	}
	var srv *server
	var dsn, data string
	var err error
	// The seeding server trades durability for speed: it is stopped
	// cleanly, so what it wrote is whole, and each run starts it as asked.
	if k.postgres {
		srv, dsn, err = startPostgres(t, dir, t.pgData, true)
		data = filepath.Join(dir, "pg", "data")
	} else {
		srv, dsn, err = startMariaDB(dir, t.myData, true)
		data = filepath.Join(dir, "mariadb")
	}
	if err != nil {
		sc.err = fmt.Errorf("seeding server: %w", err)
		return sc
	}
	err = seedHistory(name, dsn, k.rows, time.Now())
	// A clean stop writes the last checkpoint: the copies start without
	// recovery.
	srv.killWithin(10 * time.Minute)
	if err != nil {
		sc.err = fmt.Errorf("seed %s rows of history: %w", num(k.rows), err)
		return sc
	}
	sc.data, sc.took = data, time.Since(began)
	fmt.Fprintf(os.Stderr, "bench: seeded %s rows of history on %s in %s\n", num(k.rows), name, sc.took.Round(time.Second))
	return sc
}

// seedHistory migrates the tables of the database at dsn and fills
// xtimer_executions with rows rows ending historyGap before now.
func seedHistory(kind, dsn string, rows int64, now time.Time) error {
	if kind == "mariadb" {
		kind = "mysql"
	}
	db, err := openSQL(kind, dsn)
	if err != nil {
		return err
	}
	defer closeSQL(db)
	ctx := context.Background()
	if err = store.New(db, store.WithQueryTimeout(10*time.Minute)).Migrate(ctx); err != nil {
		return err
	}
	h, err := newHistoryPlan(rows, now)
	if err != nil {
		return err
	}
	// One connection throughout, so that session settings stick.
	return db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		return seedRows(conn, h)
	})
}

// historyPlan is what the seeded table holds: row n is fire n/historyTasks
// of task n%historyTasks, at fromMs + k×stepMs + (task%60) s.
type historyPlan struct {
	rows   int64
	stepMs int64
	fromMs int64
}

func newHistoryPlan(rows int64, now time.Time) (historyPlan, error) {
	if rows < 1 {
		return historyPlan{}, fmt.Errorf("-history %d: want a positive row count", rows)
	}
	perTask := (rows + historyTasks - 1) / historyTasks
	stepMs := historySpan.Milliseconds() / perTask / 1000 * 1000
	if stepMs < 1000 {
		return historyPlan{}, fmt.Errorf("-history %d: at most %d rows fit %s of whole-second fires of %d tasks",
			rows, int64(historyTasks)*int64(historySpan/time.Second), historySpan, historyTasks)
	}
	newest := now.Truncate(time.Second).Add(-historyGap).UnixMilli()
	// The newest row is fire perTask-1 of a task with offset 59 s.
	from := newest - (perTask-1)*stepMs - 59_000
	return historyPlan{rows: rows, stepMs: stepMs, fromMs: from}, nil
}

// seedRows inserts the rows with the secondary indexes dropped and builds
// them after: sorting once is far cheaper than keeping six B-trees up to
// date under millions of inserts.
func seedRows(conn *gorm.DB, h historyPlan) error {
	dialect := conn.Dialector.Name()
	var chunk int64 = 1_000_000
	switch dialect {
	case "postgres":
		if err := conn.Exec("SET maintenance_work_mem = '512MB'").Error; err != nil {
			return fmt.Errorf("set maintenance_work_mem: %w", err)
		}
	case "mysql":
		chunk = 500_000
		if err := conn.Exec("SET SESSION unique_checks = 0, foreign_key_checks = 0").Error; err != nil {
			return fmt.Errorf("relax checks for seeding: %w", err)
		}
	}
	stmt := &gorm.Statement{DB: conn}
	if err := stmt.Parse(&store.Execution{}); err != nil {
		return err
	}
	var indexes []string
	for _, idx := range stmt.Schema.ParseIndexes() {
		indexes = append(indexes, idx.Name)
	}
	m := conn.Migrator()
	got, err := m.GetIndexes(&store.Execution{})
	if err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	for _, idx := range got {
		if primary, _ := idx.PrimaryKey(); !primary {
			if err := m.DropIndex(&store.Execution{}, idx.Name()); err != nil {
				return fmt.Errorf("drop index %s: %w", idx.Name(), err)
			}
		}
	}
	for lo := int64(0); lo < h.rows; lo += chunk {
		hi := min(lo+chunk, h.rows)
		if err := conn.Exec(historySQL(dialect, h, lo, hi)).Error; err != nil {
			return fmt.Errorf("insert rows %d..%d: %w", lo, hi, err)
		}
	}
	for _, name := range indexes {
		if err := m.CreateIndex(&store.Execution{}, name); err != nil {
			return fmt.Errorf("create index %s: %w", name, err)
		}
	}
	final := []string{"VACUUM (ANALYZE) xtimer_executions", "CHECKPOINT"}
	if dialect == "mysql" {
		final = []string{"ANALYZE TABLE xtimer_executions"}
	}
	for _, q := range final {
		if err := conn.Exec(q).Error; err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// historySQL generates rows lo <= n < hi on the server. Three
// multiplicative hashes of n pick the row's status, source, replica of
// the generation running then (one every historyEpoch, three replicas),
// lateness and duration. Every value is an integer computed here or a
// constant: nothing from outside reaches the text.
func historySQL(dialect string, h historyPlan, lo, hi int64) string {
	div, code, replica, gen := "/", "", "", ""
	switch dialect {
	case "postgres":
		code = "'t' || lpad(task::text, 7, '0')"
		replica = "'replica-' || lpad(gen::text, 2, '0') || '-' || rep::text"
		gen = fmt.Sprintf("SELECT n FROM generate_series(%d::bigint, %d::bigint) AS g(n)", lo, hi-1)
	case "mysql":
		div = "DIV"
		code = "CONCAT('t', LPAD(task, 7, '0'))"
		replica = "CONCAT('replica-', LPAD(gen, 2, '0'), '-', rep)"
		gen = fmt.Sprintf("SELECT seq AS n FROM seq_%d_to_%d", lo, hi-1) // MariaDB's SEQUENCE engine
	}
	hash := func(mul int64) string { return fmt.Sprintf("(n * %d %% 4294967296) %s 65536", mul, div) }
	r := strings.NewReplacer("{div}", div, "{code}", code, "{replica}", replica, "{gen}", gen,
		"{epoch}", fmt.Sprint(historyEpoch.Milliseconds()),
		"{h1}", hash(2654435761), "{h2}", hash(2246822519), "{h3}", hash(3266489917),
		"{T}", fmt.Sprint(historyTasks), "{from}", fmt.Sprint(h.fromMs), "{step}", fmt.Sprint(h.stepMs))
	return r.Replace(`INSERT INTO xtimer_executions (app, task_code, run_time, status, reason, source, attempt, max_attempts,
  replica, claim, scheduled_ms, started_ms, finished_ms, lateness_ms, duration_ms, output, error, next_attempt_ms, updated_ms)
SELECT 'bench', {code}, rt, status, CASE status WHEN 'skipped' THEN 'overlap' ELSE '' END, source,
  CASE WHEN status = 'skipped' THEN 0 WHEN source = 'retry' THEN 2 ELSE 1 END, 3,
  {replica}, '', rt - 60000,
  CASE WHEN status = 'skipped' THEN 0 ELSE rt + lat END,
  CASE WHEN status = 'skipped' THEN rt ELSE rt + lat + dur END,
  CASE WHEN status = 'skipped' THEN 0 ELSE lat END,
  CASE WHEN status = 'skipped' THEN 0 ELSE dur END,
  CASE status WHEN 'succeeded' THEN 'ok' ELSE '' END,
  CASE status WHEN 'failed' THEN 'exit status 1' WHEN 'timed_out' THEN 'deadline exceeded after 30s' ELSE '' END,
  0, rt + lat + dur
FROM (
  SELECT task, rt, rep, (rt - {from}) {div} {epoch} AS gen, lat, dur,
    CASE WHEN sb < 95 THEN 'succeeded' WHEN sb < 98 THEN 'failed' WHEN sb < 99 THEN 'timed_out' ELSE 'skipped' END AS status,
    CASE WHEN so < 97 THEN 'schedule' WHEN so < 99 THEN 'retry' ELSE 'manual' END AS source
  FROM (
    SELECT task, {from} + k * {step} + (task % 60) * 1000 AS rt,
      h1 % 100 AS sb, h2 % 100 AS so, h3 % 3 AS rep, h1 % 50 AS lat, 100 + h2 % 900 AS dur
    FROM (
      SELECT n % {T} AS task, n {div} {T} AS k, {h1} AS h1, {h2} AS h2, {h3} AS h3
      FROM ({gen}) AS numbers
    ) AS hashed
  ) AS picked
) AS rowsrc`)
}

// checkHistory verifies that the run's database holds the seeded history
// (PostgreSQL's estimate or MariaDB's, exact enough to tell N rows from
// none, and the newest row in the past) without counting N rows.
func checkHistory(svc *services, rows int64) error {
	kind, dsn := "postgres", svc.pgURL
	if dsn == "" {
		kind, dsn = "mysql", svc.myDSN
	}
	db, err := openSQL(kind, dsn)
	if err != nil {
		return err
	}
	defer closeSQL(db)
	var newest int64
	if err := db.Raw("SELECT COALESCE(MAX(run_time), 0) FROM xtimer_executions WHERE app = 'bench'").Scan(&newest).Error; err != nil {
		return fmt.Errorf("read the newest seeded row: %w", err)
	}
	if newest == 0 || newest > time.Now().UnixMilli() {
		return fmt.Errorf("want %s seeded rows in the past, newest run_time is %d", num(rows), newest)
	}
	var estimate float64
	q := "SELECT reltuples FROM pg_class WHERE relname = 'xtimer_executions'"
	if kind == "mysql" {
		q = "SELECT table_rows FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'xtimer_executions'"
	}
	if err := db.Raw(q).Scan(&estimate).Error; err != nil {
		return fmt.Errorf("estimate the seeded rows: %w", err)
	}
	if estimate < float64(rows)/2 {
		return fmt.Errorf("want %s seeded rows, the table holds about %.0f", num(rows), estimate)
	}
	return nil
}
