package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The seeded history: one app, taskCount tasks ("task-0000"...), each firing
// every stepMs over spanMs. Tasks fire on whole seconds and those with the
// same number modulo 60 fire at the same instants, so ~17 rows share every
// run_time, as with cron tasks scheduled at the same minute: the id
// tiebreak of the paging order is exercised everywhere.
//
// Three replicas run at any time, and a deploy every two days replaces
// them: replica IDs are per process (host-pid-random), so most replicas a
// console filters on have rows only in some old two days.
const (
	benchApp  = "paging"
	taskCount = 1000
	spanMs    = 60 * 24 * 3600 * 1000
	replicas  = 3
	deployMs  = 2 * 24 * 3600 * 1000
)

// seedVersion changes whenever insertSQL generates different rows, so that
// -reuse does not keep a table seeded the old way.
const seedVersion = 2

// baseMs is the first run time: 2025-01-01 00:00:00 UTC.
var baseMs = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// plan is what a seeded table holds; measure derives its random tasks,
// days and cursors from it.
type plan struct {
	rows   int64
	stepMs int64
	// Every run_time is in [fromMs, toMs).
	fromMs, toMs int64
}

func newPlan(rows int64) (plan, error) {
	perTask := (rows + taskCount - 1) / taskCount
	step := spanMs / max(perTask, 1) / 1000 * 1000
	if rows < 1 || step < 60_000 {
		return plan{}, fmt.Errorf("-rows %d: want 1 to %d", rows, int64(taskCount)*spanMs/60_000)
	}
	lastK := (rows - 1) / taskCount
	return plan{rows: rows, stepMs: step, fromMs: baseMs, toMs: baseMs + lastK*step + 60_000}, nil
}

// taskCode names task i of the seeded app.
func taskCode(i int) string { return fmt.Sprintf("task-%04d", i) }

// generations is the number of replica sets over the history.
func (p plan) generations() int { return int((p.toMs - p.fromMs + deployMs - 1) / deployMs) }

// replicaName names replica i of generation gen.
func replicaName(gen, i int) string { return fmt.Sprintf("replica-%02d-%c", gen, 'a'+i) }

// seedTasks records the definitions of the seeded tasks, every tenth an
// HTTP task and every seventh paused. Upserting again changes nothing.
func seedTasks(ctx context.Context, st *store.Store) error {
	target := `{"url":"https://example.com/hook"}`
	tasks := make([]*store.Task, taskCount)
	for i := range tasks {
		t := &store.Task{App: benchApp, Code: taskCode(i), Name: fmt.Sprintf("Report %d for team %d", i, i%17), Spec: "@every 518s"}
		if i%10 == 0 {
			t.Kind, t.HTTPTarget = store.KindHTTP, &target
		}
		if i%7 == 0 {
			t.Status = store.TaskPaused
		}
		tasks[i] = t
	}
	if _, err := st.UpsertTasks(ctx, tasks); err != nil {
		return fmt.Errorf("seed tasks: %w", err)
	}
	return nil
}

// seedIfNeeded fills xtimer_executions with p.rows rows, unless a previous
// complete seeding of the same rows is recorded in pagingbench_seeded. It
// returns how long seeding took, 0 when it kept the table.
func seedIfNeeded(ctx context.Context, db *gorm.DB, p plan) (time.Duration, error) {
	if err := db.WithContext(ctx).Exec("CREATE TABLE IF NOT EXISTS pagingbench_seeded (fingerprint varchar(255) NOT NULL)").Error; err != nil {
		return 0, fmt.Errorf("create pagingbench_seeded: %w", err)
	}
	fingerprint := fmt.Sprintf("v%d rows=%d", seedVersion, p.rows)
	var done []string
	if err := db.WithContext(ctx).Raw("SELECT fingerprint FROM pagingbench_seeded").Scan(&done).Error; err != nil {
		return 0, fmt.Errorf("read pagingbench_seeded: %w", err)
	}
	if len(done) == 1 && done[0] == fingerprint {
		logf("reusing the rows seeded earlier (%s)", fingerprint)
		return 0, dropStaleIndexes(ctx, db)
	}
	start := time.Now()
	// One connection throughout, so that session settings stick.
	err := db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		for _, stmt := range []string{"DELETE FROM pagingbench_seeded", "DELETE FROM xtimer_executions", "DELETE FROM xtimer_rollups"} {
			if err := conn.Exec(stmt).Error; err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		return seed(conn, p)
	})
	if err != nil {
		return 0, err
	}
	if err := db.WithContext(ctx).Exec("INSERT INTO pagingbench_seeded (fingerprint) VALUES (?)", fingerprint).Error; err != nil {
		return 0, fmt.Errorf("record the seeding: %w", err)
	}
	return time.Since(start), nil
}

