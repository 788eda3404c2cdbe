package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The engine's side of the fire path, benchmarked so that a regression
// shows in benchstat:
//
//	go test -run '^$' -bench . -count 10 ./internal/engine > new.txt; benchstat old.txt new.txt
//
// The store's side (InsertFires, StartFires, MarkRunning, FinishAttempts)
// is in internal/store/hotpath_bench_test.go. A server that does not answer skips
// its sub-benchmarks, unless XTIMER_REQUIRE_SERVICES=1 (testsvc).

// benchEngine returns an Engine that is never started: the benchmarks
// call its planning methods directly. Its database is an unmigrated
// SQLite file that nothing here touches. mod changes its Config (a
// Locker, Workers), as Options did for the root's New.
func benchEngine(b *testing.B, mod func(*Config)) *Engine {
	b.Helper()
	return newEngine(b, setupOpts{db: testsvc.SQLite(b), app: testsvc.App(b)}, mod)
}

// BenchmarkClaimSlot claims a slot the way planSlots does (claimSlot on the
// engine's lock key, lockKey) and releases it, as the lock keeper does
// once the minute is over (keep):
//
//   - won: the slot is free; each op takes and releases a new slot, the
//     next bucket or minute (on Redis, SET NX PX then a Lua release);
//   - lost: another replica holds the slot; each op is the failed claim
//     every other replica of the fleet makes on it.
func BenchmarkClaimSlot(b *testing.B) {
	lockers := []struct {
		name string
		mod  func(b *testing.B) func(*Config)
	}{
		{"redis", func(b *testing.B) func(*Config) {
			rdb := testsvc.Redis(b)
			return func(c *Config) { c.Locker, c.LockMode = NewRedisLocker(rdb), "redis" }
		}},
		{"local", func(*testing.B) func(*Config) { return nil }},
	}
	for _, l := range lockers {
		b.Run(l.name, func(b *testing.B) {
			s := benchEngine(b, l.mod(b))
			ctx := context.Background()
			now := time.Now()
			first := now.Unix()/60 + 1
			b.Run("won", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					k := slotKey{minute: first + int64(i/s.opts.Buckets), bucket: i % s.opts.Buckets}
					i++
					st, down := &slotState{}, false
					if !s.planner.claimSlot(ctx, now, k, st, &down, nil) || down || !s.keeper.holds(k) {
						b.Fatalf("claim of free slot %+v: down %v, held %v", k, down, s.keeper.holds(k))
					}
					s.keeper.releaseAll(ctx)
				}
			})
			b.Run("lost", func(b *testing.B) {
				k := slotKey{minute: first - 2, bucket: 0} // a minute "won" never uses
				held, err := s.locker.Obtain(ctx, s.keeper.lockKey(k), time.Minute)
				require.NoError(b, err)
				b.Cleanup(func() { _ = held.Release(ctx) })
				b.ReportAllocs()
				for b.Loop() {
					st, down := &slotState{}, false
					if s.planner.claimSlot(ctx, now, k, st, &down, nil) || down {
						b.Fatalf("claim of held slot %+v: won or down (%v)", k, down)
					}
				}
			})
		})
	}
}

// BenchmarkScheduleNext computes the next fire of one schedule from its
// previous one, as the planner walks a minute. (BenchmarkNext in
// package cron covers more specs and zones.)
func BenchmarkScheduleNext(b *testing.B) {
	ny := mustZone(b, "America/New_York")
	cases := []struct {
		name, spec string
		opts       []cron.Option
	}{
		{"every_second", "* * * * * *", nil},
		{"every_5_minutes", "0 */5 * * * *", nil},
		{"weekdays_0930_new_york", "0 30 9 * * MON-FRI", []cron.Option{cron.In(ny)}},
		{"quartz_noon_last_day_of_month", "0 0 12 L * ?", []cron.Option{cron.Quartz()}},
		{"every_10s", "@every 10s", nil},
	}
	start := mustTime(b, "2026-11-30T10:00:00Z")
	for _, c := range cases {
		s, err := cron.Parse(c.spec, c.opts...)
		require.NoError(b, err, c.spec)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			at := start
			for b.Loop() {
				if at = s.Next(at); at.IsZero() {
					at = start
				}
			}
		})
	}
}

