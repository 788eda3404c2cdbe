package main

// With -retention the bench measures xtimer's retention sweep on a large
// table instead of paging:
//
//	go run ./internal/pagingbench -retention -db postgres -rows 5000000
//	go run ./internal/pagingbench -retention -db mysql -rows 5000000
//
// It seeds -rows executions (seed.go; every one is from early 2025, so
// older than the default 30-day retention) in a database of its own,
// xtimer_retention, always afresh. Then a scheduler with 50 Go tasks
// firing every second runs for -before with retention off, and is
// replaced by one with retention on (RetentionInterval 1s), which runs
// until its first sweep has deleted everything. It prints the time of the
// sweep, the rows deleted per second, and the tasks' lateness (start minus
// planned instant) p50/p99/max before and during the sweep. The sweep
// rolls up the seeded days first (roll-ups are on by default; the time of
// the sweep includes them), and the bench checks that the roll-ups count
// every row it deleted.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/xtimer-go/xtimer"
)

const retentionTasks = 50

func runRetention(backend string, rows int64) error {
	ctx := context.Background()
	db, _, _, took, err := prepare(ctx, backend, retentionDB, false, rows)
	if err != nil {
		return err
	}
	defer closeDB(db)
	logf("seeded %d rows in %s", rows, took.Round(time.Second))

	var (
		mu    sync.Mutex
		phase string
		late  = map[string][]time.Duration{}
	)
	handler := func(_ context.Context, run *xtimer.Run) error {
		d := time.Since(run.ScheduledAt)
		mu.Lock()
		late[phase] = append(late[phase], d)
		mu.Unlock()
		return nil
	}
	setPhase := func(p string) { mu.Lock(); phase = p; mu.Unlock() }
	swept := make(chan sweepLog, 1)
	start := func(retention time.Duration) (*xtimer.Scheduler, error) {
		s, newErr := xtimer.New(xtimer.Options{
			DB: db, App: benchApp, Retention: retention, RetentionInterval: time.Second,
			Logger: slog.New(&sweepHandler{Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), swept: swept}),
		})
		if newErr != nil {
			return nil, newErr
		}
		for i := range retentionTasks {
			if regErr := s.Register(fmt.Sprintf("tick-%02d", i), "* * * * * *", handler); regErr != nil {
				return nil, regErr
			}
		}
		return s, s.Start(ctx)
	}

	setPhase("warm-up")
	s, err := start(-1)
	if err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	setPhase("before")
	time.Sleep(30 * time.Second)
	setPhase("stopping")
	if err = s.Stop(ctx); err != nil {
		return err
	}

	setPhase("during")
	began := time.Now()
	s, err = start(xtimer.DefaultRetention)
	if err != nil {
		return err
	}
	var res sweepLog
	select {
	case res = <-swept:
	case <-time.After(2 * time.Hour):
		return fmt.Errorf("no sweep within 2h")
	}
	wall := time.Since(began)
	setPhase("after")
	if err := s.Stop(ctx); err != nil {
		return err
	}

	fmt.Printf("\n## Retention sweep, %s, %d rows\n\n", backend, rows)
	fmt.Printf("Deleted %d executions in %s (sweep's own time %s): %.0f rows/s, batches of %d\n\n",
		res.executions, wall.Round(time.Second), res.took.Round(time.Second),
		float64(res.executions)/res.took.Seconds(), xtimer.DefaultRetentionBatch)
	var counted int64
	if err := db.WithContext(ctx).Raw("SELECT COALESCE(SUM(count), 0) FROM xtimer_rollups WHERE app = ? AND task_code <> ''", benchApp).Scan(&counted).Error; err != nil {
		return fmt.Errorf("sum the roll-ups: %w", err)
	}
	fmt.Printf("Rolled up %d days first; the roll-ups count %d executions (seeded %d)\n\n", res.days, counted, rows)
	if counted != rows {
		return fmt.Errorf("the roll-ups count %d executions, want the %d seeded", counted, rows)
	}
	fmt.Println("| lateness of 50 tasks firing every second | fires | p50 | p99 | max |")
	fmt.Println("|---|---|---|---|---|")
	for _, ph := range []string{"before", "during"} {
		d := late[ph]
		slices.Sort(d)
		if len(d) == 0 {
			fmt.Printf("| %s | 0 | | | |\n", ph)
			continue
		}
		q := func(f float64) time.Duration { return d[int(f*float64(len(d)-1))].Round(time.Millisecond) }
		fmt.Printf("| %s | %d | %s | %s | %s |\n", ph, len(d), q(0.5), q(0.99), d[len(d)-1].Round(time.Millisecond))
	}
	return nil
}

// sweepLog is what the scheduler logged of its first retention sweep.
type sweepLog struct {
	days       int64
	executions int64
	took       time.Duration
}

// sweepHandler passes records at its Handler's level on, and reports the
// first "retention sweep" record, whatever its level.
type sweepHandler struct {
	slog.Handler
	swept chan sweepLog
}

func (h *sweepHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *sweepHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "retention sweep" {
		var l sweepLog
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "rolled_up_days":
				l.days = a.Value.Int64()
			case "executions":
				l.executions = a.Value.Int64()
			case "took":
				l.took = a.Value.Duration()
			}
			return true
		})
		select {
		case h.swept <- l:
		default:
		}
	}
	if h.Handler.Enabled(ctx, r.Level) {
		return h.Handler.Handle(ctx, r)
	}
	return nil
}

func (h *sweepHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &sweepHandler{Handler: h.Handler.WithAttrs(as), swept: h.swept}
}

func (h *sweepHandler) WithGroup(name string) slog.Handler {
	return &sweepHandler{Handler: h.Handler.WithGroup(name), swept: h.swept}
}
