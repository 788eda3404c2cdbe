// Package seedrows fills xtimer_executions with millions of rows of earlier
// runs in minutes, generated on the database server by INSERT ... SELECT
// (generate_series on PostgreSQL, the SEQUENCE engine's seq_X_to_Y on
// MariaDB, a recursive CTE on SQLite): the history a database holds after
// weeks of running, for the benchmarks that measure against one
// (internal/pagingbench, and bench/history.go in the bench module).
//
// The rows: Plan.Tasks tasks of one app, row n being fire n/Tasks of task
// n%Tasks, each task's fires Step apart on whole seconds, task t offset by
// t%60 seconds, so that about Tasks/60 rows share every run_time, as cron
// tasks scheduled at the same minute do. Three multiplicative hashes of n
// pick the row's status (95% succeeded, 3% failed, 1% timed_out, 1%
// skipped), source (97% schedule, 2% retry, 1% manual), replica, lateness
// and duration. Replicas runs at any time and a deploy every DeployEvery
// replaces them (ReplicaName, counted from the oldest row), so most replica
// IDs have rows only in some old two days, as per-process replica IDs do.
package seedrows

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The replicas of the seeded rows: Replicas at a time, a new set of them
// every DeployEvery from Plan.From.
const (
	Replicas    = 3
	DeployEvery = 48 * time.Hour
)

// Plan is what Seed writes.
type Plan struct {
	// App is the rows' app: 1 to 64 bytes.
	App string
	// Task t's code is CodePrefix followed by t in CodeDigits decimal
	// digits, zero-padded (TaskCode). CodeDigits must hold Tasks-1.
	CodePrefix string
	CodeDigits int
	// Tasks is the number of tasks, at least 1.
	Tasks int
	// Rows is the number of rows, at least 1.
	Rows int64
	// Every row's run_time is in [From, To), the newest at the last whole
	// second before To (First, Step). The range must fit the offsets of
	// up to 60 tasks and a fire a second of each.
	From, To time.Time
}

// Validate reports the first field of p that Seed cannot use, naming it
// and its value.
func (p Plan) Validate() error {
	switch {
	case p.App == "" || len(p.App) > 64:
		return fmt.Errorf("seedrows: App %q: want 1 to 64 bytes", p.App)
	case len(p.CodePrefix) > 64:
		return fmt.Errorf("seedrows: CodePrefix %q: want at most 64 bytes", p.CodePrefix)
	case p.Tasks < 1:
		return fmt.Errorf("seedrows: Tasks %d: want at least 1", p.Tasks)
	case p.CodeDigits < len(fmt.Sprint(p.Tasks-1)) || p.CodeDigits > 18:
		return fmt.Errorf("seedrows: CodeDigits %d: want %d to 18 digits for %d tasks", p.CodeDigits, len(fmt.Sprint(p.Tasks-1)), p.Tasks)
	case p.Rows < 1:
		return fmt.Errorf("seedrows: Rows %d: want at least 1", p.Rows)
	case !p.From.Before(p.To):
		return fmt.Errorf("seedrows: From %s, To %s: want From before To", p.From.UTC().Format(time.RFC3339), p.To.UTC().Format(time.RFC3339))
	}
	if p.room() < 0 || p.perTask() > 1 && p.Step() < time.Second {
		return fmt.Errorf("seedrows: Rows %d: at most %d rows of %d tasks fit %s to %s at a fire a second",
			p.Rows, p.maxRows(), p.Tasks, p.From.UTC().Format(time.RFC3339), p.To.UTC().Format(time.RFC3339))
	}
	return nil
}

// perTask is the number of fires of the tasks that fire most.
func (p Plan) perTask() int64 { return (p.Rows + int64(p.Tasks) - 1) / int64(p.Tasks) }

// maxOffset is the offset of the latest task within a step.
func (p Plan) maxOffset() time.Duration { return time.Duration(min(p.Tasks, 60)-1) * time.Second }

// last is the run_time of the newest row: the last whole second before To.
func (p Plan) last() time.Time { return p.To.Add(-time.Millisecond).Truncate(time.Second) }

// room is the span the fires k×Step of a task may take: from From to the
// newest row, less the largest offset.
func (p Plan) room() time.Duration { return p.last().Sub(p.From) - p.maxOffset() }

// maxRows is the most rows the range holds at a fire a second.
func (p Plan) maxRows() int64 {
	if p.room() < 0 {
		return 0
	}
	return (int64(p.room()/time.Second) + 1) * int64(p.Tasks)
}