// BenchmarkFiresIn computes the fires of one minute from the tasks a
// replica holds, as planSlots does before it claims a slot (firesIn):
//
//   - slot: one bucket of the minute. planSlots does this for every open
//     slot on every tick, those it lost to another replica included (it
//     watches them, to take over if their owner dies): the same minute
//     again and again;
//   - slot_next_minute: one bucket, each op the minute after the last, as
//     a slot is planned the first time;
//   - minute: every bucket of the minute (16 by default), the work of
//     planning a minute.
//
// The tasks mix the specs and zones of cron.BenchmarkNextMillionTasks, without
// every-second tasks, or (daily) each fire once a day at its own second,
// as in the bench's distinct workload; fires/op is how many fires the op
// returned.
func BenchmarkFiresIn(b *testing.B) {
	specs := []string{"0 * * * * *", "*/10 * * * * *", "0 */5 * * * *", "0 0 9 * * MON-FRI",
		"@every 30s", "0 30 2 * * *", "0 0 L * *", "0 15 10 * * 5L"}
	zones := []string{"UTC", "Asia/Shanghai", "America/New_York", "Europe/London"}
	minute := mustTime(b, "2026-11-30T10:00:00Z").Unix() / 60
	created := mustTime(b, "2026-01-01T00:00:00Z").UnixMilli()
	for _, c := range []struct {
		tasks int
		daily bool
	}{{1000, false}, {100_000, false}, {100_000, true}, {1_000_000, true}} {
		name := fmt.Sprintf("tasks=%d", c.tasks)
		if c.daily {
			name += "/daily"
		}
		b.Run(name, func(b *testing.B) {
			s := benchEngine(b, nil)
			for i := range c.tasks {
				spec, zone := specs[i%len(specs)], zones[i/len(specs)%len(zones)]
				if c.daily {
					sec := i * 86_400 / c.tasks
					spec, zone = fmt.Sprintf("%d %d %d * * *", sec%60, sec/60%60, sec/3600), "UTC"
				}
				s.view.adoptTask(store.Task{ID: int64(i + 1), App: s.opts.App, Code: fmt.Sprintf("billing.invoice-%06d", i),
					Kind: store.KindFunc, Spec: spec, TimeZone: zone,
					Status: store.TaskActive, MaxAttempts: 1, CreatedMs: created, Version: 1})
			}
			require.Equal(b, int64(c.tasks), s.view.viewSums.Count)
			b.Run("slot", func(b *testing.B) {
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					n = len(s.view.firesIn(minute, 0, nil))
				}
				b.ReportMetric(float64(n), "fires/op")
			})
			b.Run("slot_next_minute", func(b *testing.B) {
				b.ReportAllocs()
				n, m := 0, minute
				for b.Loop() {
					n += len(s.view.firesIn(m, 0, nil))
					m++
				}
				b.ReportMetric(float64(n)/float64(m-minute), "fires/op")
			})
			b.Run("minute", func(b *testing.B) {
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					n = 0
					for bucket := range s.opts.Buckets {
						n += len(s.view.firesIn(minute, bucket, nil))
					}
				}
				b.ReportMetric(float64(n), "fires/op")
			})
		})
	}
}

