package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/xtimer-go/xtimer/internal/seedrows"
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
// (internal/seedrows, as internal/pagingbench does: it builds the indexes
// after the rows, vacuums and analyzes, what autovacuum would have done by
// then), rolls up the days before the newest row's (rollUpHistory), and
// stops the database cleanly. That cluster is then the
// template every run with that history is copied from (cp -a of a few
// GB: seconds, not the minutes of seeding).
//
// The rows: app "bench" (xtimer.go's App), tasks taskCode(0) to
// taskCode(historyTasks-1), the steady workload's 1,000 tasks and the
// first 1,000 of every throughput step, the fires of a task whole seconds
// apart, all in the historySpan that ends historyGap before the seeding:
// inside the engine's default Retention (30 days), so the sweeper deletes
// none of them during a run, and in the past, so that no fire of the run
// has the (task, run_time) of a seeded row. Final statuses only, mixed as
// internal/seedrows mixes them.
const (
	historyTasks = 1000
	historySpan  = 28 * 24 * time.Hour
	historyGap   = time.Hour // between the newest seeded row and the seeding
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
	h, err := newHistoryPlan(rows, now)
	if err != nil {
		return err
	}
	db, err := openSQL(kind, dsn)
	if err != nil {
		return err
	}
	defer closeSQL(db)
	ctx := context.Background()
	st := store.New(db, store.WithQueryTimeout(10*time.Minute))
	if err = st.Migrate(ctx); err != nil {
		return err
	}
	if err := seedrows.Seed(ctx, db, h, nil); err != nil {
		return err
	}
	if err := rollUpHistory(ctx, st, h); err != nil {
		return err
	}
	if kind == "postgres" {
		// What the clean stop writes then is little: the copies start
		// sooner.
		if err := db.Exec("CHECKPOINT").Error; err != nil {
			return fmt.Errorf("CHECKPOINT: %w", err)
		}
	}
	return nil
}

// rollUpHistory rolls up every seeded day before the newest row's, as the
// retention sweep of an app that has run for weeks has, one day at a time
// (internal/engine/retention.go rolls a day up once CatchUpHorizon, an hour
// by default, has passed since its end; the newest row is historyGap, an
// hour, before the seeding). Without it the run's first sweep would roll up
// four weeks at once inside the measured window, which only the first
// start of a version with roll-ups on an old table does.
func rollUpHistory(ctx context.Context, st *store.Store, h seedrows.Plan) error {
	newest := store.DayOf(h.To.Add(-time.Second).UnixMilli())
	for day := store.DayOf(h.From.UnixMilli()); day < newest; day++ {
		if _, err := st.RollupDay(ctx, h.App, day); err != nil {
			return err
		}
	}
	return nil
}

// newHistoryPlan is the seeded table of rows rows ending historyGap before
// now: of historyTasks tasks, named as the runs name theirs (taskCode).
func newHistoryPlan(rows int64, now time.Time) (seedrows.Plan, error) {
	to := now.Truncate(time.Second).Add(-historyGap)
	h := seedrows.Plan{App: "bench", CodePrefix: "t", CodeDigits: 7, Tasks: historyTasks, Rows: rows,
		From: to.Add(-historySpan), To: to}
	if rows < 1 {
		return seedrows.Plan{}, fmt.Errorf("-history %d: want a positive row count", rows)
	}
	if err := h.Validate(); err != nil {
		return seedrows.Plan{}, fmt.Errorf("-history %d: %w", rows, err)
	}
	return h, nil
}

// checkHistory verifies that the run's database holds the seeded history
// (PostgreSQL's estimate or MariaDB's, exact enough to tell N rows from
// none, the newest row in the past, and the days before it rolled up)
// without counting N rows.
func checkHistory(svc *services, rows int64) error {
	kind, dsn := svc.database()
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
	// A day's marker is its roll-up row with no task (internal/store/rollup.go).
	var days int64
	if err := db.Raw("SELECT COUNT(*) FROM xtimer_rollups WHERE app = 'bench' AND task_code = ''").Scan(&days).Error; err != nil {
		return fmt.Errorf("count the rolled-up days: %w", err)
	}
	if want := int64(historySpan/(24*time.Hour)) - 1; days < want {
		return fmt.Errorf("want at least %d seeded days rolled up, %d are", want, days)
	}
	return nil
}
