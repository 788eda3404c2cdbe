package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The store's side of the fire path, benchmarked on every backend so that
// a regression shows in benchstat:
//
//	go test -run '^$' -bench . -count 10 ./internal/store/ > new.txt; benchstat old.txt new.txt
//
// A server that does not answer skips its sub-benchmarks, unless
// XTIMER_REQUIRE_SERVICES=1 (testsvc). One op is one call, whatever its
// batch size: divide by fires=N for the cost of one fire.

// benchReplica owns the fires the benchmarks record, as the replica that
// recorded them would.
const benchReplica = "bench-host-4242-a1b2c3"

// benchDB is one migrated backend shared by the sub-benchmarks under it.
type benchDB struct {
	ctx   context.Context
	store *store.Store
	app   string
	// minute is the start of the next minute no fire was recorded in,
	// Unix ms: every batch gets its own, so the unique key never conflicts
	// and each call inserts all its rows.
	minute int64
}

// eachBenchDB runs body once per backend, on a fresh database.
func eachBenchDB(b *testing.B, body func(b *testing.B, d *benchDB)) {
	for _, backend := range testsvc.Backends() {
		b.Run(backend.Name, func(b *testing.B) {
			d := &benchDB{ctx: context.Background(), store: store.New(backend.Open(b)), app: testsvc.App(b), minute: t0}
			require.NoError(b, d.store.Migrate(d.ctx))
			body(b, d)
		})
	}
}

// batch returns n fires as the planner records them: up to 100 tasks of
// one bucket, each firing evenly through one minute. Fill sets their run
// times in a fresh minute.
func (d *benchDB) batch(n int) benchBatch {
	tasks := min(n, 100)
	perTask := (n + tasks - 1) / tasks
	step := int64(60_000 / perTask)
	rows := make([]store.Execution, n)
	offsets := make([]int64, n)
	for j := range rows {
		rows[j] = store.Execution{App: d.app, TaskCode: fmt.Sprintf("billing.invoice-%03d", j%tasks),
			Status: store.StatusScheduled, Source: store.SourceSchedule, MaxAttempts: 3, Replica: benchReplica}
		offsets[j] = int64(j/tasks) * step
	}
	return benchBatch{d: d, rows: rows, offsets: offsets}
}

type benchBatch struct {
	d       *benchDB
	rows    []store.Execution
	offsets []int64 // of each row's run time in its minute
}

// fill moves the batch to a minute none of its fires exist in yet. It
// rewrites the rows in place: InsertFires keeps no reference to them.
func (bb benchBatch) fill() []store.Execution {
	for j := range bb.rows {
		bb.rows[j].RunTime = bb.d.minute + bb.offsets[j]
	}
	bb.d.minute += 60_000
	return bb.rows
}

// recorded inserts count fires, owned by benchReplica, and returns their
// IDs in groups of n, the unit a benchmark op works on.
func (d *benchDB) recorded(b *testing.B, count, n int) [][]int64 {
	b.Helper()
	var ids []int64
	full := d.batch(min(count, 1000))
	for len(ids) < count {
		rows, err := d.store.InsertFires(d.ctx, full.fill()[:min(count-len(ids), len(full.rows))])
		require.NoError(b, err)
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
	}
	groups := make([][]int64, 0, count/n)
	for len(ids) >= n {
		groups, ids = append(groups, ids[:n:n]), ids[n:]
	}
	return groups
}

// started is recorded, with every fire claimed by benchReplica at
// startedMs (StartFires), ready for MarkRunning.
func (d *benchDB) started(b *testing.B, count, n int, startedMs int64) [][]int64 {
	b.Helper()
	groups := d.recorded(b, count, n)
	for _, ids := range groups {
		got, err := d.store.StartFires(d.ctx, d.app, ids, benchReplica, startedMs)
		require.NoError(b, err)
		require.Len(b, got, len(ids))
	}
	return groups
}

// analyze refreshes the planner's statistics of the executions table, as
// autovacuum would have by the time a table holds that many rows. Without
// it PostgreSQL plans StartFires on the just-filled table with the
// statistics of an empty one (a scan of the status index, not the primary
// key: much slower), or not, depending on whether autovacuum came
// round yet, and the figures swing from run to run.
func (d *benchDB) analyze(b *testing.B) {
	b.Helper()
	db := d.store.DB()
	sql := "ANALYZE xtimer_executions" // PostgreSQL and SQLite
	if db.Dialector.Name() == "mysql" {
		sql = "ANALYZE TABLE xtimer_executions"
	}
	require.NoError(b, db.WithContext(d.ctx).Exec(sql).Error)
}