// BenchmarkStartInstant starts the fires of one instant the way the
// dispatcher does at their run time, once their rows are claimed (the
// dispatch loop's begin of each claimed fire, in the attempt allocated at
// the claim), and waits until every handler has been called: each op is
// one instant of n fires of n tasks
// on a pool of 64 workers, with a handler that returns at once. It
// reports the time from the instant to the last handler's call (spread)
// and to the median one (median), the lateness the dispatcher adds to a
// steady fleet's fires. The engine is not started: its view takes the
// tasks as Start does (adoptRegistered), with their default timeout, the
// handlers' context is cancellable, as Start makes it, and the
// dispatcher's loop runs beside them, idle, woken by what wakes it in a
// replica (an attempt that ends, when fires wait for a worker); the status
// writes queue up and are taken off their queues after each instant, as
// a round of the status writer takes them, but not written.
func BenchmarkStartInstant(b *testing.B) {
	for _, n := range []int{100, 1000, 3000} {
		b.Run(fmt.Sprintf("fires=%d", n), func(b *testing.B) {
			s := benchEngine(b, func(c *Config) { c.Workers = 64 })
			s.setHandlerCtxs(context.Background())
			b.Cleanup(s.cancelHandler)
			ctx, stop := context.WithCancel(context.Background())
			looped := make(chan struct{})
			go func() { defer close(looped); s.dispatcher.loop(ctx) }()
			b.Cleanup(func() { stop(); <-looped })
			called := make([]time.Duration, n)
			var wg sync.WaitGroup
			var at time.Time
			var seq atomic.Int64
			h := func(context.Context, *Attempt) error {
				called[seq.Add(1)-1] = time.Since(at)
				wg.Done()
				return nil
			}
			rows := make([]store.Execution, n)
			for i := range rows {
				code := fmt.Sprintf("t%07d", i)
				mustRegister(b, s, code, "* * * * * *", h)
				rows[i] = store.Execution{ID: int64(i + 1), TaskCode: code, Source: store.SourceSchedule, MaxAttempts: 1}
			}
			adopt(s)
			var spread, median time.Duration
			b.ReportAllocs()
			atts := make([]*attempt, n)
			for b.Loop() {
				seq.Store(0)
				wg.Add(n)
				for i := range atts {
					atts[i] = new(attempt) // at the claim, ahead of the instant (dispatch)
				}
				at = time.Now()
				for i := range rows {
					rows[i].RunTime = at.UnixMilli()
					s.dispatcher.begin(rows[i], at, atts[i])
				}
				wg.Wait()
				s.attempts.Wait()
				slices.Sort(called)
				spread += called[n-1]
				median += called[n/2]
				s.updates.take() // as the status writer's round takes them
			}
			b.ReportMetric(float64(spread.Microseconds())/float64(b.N)/1000, "spread-ms")
			b.ReportMetric(float64(median.Microseconds())/float64(b.N)/1000, "median-ms")
			b.ReportMetric(float64(spread.Nanoseconds())/float64(b.N)/float64(n), "ns/fire")
		})
	}
}

// adopt gives the tasks registered on s the state Start gives them
// (adoptRegistered), without a database: startAttempt reads a task's
// timeout, zone and policies there.
func adopt(s *Engine) {
	s.view.mu.Lock()
	regs := slices.Collect(s.view.handlers.all())
	s.view.mu.Unlock()
	s.view.adoptRegistered(&deferredWrite{regs: regs})
}

// BenchmarkPopInstant takes the fires of one instant off the armed heap as
// the dispatcher does when their claim is due (popDueLocked), with the
// fires of the next nine instants armed behind them: the time between the
// dispatcher's wake and its claim's first check. Each op pops n fires; the
// heap is refilled outside the timer.
func BenchmarkPopInstant(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		b.Run(fmt.Sprintf("fires=%d", n), func(b *testing.B) {
			s := benchEngine(b, func(c *Config) { c.Workers = 64 })
			at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			arm := func(instant time.Time) {
				for i := range n {
					s.dispatcher.pushArmedLocked(&armedFire{due: instant, row: store.Execution{
						ID: instant.Unix()*int64(n) + int64(i), TaskCode: fmt.Sprintf("t%07d", i),
						Source: store.SourceSchedule, MaxAttempts: 1, RunTime: instant.UnixMilli()}})
				}
			}
			for k := range 10 {
				arm(at.Add(time.Duration(k) * time.Second))
			}
			b.ReportAllocs()
			for b.Loop() {
				s.dispatcher.mu.Lock()
				due := s.dispatcher.popDueLocked(at)
				s.dispatcher.mu.Unlock()
				if len(due) != n {
					b.Fatalf("popped %d fires, want %d", len(due), n)
				}
				b.StopTimer()
				arm(at.Add(10 * time.Second))
				at = at.Add(time.Second)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/fire")
		})
	}
}

