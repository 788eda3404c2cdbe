package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/seedrows"
	"github.com/xtimer-go/xtimer/internal/store"
)

// The seeded history (internal/seedrows): one app, taskCount tasks
// ("task-0000"...), each firing every step over spanMs. Tasks fire on
// whole seconds and those with the same number modulo 60 fire at the same
// instants, so ~17 rows share every run_time, as with cron tasks scheduled
// at the same minute: the id tiebreak of the paging order is exercised
// everywhere.
//
// Three replicas run at any time, and a deploy every two days replaces
// them: replica IDs are per process (host-pid-random), so most replicas a
// console filters on have rows only in some old two days.
const (
	benchApp  = "paging"
	taskCount = 1000
	spanMs    = 60 * 24 * 3600 * 1000
	replicas  = seedrows.Replicas
)

// seedVersion changes whenever seedrows generates different rows, so that
// -reuse does not keep a table seeded the old way.
const seedVersion = 3

// baseMs is the first run time: 2025-01-01 00:00:00 UTC.
var baseMs = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// plan is what a seeded table holds; measure derives its random tasks,
// days and cursors from it.
type plan struct {
	seed seedrows.Plan
	rows int64
	// Every run_time is in [fromMs, toMs).
	fromMs, toMs int64
}

// history is the seeded app and its tasks, without the rows.
var history = seedrows.Plan{App: benchApp, CodePrefix: "task-", CodeDigits: 4, Tasks: taskCount}

func newPlan(rows int64) (plan, error) {
	sp := history
	sp.Rows, sp.From, sp.To = rows, time.UnixMilli(baseMs), time.UnixMilli(baseMs+spanMs)
	// A step of a minute or more keeps a task's fires apart from the
	// offsets of the others.
	if rows < 1 || sp.Validate() != nil || sp.Step() < time.Minute {
		return plan{}, fmt.Errorf("-rows %d: want 1 to %d", rows, int64(taskCount)*spanMs/60_000)
	}
	return plan{seed: sp, rows: rows, fromMs: baseMs, toMs: baseMs + spanMs}, nil
}

// taskCode names task i of the seeded app.
func taskCode(i int) string { return history.TaskCode(i) }

// generations is the number of replica sets over the history.
func (p plan) generations() int { return p.seed.Generations() }

// replicaName names replica i of generation gen.
func replicaName(gen, i int) string { return seedrows.ReplicaName(gen, i) }

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
	for _, stmt := range []string{"DELETE FROM pagingbench_seeded", "DELETE FROM xtimer_executions", "DELETE FROM xtimer_rollups"} {
		if err := db.WithContext(ctx).Exec(stmt).Error; err != nil {
			return 0, fmt.Errorf("%s: %w", stmt, err)
		}
	}
	if err := seedrows.Seed(ctx, db, p.seed, logf); err != nil {
		return 0, err
	}
	if err := db.WithContext(ctx).Exec("INSERT INTO pagingbench_seeded (fingerprint) VALUES (?)", fingerprint).Error; err != nil {
		return 0, fmt.Errorf("record the seeding: %w", err)
	}
	return time.Since(start), nil
}

// dropStaleIndexes drops the indexes of xtimer_executions that Migrate no
// longer makes (store.ExecutionIndexes names those it makes), so that a
// reused table is measured with exactly the current indexes.
func dropStaleIndexes(ctx context.Context, db *gorm.DB) error {
	want, err := store.ExecutionIndexes(db)
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
		logf("dropping index %s, which Migrate no longer makes", idx.Name())
		if err := m.DropIndex(&store.Execution{}, idx.Name()); err != nil {
			return fmt.Errorf("drop index %s: %w", idx.Name(), err)
		}
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
