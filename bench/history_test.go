package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The history condition starts each run from a database whose seeded days
// are rolled up, as a live app's retention sweep leaves them: the roll-ups
// count every execution of those days, and the newest row's day is left
// to the run's sweep.
func TestSeededHistoryHasItsDaysRolledUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts services and seeds a database")
	}
	const rows = 20_000
	for _, backend := range []string{"postgres", "mariadb"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			pg := backend == "postgres"
			if pg {
				openToPostgres(t, dir)
			}
			svc, err := startServices(&templates{root: dir}, dir, pg, !pg, false, rows)
			if err != nil {
				t.Fatalf("services with %d rows of history: %v", rows, err)
			}
			t.Cleanup(svc.close)
			if err = checkHistory(svc, rows); err != nil {
				t.Fatal(err)
			}
			db, err := openSQL(svc.database())
			if err != nil {
				t.Fatal(err)
			}
			defer closeSQL(db)
			var newest int64
			if err := db.Raw("SELECT MAX(run_time) FROM xtimer_executions").Scan(&newest).Error; err != nil {
				t.Fatal(err)
			}
			newestDay := store.DayOf(newest)
			dayStart := store.DayStartMs(newestDay)
			var before, counted, lastDay int64
			if err := db.Raw("SELECT COUNT(*) FROM xtimer_executions WHERE run_time < ?", dayStart).Scan(&before).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Raw("SELECT COALESCE(SUM(count), 0) FROM xtimer_rollups WHERE task_code <> ''").Scan(&counted).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Raw("SELECT COALESCE(MAX(day), 0) FROM xtimer_rollups").Scan(&lastDay).Error; err != nil {
				t.Fatal(err)
			}
			if before == 0 || counted != before {
				t.Fatalf("roll-ups count %d executions, the days before the newest row's hold %d", counted, before)
			}
			if want := newestDay - 1; lastDay != want {
				t.Fatalf("last day rolled up %d, want %d, the day before the newest row's", lastDay, want)
			}
		})
	}
}

// With XTIMER_BENCH_PGSTATS=1 a run's PostgreSQL counts its statements,
// and the run writes the costliest into its directory as it ends; any
// other value than 1 is refused, naming the variable.
func TestPGStatsWritesTheCostliestStatements(t *testing.T) {
	if testing.Short() {
		t.Skip("starts services")
	}
	dir := t.TempDir()
	openToPostgres(t, dir)
	t.Setenv(pgStatsEnv, "yes")
	if _, err := pgStats(); err == nil || !strings.Contains(err.Error(), pgStatsEnv+`="yes"`) {
		t.Fatalf("%s=yes: got %v, want an error naming it", pgStatsEnv, err)
	}
	t.Setenv(pgStatsEnv, "1")
	on, err := pgStats()
	if err != nil || !on {
		t.Fatalf("%s=1: got %v, %v, want on", pgStatsEnv, on, err)
	}
	svc, err := startServices(&templates{root: dir, pgStats: on}, dir, true, false, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	db, err := openSQL("postgres", svc.pgURL)
	if err != nil {
		svc.close()
		t.Fatal(err)
	}
	for range 3 {
		if err = db.Exec("SELECT pg_sleep(0.01) AS xtimer_pgstats_probe").Error; err != nil {
			break
		}
	}
	closeSQL(db)
	svc.close()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, pgStatsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "calls\ttotal_ms\trows\tshared_hit\tshared_read\tquery" {
		t.Fatalf("header %q", lines[0])
	}
	for _, l := range lines[1:] {
		if f := strings.Split(l, "\t"); len(f) == 6 && f[0] == "3" && strings.Contains(f[5], "xtimer_pgstats_probe") {
			return
		}
	}
	t.Fatalf("no line of the probe, called 3 times, in %s:\n%s", pgStatsFile, b)
}