// BenchmarkTakeOver is what planSlots does after it wins a slot with a
// fire in it (takeOver): give this replica the fires of the slot that
// another replica recorded and did not start (none here, the usual case:
// the last owner of the slot's lock let it run out). The bucket holds
// tasks=N tasks each firing once a day at its own second, as a million
// tasks over 16 buckets do (the bench's distinct workload); fires/op is
// how many of them fire in the minute.
func BenchmarkTakeOver(b *testing.B) {
	const tasks = 62_500
	for _, backend := range testsvc.Backends() {
		b.Run(backend.Name, func(b *testing.B) {
			db := backend.Open(b)
			require.NoError(b, store.New(db).Migrate(context.Background()))
			s := newEngine(b, setupOpts{db: db, app: testsvc.App(b)}, func(c *Config) { c.Buckets = 1 })
			created := mustTime(b, "2026-01-01T00:00:00Z").UnixMilli()
			for i := range tasks {
				sec := i * 86_400 / tasks
				s.view.adoptTask(store.Task{ID: int64(i + 1), App: s.opts.App, Code: fmt.Sprintf("tenant-%07d.report", i),
					Kind: store.KindFunc, Spec: fmt.Sprintf("%d %d %d * * *", sec%60, sec/60%60, sec/3600), TimeZone: "UTC",
					Status: store.TaskActive, MaxAttempts: 1, CreatedMs: created, Version: 1})
			}
			k := slotKey{minute: mustTime(b, "2026-11-30T10:00:00Z").Unix() / 60}
			f := s.view.firesIn(k.minute, k.bucket, nil)
			require.NotEmpty(b, f)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := s.planner.takeOver(ctx, k, k.minute*60_000, (k.minute+1)*60_000, firingCodes(f)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(f)), "fires/op")
		})
	}
}

