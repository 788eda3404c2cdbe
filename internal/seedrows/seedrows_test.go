package seedrows_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/xtimer-go/xtimer/internal/seedrows"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// plan is 1,000 rows of 70 tasks (more than the 60 offsets, and not a
// multiple of the rows: the last 50 tasks fire once less) over five days.
func plan() seedrows.Plan {
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	return seedrows.Plan{App: "seeded", CodePrefix: "job-", CodeDigits: 3, Tasks: 70, Rows: 1000,
		From: from, To: from.Add(5 * 24 * time.Hour)}
}

// Seed's session settings (no durability, no unique checks) stay on its
// own connection while it runs: the pool gets the connection back with the
// server's defaults.
func TestSeedPutsItsSessionSettingsBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		open  func(testing.TB) *gorm.DB
		query string
	}{
		{"postgres", testsvc.Postgres, "SELECT current_setting('synchronous_commit') || ' ' || current_setting('maintenance_work_mem')"},
		{"mysql", testsvc.MySQL, "SELECT CONCAT(@@SESSION.unique_checks, ' ', @@SESSION.foreign_key_checks)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := c.open(t)
			sqlDB, err := db.DB()
			require.NoError(t, err)
			sqlDB.SetMaxOpenConns(1) // the pool's one connection is Seed's
			require.NoError(t, store.New(db).Migrate(ctx))
			var want string // the server's defaults
			require.NoError(t, db.Raw(c.query).Scan(&want).Error)
			require.NoError(t, seedrows.Seed(ctx, db, plan(), nil))
			var got string
			require.NoError(t, db.Raw(c.query).Scan(&got).Error)
			require.Equal(t, want, got)
		})
	}
}

func TestSeedWritesTheRowsOfThePlan(t *testing.T) {
	t.Parallel()
	for _, backend := range testsvc.Backends() {
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := backend.Open(t)
			require.NoError(t, store.New(db).Migrate(ctx))
			p := plan()
			require.NoError(t, seedrows.Seed(ctx, db, p, t.Logf))

			var n int64
			require.NoError(t, db.Model(&store.Execution{}).Where("app = ?", p.App).Count(&n).Error)
			require.Equal(t, p.Rows, n)

			var tasks []struct {
				TaskCode       string
				N, RunTimes    int64
				Oldest, Newest int64
			}
			require.NoError(t, db.Model(&store.Execution{}).Where("app = ?", p.App).
				Select("task_code, COUNT(*) AS n, COUNT(DISTINCT run_time) AS run_times, MIN(run_time) AS oldest, MAX(run_time) AS newest").
				Group("task_code").Order("task_code").Scan(&tasks).Error)
			require.Len(t, tasks, p.Tasks)
			for i, task := range tasks {
				require.Equal(t, p.TaskCode(i), task.TaskCode)
				want := int64(15) // 1,000 rows of 70 tasks: 20 fire 15 times, 50 fire 14
				if i >= 20 {
					want = 14
				}
				require.Equal(t, want, task.N, "rows of %s", task.TaskCode)
				require.Equal(t, task.N, task.RunTimes, "run_times of %s are distinct", task.TaskCode)
				require.GreaterOrEqual(t, task.Oldest, p.From.UnixMilli(), "oldest of %s", task.TaskCode)
				require.Less(t, task.Newest, p.To.UnixMilli(), "newest of %s", task.TaskCode)
			}
			require.Equal(t, p.First().UnixMilli(), tasks[0].Oldest)
			require.Equal(t, p.First().Add(14*p.Step()+19*time.Second).UnixMilli(), tasks[19].Newest)
			require.Greater(t, tasks[59].Newest, p.To.Add(-p.Step()-time.Minute).UnixMilli(), "the rows fill the range")

			var replicas []string
			require.NoError(t, db.Model(&store.Execution{}).Where("app = ?", p.App).Distinct("replica").Pluck("replica", &replicas).Error)
			names := map[string]bool{}
			for gen := range p.Generations() {
				for i := range seedrows.Replicas {
					names[seedrows.ReplicaName(gen, i)] = true
				}
			}
			for _, r := range replicas {
				require.True(t, names[r], "replica %q is one of the plan's", r)
			}

			want, err := store.ExecutionIndexes(db)
			require.NoError(t, err)
			for _, name := range want {
				require.True(t, db.Migrator().HasIndex(&store.Execution{}, name), "index %s built again", name)
			}
		})
	}
}

func TestSeedRefusesABadPlan(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	require.NoError(t, store.New(db).Migrate(context.Background()))
	for _, c := range []struct {
		name string
		edit func(p *seedrows.Plan)
		want string
	}{
		{"no tasks", func(p *seedrows.Plan) { p.Tasks = 0 }, "Tasks 0"},
		{"negative rows", func(p *seedrows.Plan) { p.Rows = -5 }, "Rows -5"},
		{"no app", func(p *seedrows.Plan) { p.App = "" }, `App ""`},
		{"too few digits", func(p *seedrows.Plan) { p.CodeDigits = 1 }, "CodeDigits 1"},
		{"range backwards", func(p *seedrows.Plan) { p.To = p.From.Add(-time.Hour) }, "From 2026-03-01T00:00:00Z, To 2026-02-28T23:00:00Z"},
		{"too many rows", func(p *seedrows.Plan) { p.Rows = 1e9 }, "Rows 1000000000: at most 30235870 rows"},
		{"offsets beyond the range", func(p *seedrows.Plan) { p.To = p.From.Add(30 * time.Second) }, "Rows 1000: at most 0 rows"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plan()
			c.edit(&p)
			require.ErrorContains(t, p.Validate(), c.want)
			require.ErrorContains(t, seedrows.Seed(context.Background(), db, p, nil), c.want)
		})
	}
	var n int64
	require.NoError(t, db.Model(&store.Execution{}).Count(&n).Error)
	require.Zero(t, n, "a bad plan writes nothing")
}

// renamed is a dialector of a database Seed has no SQL for.
type renamed struct{ gorm.Dialector }

func (renamed) Name() string { return "oracle" }

func TestSeedRefusesAnUnknownDialect(t *testing.T) {
	t.Parallel()
	db, err := gorm.Open(renamed{sqlite.Open(filepath.Join(t.TempDir(), "x.db"))}, &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	require.ErrorContains(t, seedrows.Seed(context.Background(), db, plan(), nil), `dialect "oracle"`)
}