// BenchmarkInsertFires records batches of fires, each in a minute of its
// own, as the planner does for a slot (at most recordChunk, 1,000, rows a
// call). The table grows by b.N batches during the run.
func BenchmarkInsertFires(b *testing.B) {
	eachBenchDB(b, func(b *testing.B, d *benchDB) {
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("fires=%d", n), func(b *testing.B) {
				bb := d.batch(n)
				b.ReportAllocs()
				for b.Loop() {
					got, err := d.store.InsertFires(d.ctx, bb.fill())
					if err != nil || len(got) != n {
						b.Fatalf("InsertFires of %d fires: %d inserted, err %v", n, len(got), err)
					}
				}
			})
		}
	})
}

// BenchmarkStartFires measures the writes that start a recorded fire, each
// its own round trip (or transaction) on the database:
//
//   - claim: StartFires, the conditional update that fences a fire before
//     its handler starts; it is on the fire path, so its latency is the
//     fire's;
//   - mark_running: MarkRunning, the batched move to running that follows
//     off the fire path;
//   - mark_running_finished: MarkRunning of a first attempt that ended
//     before the batch was written, start and result in one update (the
//     usual case for a handler shorter than the 50ms batching);
//   - finish_attempts: FinishAttempts, the result of an attempt that was
//     marked running before it ended.
//
// Rows are prepared, and the table analyzed, before the timer starts: b.N
// batches of each size.
func BenchmarkStartFires(b *testing.B) {
	// After every fire's run time (StartFires records the later of the
	// two as the start, which MarkRunning then matches); nothing here
	// checks lateness.
	startedMs := t0 + 365*24*3600*1000
	eachBenchDB(b, func(b *testing.B, d *benchDB) {
		for _, n := range []int{1, 100, 3000} {
			b.Run(fmt.Sprintf("claim/fires=%d", n), func(b *testing.B) {
				groups := d.recorded(b, b.N*n, n)
				d.analyze(b)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					got, err := d.store.StartFires(d.ctx, d.app, groups[i], benchReplica, startedMs)
					if err != nil || len(got) != n {
						b.Fatalf("StartFires of %d fires: %d started, err %v", n, len(got), err)
					}
				}
			})
		}
		for _, n := range []int{1, 100} {
			b.Run(fmt.Sprintf("mark_running/fires=%d", n), func(b *testing.B) {
				benchMarkRunning(b, d, n, startedMs, nil)
			})
		}
		for _, n := range []int{1, 100, 3000} {
			b.Run(fmt.Sprintf("mark_running_finished/fires=%d", n), func(b *testing.B) {
				benchMarkRunning(b, d, n, startedMs, &store.Result{Status: store.StatusSucceeded, Output: "ok", FinishedMs: startedMs + 25})
			})
		}
		for _, n := range []int{1, 100, 3000} {
			b.Run(fmt.Sprintf("finish_attempts/fires=%d", n), func(b *testing.B) {
				groups := d.started(b, b.N*n, n, startedMs)
				for _, ids := range groups {
					benchMustMarkRunning(b, d, benchStarts(ids, startedMs, nil))
				}
				finishes := make([][]store.Finish, len(groups))
				for i, ids := range groups {
					finishes[i] = make([]store.Finish, len(ids))
					for j, id := range ids {
						finishes[i][j] = store.Finish{ID: id, Attempt: 1,
							Result: store.Result{Status: store.StatusSucceeded, Output: "ok", FinishedMs: startedMs + 25}}
					}
				}
				d.analyze(b)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					oks, err := d.store.FinishAttempts(d.ctx, finishes[i])
					if err != nil || !benchAll(oks) {
						b.Fatalf("FinishAttempts of %d attempts: %v, err %v", n, oks, err)
					}
				}
			})
		}
	})
}

// benchMarkRunning times MarkRunning of b.N batches of n claimed fires,
// with result fin when not nil.
func benchMarkRunning(b *testing.B, d *benchDB, n int, startedMs int64, fin *store.Result) {
	groups := d.started(b, b.N*n, n, startedMs)
	starts := make([][]store.Start, len(groups))
	for i, ids := range groups {
		starts[i] = benchStarts(ids, startedMs, fin)
	}
	d.analyze(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		oks, err := d.store.MarkRunning(d.ctx, starts[i])
		if err != nil || !benchAll(oks) {
			b.Fatalf("MarkRunning of %d fires: %v, err %v", n, oks, err)
		}
	}
}