// BenchmarkClaimFires is the tick's look for the fires it holds no timer
// for (claimFires): scheduled fires nobody runs (ClaimFires), then this
// replica's own that it does not hold (rearmOwned), each op a tick one
// second after the last, on a young table (youngTable) whose tasks the
// replica runs, as every replica of a service does.
func BenchmarkClaimFires(b *testing.B) {
	ctx := context.Background()
	s, now := youngTable(b, 0)
	for _, code := range slices.Sorted(maps.Keys(s.view.others)) {
		require.NoError(b, register(b, s, code, "* * * * * *", func(context.Context, *Attempt) error { return nil }))
	}
	require.Empty(b, s.view.others, "the replica runs every task")
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		if err := s.planner.claimFires(ctx, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRescueLost is the heartbeat's look for the runs and the claimed
// starts of replicas gone (rescueLost), each op a heartbeat interval after
// the last, with no replica gone, on a young table (youngTable) with the
// fires of the next 10 seconds recorded.
func BenchmarkRescueLost(b *testing.B) {
	ctx := context.Background()
	s, now := youngTable(b, 10)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(s.opts.HeartbeatInterval)
		if err := s.planner.rescueLost(ctx, now); err != nil {
			b.Fatal(err)
		}
	}
}

// youngTable returns an engine, never started, of 100 tasks on
// PostgreSQL, and the instant its benchmarks start at. Its executions
// table is young, as a new fleet's first minutes leave it: the tasks'
// fires of the last 1,000 seconds, this replica's, recorded, analyzed
// while all of them were scheduled (InsertFires does so on a table never
// analyzed), then settled, with no autovacuum since; the fires of the
// next ahead seconds are recorded and scheduled. PostgreSQL plans the
// reads by those statistics. The replica is the only one alive.
func youngTable(b *testing.B, ahead int) (*Engine, time.Time) {
	b.Helper()
	const codes, past = 100, 1000
	ctx := context.Background()
	db := testsvc.Postgres(b)
	require.NoError(b, store.New(db).Migrate(ctx))
	require.NoError(b, db.Exec("ALTER TABLE xtimer_executions SET (autovacuum_enabled = false)").Error)
	s := newEngine(b, setupOpts{db: db, app: testsvc.App(b)}, nil)
	for i := range codes {
		s.view.adoptTask(store.Task{ID: int64(i + 1), App: s.opts.App, Code: fmt.Sprintf("task-%03d", i),
			Kind: store.KindFunc, Spec: "* * * * * *", TimeZone: "UTC", Status: store.TaskActive, MaxAttempts: 1, Version: 1})
	}
	now := time.Now().Truncate(time.Second)
	record := func(from, to int) {
		var rows []store.Execution
		for at := from; at < to; at++ {
			for i := range codes {
				rows = append(rows, store.Execution{App: s.opts.App, TaskCode: fmt.Sprintf("task-%03d", i),
					RunTime: now.Add(time.Duration(at) * time.Second).UnixMilli(), Status: store.StatusScheduled,
					Source: store.SourceSchedule, MaxAttempts: 1, Replica: s.opts.InstanceID})
			}
		}
		for chunk := range slices.Chunk(rows, 5000) {
			_, err := s.store.InsertFires(ctx, chunk)
			require.NoError(b, err)
		}
	}
	record(-past, 0)
	require.NoError(b, db.Exec("UPDATE xtimer_executions SET status = ?, attempt = 1, started_ms = run_time, finished_ms = run_time WHERE app = ?",
		store.StatusSucceeded, s.opts.App).Error)
	record(0, ahead)
	s.planner.live, s.planner.alive = []string{s.opts.InstanceID}, []string{s.opts.InstanceID}
	return s, now
}

// BenchmarkDispatch is the dispatcher's claim round of one instant of n
// fires of n tasks (dispatch): its checks, the fence (fenceNow) and the
// claim (StartFires, on SQLite), up to the claimed fires waiting for
// their run time. Each op claims an instant recorded before the timer
// starts; the claimed fires are dropped, not started.
func BenchmarkDispatch(b *testing.B) {
	for _, n := range []int{300, 3000} {
		b.Run(fmt.Sprintf("fires=%d", n), func(b *testing.B) {
			s := benchEngine(b, func(c *Config) { c.Workers = 64 })
			ctx := context.Background()
			require.NoError(b, s.store.Migrate(ctx))
			codes := make([]string, n)
			for i := range codes {
				codes[i] = fmt.Sprintf("t%07d", i)
				mustRegister(b, s, codes[i], "* * * * * *", func(context.Context, *Attempt) error { return nil })
			}
			adopt(s)
			// A replica's pool knows its handlers' mean run (seedRunTime,
			// then its own), which sets how many fires a round claims
			// (fenceRoom): a handler that returns at once, all of them.
			s.pool.Seed(time.Millisecond)
			at := time.Now().Truncate(time.Second).Add(time.Hour)
			instant := func() []*armedFire {
				at = at.Add(time.Second)
				rows := make([]store.Execution, n)
				for i := range rows {
					rows[i] = store.Execution{App: s.opts.App, TaskCode: codes[i], RunTime: at.UnixMilli(), Status: store.StatusScheduled,
						Source: store.SourceSchedule, MaxAttempts: 1, Replica: s.opts.InstanceID}
				}
				got, err := s.store.InsertFires(ctx, rows)
				require.NoError(b, err)
				due := make([]*armedFire, len(got))
				for i, r := range got {
					due[i] = &armedFire{row: r, due: at}
				}
				return due
			}
			d := s.dispatcher
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				due := instant()
				b.StartTimer()
				d.dispatch(ctx, due, at.Add(-time.Second), at.Add(-time.Second))
				b.StopTimer()
				if d.claimed.Len() != n {
					b.Fatalf("%d fires claimed, want %d", d.claimed.Len(), n)
				}
				d.claimed = d.claimed[:0]
				b.StartTimer()
			}
		})
	}
}