// seed inserts the rows with the secondary indexes dropped, then builds
// them: sorting once is far cheaper than keeping five B-trees up to date
// under 10 million random inserts.
func seed(conn *gorm.DB, p plan) error {
	dialect := conn.Dialector.Name()
	var chunk int64 = 1_000_000
	switch dialect {
	case "postgres":
		for _, set := range []string{"SET synchronous_commit = off", "SET maintenance_work_mem = '512MB'"} {
			if err := conn.Exec(set).Error; err != nil {
				return fmt.Errorf("%s: %w", set, err)
			}
		}
	case "mysql":
		chunk = 500_000
		if err := conn.Exec("SET SESSION unique_checks = 0, foreign_key_checks = 0").Error; err != nil {
			return fmt.Errorf("relax checks for seeding: %w", err)
		}
	case "sqlite":
		chunk = 200_000
	}

	indexes, err := modelIndexes(conn)
	if err != nil {
		return err
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

	start := time.Now()
	for lo := int64(0); lo < p.rows; lo += chunk {
		hi := min(lo+chunk, p.rows)
		if err := conn.Exec(insertSQL(dialect, p, lo, hi)).Error; err != nil {
			return fmt.Errorf("insert rows %d..%d: %w", lo, hi, err)
		}
		logf("inserted %d/%d rows in %s", hi, p.rows, time.Since(start).Round(time.Second))
	}
	for _, name := range indexes {
		t := time.Now()
		if err := m.CreateIndex(&store.Execution{}, name); err != nil {
			return fmt.Errorf("create index %s: %w", name, err)
		}
		logf("built index %s in %s", name, time.Since(t).Round(time.Second))
	}
	analyze := map[string]string{"postgres": "ANALYZE xtimer_executions", "mysql": "ANALYZE TABLE xtimer_executions"}[dialect]
	if analyze != "" {
		if err := conn.Exec(analyze).Error; err != nil {
			return fmt.Errorf("%s: %w", analyze, err)
		}
	}
	return nil
}

// modelIndexes returns the names of the indexes store.Execution declares.
func modelIndexes(db *gorm.DB) ([]string, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(&store.Execution{}); err != nil {
		return nil, err
	}
	var names []string
	for _, idx := range stmt.Schema.ParseIndexes() {
		names = append(names, idx.Name)
	}
	return names, nil
}

// dropStaleIndexes drops the indexes of xtimer_executions that the model
// no longer declares (Migrate creates new ones but never drops old ones),
// so that a reused table is measured with exactly the current indexes.
func dropStaleIndexes(ctx context.Context, db *gorm.DB) error {
	want, err := modelIndexes(db)
	if err != nil {
		return err
	}
	m := db.WithContext(ctx).Migrator()
	got, err := m.GetIndexes(&store.Execution{})
	if err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	for _, idx := range got {
		if primary, _ := idx.PrimaryKey(); primary || slices.Contains(want, idx.Name()) {
			continue
		}
		logf("dropping index %s, which the model no longer declares", idx.Name())
		if err := m.DropIndex(&store.Execution{}, idx.Name()); err != nil {
			return fmt.Errorf("drop index %s: %w", idx.Name(), err)
		}
	}
	return nil
}

// insertSQL generates rows lo <= n < hi on the server. Row n is fire
// n/taskCount of task n%taskCount; three multiplicative hashes of n pick
// its status (95% succeeded, 3% failed, 1% timed_out, 1% skipped), source
// (97% schedule, 2% retry, 1% manual), replica of the generation running
// then, lateness and duration.
// Every value is an integer computed here or a constant: nothing from
// outside reaches the text.
func insertSQL(dialect string, p plan, lo, hi int64) string {
	div, code, replica, gen := "/", "", "", ""
	letter := "CASE rep WHEN 0 THEN 'a' WHEN 1 THEN 'b' ELSE 'c' END"
	switch dialect {
	case "postgres":
		code = "'task-' || lpad(task::text, 4, '0')"
		replica = "'replica-' || lpad(gen::text, 2, '0') || '-' || " + letter
		gen = fmt.Sprintf("SELECT n FROM generate_series(%d::bigint, %d::bigint) AS g(n)", lo, hi-1)
	case "mysql":
		div = "DIV"
		code = "CONCAT('task-', LPAD(task, 4, '0'))"
		replica = "CONCAT('replica-', LPAD(gen, 2, '0'), '-', " + letter + ")"
		gen = fmt.Sprintf("SELECT seq AS n FROM seq_%d_to_%d", lo, hi-1) // MariaDB's SEQUENCE engine
	case "sqlite":
		code = "printf('task-%04d', task)"
		replica = "printf('replica-%02d-', gen) || " + letter
		gen = fmt.Sprintf("WITH RECURSIVE g(n) AS (SELECT %d UNION ALL SELECT n + 1 FROM g WHERE n < %d) SELECT n FROM g", lo, hi-1)
	}
	hash := func(mul int64) string { return fmt.Sprintf("(n * %d %% 4294967296) %s 65536", mul, div) }
	r := strings.NewReplacer("{div}", div, "{code}", code, "{replica}", replica, "{gen}", gen, "{deploy}", fmt.Sprint(deployMs),
		"{h1}", hash(2654435761), "{h2}", hash(2246822519), "{h3}", hash(3266489917),
		"{app}", benchApp, "{T}", fmt.Sprint(taskCount), "{base}", fmt.Sprint(baseMs), "{step}", fmt.Sprint(p.stepMs),
		"{R}", fmt.Sprint(replicas))
	return r.Replace(`INSERT INTO xtimer_executions (app, task_code, run_time, status, reason, source, attempt, max_attempts,
  replica, claim, scheduled_ms, started_ms, finished_ms, lateness_ms, duration_ms, output, error, next_attempt_ms, updated_ms)
SELECT '{app}', {code}, rt, status, CASE status WHEN 'skipped' THEN 'overlap' ELSE '' END, source,
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
  SELECT task, rt, rep, (rt - {base}) {div} {deploy} AS gen, lat, dur,
    CASE WHEN sb < 95 THEN 'succeeded' WHEN sb < 98 THEN 'failed' WHEN sb < 99 THEN 'timed_out' ELSE 'skipped' END AS status,
    CASE WHEN so < 97 THEN 'schedule' WHEN so < 99 THEN 'retry' ELSE 'manual' END AS source
  FROM (
    SELECT task, {base} + k * {step} + (task % 60) * 1000 AS rt,
      h1 % 100 AS sb, h2 % 100 AS so, h3 % {R} AS rep, h1 % 50 AS lat, 100 + h2 % 900 AS dur
    FROM (
      SELECT n % {T} AS task, n {div} {T} AS k, {h1} AS h1, {h2} AS h2, {h3} AS h3
      FROM ({gen}) AS numbers
    ) AS hashed
  ) AS picked
) AS rowsrc`)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