func benchStarts(ids []int64, startedMs int64, fin *store.Result) []store.Start {
	starts := make([]store.Start, len(ids))
	for j, id := range ids {
		starts[j] = store.Start{ID: id, Replica: benchReplica, StartedMs: startedMs, Finish: fin}
	}
	return starts
}

func benchMustMarkRunning(b *testing.B, d *benchDB, starts []store.Start) {
	b.Helper()
	oks, err := d.store.MarkRunning(d.ctx, starts)
	require.NoError(b, err)
	require.True(b, benchAll(oks), "MarkRunning: %v", oks)
}

func benchAll(oks []bool) bool {
	for _, ok := range oks {
		if !ok {
			return false
		}
	}
	return true
}

// BenchmarkRegisterTasks is a replica's first Start writing the rows of
// its app's tasks (RegisterTasks into an empty app), each op a new app:
//
//   - shared: every task with the same definition (one spec);
//   - distinct: every task its own daily time, "S M H * * *" spread over
//     the day as the bench's distinct workload has them (86,400 specs for
//     86,400 tasks or more), the definition otherwise shared.
//
// tasks/op rows are inserted per op; divide for the cost of one.
func BenchmarkRegisterTasks(b *testing.B) {
	const tasks = 20_000
	eachBenchDB(b, func(b *testing.B, d *benchDB) {
		for _, distinct := range []bool{false, true} {
			name := "shared"
			if distinct {
				name = "distinct"
			}
			b.Run(name, func(b *testing.B) {
				defs := make([]store.TaskDef, tasks)
				byspec := map[string]*store.Definition{}
				for i := range defs {
					spec := "0 0 3 * * *"
					if distinct {
						sec := i * 86_400 / tasks
						spec = fmt.Sprintf("%d %d %d * * *", sec%60, sec/60%60, sec/3600)
					}
					def := byspec[spec]
					if def == nil {
						def = &store.Definition{Spec: spec, TimeoutMs: 60_000}
						byspec[spec] = def
					}
					defs[i] = store.TaskDef{Code: fmt.Sprintf("tenant-%07d.report", i), Name: fmt.Sprintf("tenant-%07d.report", i), Def: def}
				}
				b.ReportAllocs()
				for b.Loop() {
					// An app of its own each op: the same app's tasks would
					// be found registered already (the digest).
					if _, err := d.store.RegisterTasks(d.ctx, testsvc.App(b), defs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(tasks, "tasks/op")
			})
		}
	})
}

// BenchmarkTakeOverFires takes over one slot's fires in a table where
// other slots' fires fill the slot's time range, as at a fleet's start:
// 10,000 tasks in 16 buckets firing every second, 5 s of them recorded,
// and a slot won with nothing in it to take over (its own replica holds
// them). One op is one TakeOverFires call for the bucket's 625 codes.
// stats=young plans on the statistics of the table's first 2,000 rows,
// as PostgreSQL does until its table is analyzed again; stats=fresh on
// those of the whole table. PostgreSQL only: the others plan each
// statement anew.
func BenchmarkTakeOverFires(b *testing.B) {
	eachBenchDB(b, func(b *testing.B, d *benchDB) {
		db := d.store.DB().WithContext(d.ctx)
		if db.Dialector.Name() != "postgres" {
			b.Skip("PostgreSQL's cached plans")
		}
		require.NoError(b, db.Exec("ALTER TABLE xtimer_executions SET (autovacuum_enabled = false)").Error)
		const tasks, buckets, seconds = 10_000, 16, 5
		fill := func(from, to int) { // rows from..to-1 of tasks × seconds, each task's seconds in a row
			require.NoError(b, db.Exec(`INSERT INTO xtimer_executions (app, task_code, run_time, status, replica, output, error, max_attempts)
				SELECT ?, 'task-' || lpad((g / ?)::text, 5, '0'), ?::bigint + (g % ?) * 1000, 'scheduled', ?, '', '', 1
				FROM generate_series(?::int, ?::int) g`, d.app, seconds, t0, seconds, benchReplica, from, to-1).Error)
		}
		codes := make([]string, 0, tasks/buckets)
		for i := 0; i < tasks; i += buckets {
			codes = append(codes, fmt.Sprintf("task-%05d", i))
		}
		fill(0, 2000)
		d.analyze(b)
		fill(2000, tasks*seconds)
		for _, stats := range []string{"young", "fresh"} {
			if stats == "fresh" {
				d.analyze(b)
			}
			b.Run("stats="+stats, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					rows, _, err := d.store.TakeOverFires(d.ctx, d.app, codes, t0, t0+60_000, benchReplica)
					require.NoError(b, err)
					require.Empty(b, rows)
				}
			})
		}
	})
}