// BenchmarkRecord records the fires of one instant of n every-second
// tasks as the planner records a chunk of a slot it won (record): their
// rows built (appendRows), inserted (InsertFires, SQLite) and armed. The
// fires come from the view (firesIn of every bucket); each op is the
// next instant, and the armed fires are taken off outside the timer.
func BenchmarkRecord(b *testing.B) {
	for _, n := range []int{300, 3000} {
		b.Run(fmt.Sprintf("fires=%d", n), func(b *testing.B) {
			s := benchEngine(b, nil)
			ctx := context.Background()
			require.NoError(b, s.store.Migrate(ctx))
			for i := range n {
				mustRegister(b, s, fmt.Sprintf("t%07d", i), "* * * * * *", func(context.Context, *Attempt) error { return nil })
			}
			adopt(s)
			minute := time.Now().Add(time.Hour).Unix() / 60
			var instants [][]fire // the minute's fires, an instant each
			next := func() []fire {
				if len(instants) == 0 {
					minute++
					var all []fire
					for bucket := range s.opts.Buckets {
						all = append(all, s.view.firesIn(minute, bucket, nil)...)
					}
					slices.SortStableFunc(all, func(a, b fire) int { return a.at.Compare(b.at) })
					for len(all) > 0 {
						i := 1
						for i < len(all) && all[i].at.Equal(all[0].at) {
							i++
						}
						instants, all = append(instants, all[:i]), all[i:]
					}
				}
				f := instants[0]
				instants = instants[1:]
				return f
			}
			d := s.dispatcher
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				fires := next()
				now := fires[0].at.Add(-5 * time.Second)
				b.StartTimer()
				if _, err := s.planner.record(ctx, now, fires); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				d.mu.Lock()
				armed := len(d.popDueLocked(fires[0].at.Add(time.Hour)))
				d.mu.Unlock()
				if armed != n {
					b.Fatalf("%d fires armed, want %d", armed, n)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkStatusFlush is one round of the status writer (statusWriter)
// for an instant of n quick fires: each started and ended within the
// round, queued (started, finished) and written as one update per fire
// (flush, MarkRunning on SQLite). Each op writes an instant claimed
// before the timer starts.
func BenchmarkStatusFlush(b *testing.B) {
	for _, n := range []int{300, 3000} {
		b.Run(fmt.Sprintf("fires=%d", n), func(b *testing.B) {
			s := benchEngine(b, nil)
			ctx := context.Background()
			require.NoError(b, s.store.Migrate(ctx))
			q := s.updates
			at := time.Now().Truncate(time.Second).Add(time.Hour)
			instant := func() []store.Execution {
				at = at.Add(time.Second)
				rows := make([]store.Execution, n)
				for i := range rows {
					rows[i] = store.Execution{App: s.opts.App, TaskCode: fmt.Sprintf("t%07d", i), RunTime: at.UnixMilli(),
						Status: store.StatusScheduled, Source: store.SourceSchedule, MaxAttempts: 1, Replica: s.opts.InstanceID}
				}
				got, err := s.store.InsertFires(ctx, rows)
				require.NoError(b, err)
				ids := make([]int64, len(got))
				for i, r := range got {
					ids[i] = r.ID
				}
				started, err := s.store.StartFires(ctx, s.opts.App, ids, s.opts.InstanceID, at.UnixMilli())
				require.NoError(b, err)
				require.Len(b, started, n)
				return got
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				rows := instant()
				b.StartTimer()
				for _, r := range rows {
					q.started(r, at)
					q.finished(store.Finish{ID: r.ID, Attempt: 1, Result: store.Result{Status: store.StatusSucceeded,
						Output: "ok", FinishedMs: at.UnixMilli() + 1}})
				}
				require.NoError(b, q.flush(ctx))
			}
			b.StopTimer()
			var left int64
			require.NoError(b, s.store.DB().Model(&store.Execution{}).Where("app = ? AND status <> ?", s.opts.App, store.StatusSucceeded).
				Count(&left).Error)
			require.Zero(b, left, "every fire written as succeeded")
		})
	}
}