// Step is the time between two fires of a task: whole seconds, the most
// that fits the range (the whole range for a single fire a task). Below a
// second, p is not valid.
func (p Plan) Step() time.Duration {
	n := p.perTask()
	if n <= 1 {
		return p.room().Truncate(time.Second)
	}
	return (p.room() / time.Duration(n-1)).Truncate(time.Second)
}

// First is the run_time of the oldest row, fire 0 of task 0: the rows end
// at the last whole second before To, and begin at or after From.
func (p Plan) First() time.Time {
	return p.last().Add(-p.maxOffset() - time.Duration(p.perTask()-1)*p.Step())
}

// Generations is the number of replica sets over the rows.
func (p Plan) Generations() int {
	return int((p.last().Sub(p.First()) + DeployEvery) / DeployEvery)
}

// TaskCode is the code of task t.
func (p Plan) TaskCode(t int) string { return fmt.Sprintf("%s%0*d", p.CodePrefix, p.CodeDigits, t) }

// ReplicaName is the ID of replica i (0 to Replicas-1) of generation gen.
func ReplicaName(gen, i int) string { return fmt.Sprintf("replica-%02d-%c", gen, 'a'+i) }

// Seed inserts the rows of p into db's xtimer_executions, which store's
// Migrate has made: with the secondary indexes dropped, then built again,
// as sorting once is far cheaper than keeping six B-trees up to date
// under millions of inserts; then it analyzes the table (on PostgreSQL
// vacuums it too: what autovacuum would have done by then). The rows
// already there stay. logf, unless nil, hears of its progress. db is
// PostgreSQL, MariaDB (its SEQUENCE engine: not MySQL) or SQLite.
func Seed(ctx context.Context, db *gorm.DB, p Plan, logf func(format string, args ...any)) error {
	dialect := db.Dialector.Name()
	chunk, ok := map[string]int64{"postgres": 1_000_000, "mysql": 500_000, "sqlite": 200_000}[dialect]
	if !ok {
		return fmt.Errorf("seedrows: dialect %q: want postgres, mysql (MariaDB) or sqlite", dialect)
	}
	if err := p.Validate(); err != nil {
		return err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	// One connection throughout, so that session settings stick; they are
	// put back before the pool hands the connection out again, or the
	// caller's later writes on it (the bench's roll-ups) would run without
	// durability or, on MariaDB, without unique checks.
	return db.WithContext(ctx).Connection(func(conn *gorm.DB) (err error) {
		settings := map[string][][2]string{
			"postgres": {{"SET synchronous_commit = off", "RESET synchronous_commit"},
				{"SET maintenance_work_mem = '512MB'", "RESET maintenance_work_mem"}},
			"mysql": {{"SET SESSION unique_checks = 0, foreign_key_checks = 0",
				"SET SESSION unique_checks = DEFAULT, foreign_key_checks = DEFAULT"}},
		}[dialect]
		for _, set := range settings {
			if err = conn.Exec(set[0]).Error; err != nil {
				return fmt.Errorf("seedrows: %s: %w", set[0], err)
			}
			defer func() {
				if resetErr := conn.WithContext(context.WithoutCancel(ctx)).Exec(set[1]).Error; resetErr != nil && err == nil {
					err = fmt.Errorf("seedrows: %s: %w", set[1], resetErr)
				}
			}()
		}
		indexes, err := store.ExecutionIndexes(conn)
		if err != nil {
			return err
		}
		m := conn.Migrator()
		got, err := m.GetIndexes(&store.Execution{})
		if err != nil {
			return fmt.Errorf("seedrows: list indexes: %w", err)
		}
		for _, idx := range got {
			if primary, _ := idx.PrimaryKey(); !primary {
				if err := m.DropIndex(&store.Execution{}, idx.Name()); err != nil {
					return fmt.Errorf("seedrows: drop index %s: %w", idx.Name(), err)
				}
			}
		}
		start := time.Now()
		for lo := int64(0); lo < p.Rows; lo += chunk {
			hi := min(lo+chunk, p.Rows)
			if err := conn.Exec(insertSQL(dialect, p, lo, hi), p.App, p.CodePrefix).Error; err != nil {
				return fmt.Errorf("seedrows: insert rows %d..%d: %w", lo, hi, err)
			}
			logf("inserted %d/%d rows in %s", hi, p.Rows, time.Since(start).Round(time.Second))
		}
		for _, name := range indexes {
			t := time.Now()
			if err := store.CreateExecutionIndex(conn, name); err != nil {
				return fmt.Errorf("seedrows: %w", err)
			}
			logf("built index %s in %s", name, time.Since(t).Round(time.Second))
		}
		analyze := map[string]string{
			"postgres": "VACUUM (ANALYZE) xtimer_executions",
			"mysql":    "ANALYZE TABLE xtimer_executions",
			"sqlite":   "ANALYZE xtimer_executions",
		}[dialect]
		if err := conn.Exec(analyze).Error; err != nil {
			return fmt.Errorf("seedrows: %s: %w", analyze, err)
		}
		return nil
	})
}

// insertSQL generates rows lo <= n < hi on the server; its two parameters
// are p.App and p.CodePrefix. Every other value is an integer computed
// here or a constant: nothing from outside reaches the text.
func insertSQL(dialect string, p Plan, lo, hi int64) string {
	div, code, replica, gen := "/", "", "", ""
	letter := "CASE rep WHEN 0 THEN 'a' WHEN 1 THEN 'b' ELSE 'c' END"
	switch dialect {
	case "postgres":
		code = fmt.Sprintf("CAST(? AS text) || lpad(task::text, %d, '0')", p.CodeDigits)
		replica = "'replica-' || lpad(gen::text, 2, '0') || '-' || " + letter
		gen = fmt.Sprintf("SELECT n FROM generate_series(%d::bigint, %d::bigint) AS g(n)", lo, hi-1)
	case "mysql":
		div = "DIV"
		code = fmt.Sprintf("CONCAT(?, LPAD(task, %d, '0'))", p.CodeDigits)
		replica = "CONCAT('replica-', LPAD(gen, 2, '0'), '-', " + letter + ")"
		gen = fmt.Sprintf("SELECT seq AS n FROM seq_%d_to_%d", lo, hi-1) // MariaDB's SEQUENCE engine
	case "sqlite":
		code = fmt.Sprintf("? || printf('%%0%dd', task)", p.CodeDigits)
		replica = "printf('replica-%02d-', gen) || " + letter
		gen = fmt.Sprintf("WITH RECURSIVE g(n) AS (SELECT %d UNION ALL SELECT n + 1 FROM g WHERE n < %d) SELECT n FROM g", lo, hi-1)
	}
	hash := func(mul int64) string { return fmt.Sprintf("(n * %d %% 4294967296) %s 65536", mul, div) }
	r := strings.NewReplacer("{div}", div, "{code}", code, "{replica}", replica, "{gen}", gen,
		"{deploy}", fmt.Sprint(DeployEvery.Milliseconds()),
		"{h1}", hash(2654435761), "{h2}", hash(2246822519), "{h3}", hash(3266489917),
		"{T}", fmt.Sprint(p.Tasks), "{from}", fmt.Sprint(p.First().UnixMilli()), "{step}", fmt.Sprint(p.Step().Milliseconds()),
		"{R}", fmt.Sprint(Replicas))
	return r.Replace(`INSERT INTO xtimer_executions (app, task_code, run_time, status, reason, source, attempt, max_attempts,
  replica, claim, scheduled_ms, started_ms, finished_ms, lateness_ms, duration_ms, output, error, next_attempt_ms, updated_ms)
SELECT ?, {code}, rt, status, CASE status WHEN 'skipped' THEN 'overlap' ELSE '' END, source,
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
  SELECT task, rt, rep, (rt - {from}) {div} {deploy} AS gen, lat, dur,
    CASE WHEN sb < 95 THEN 'succeeded' WHEN sb < 98 THEN 'failed' WHEN sb < 99 THEN 'timed_out' ELSE 'skipped' END AS status,
    CASE WHEN so < 97 THEN 'schedule' WHEN so < 99 THEN 'retry' ELSE 'manual' END AS source
  FROM (
    SELECT task, {from} + k * {step} + (task % 60) * 1000 AS rt,
      h1 % 100 AS sb, h2 % 100 AS so, h3 % {R} AS rep, h1 % 50 AS lat, 100 + h2 % 900 AS dur
    FROM (
      SELECT n % {T} AS task, n {div} {T} AS k, {h1} AS h1, {h2} AS h2, {h3} AS h3
      FROM ({gen}) AS numbers
    ) AS hashed
  ) AS picked
) AS rowsrc`)
}
