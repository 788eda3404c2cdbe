package xtimer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/xtimer-go/xtimer"
)

// The examples of this file register one task with one option, start the
// scheduler on an in-memory SQLite database (startExample) and read the
// task back as the fleet sees it (Scheduler.Tasks) or print its next fires.

func noop(ctx context.Context, run *xtimer.Run) error { return nil }

func ExampleWithTimeout() {
	s, task, stop := startExample("timeout", "0 0 2 * * *", xtimer.WithTimeout(90*time.Second))
	defer stop()
	fmt.Println(task(s).Timeout)
	// Output:
	// 1m30s
}

func ExampleWithRetry() {
	// Up to 4 attempts: the first and 3 retries, each a further attempt of
	// the same execution, with the default back-off between them.
	s, task, stop := startExample("retry", "0 0 2 * * *", xtimer.WithRetry(4))
	defer stop()
	t := task(s)
	fmt.Println(t.MaxAttempts, t.BackoffBase, t.BackoffMax)
	// Output:
	// 4 1s 5m0s
}

func ExampleWithBackoff() {
	s, task, stop := startExample("backoff", "0 0 2 * * *", xtimer.WithRetry(5), xtimer.WithBackoff(10*time.Second, time.Minute))
	defer stop()
	t := task(s)
	fmt.Println(t.MaxAttempts, t.BackoffBase, t.BackoffMax)
	// Output:
	// 5 10s 1m0s
}

func ExampleWithMisfire() {
	// After an outage of every replica, run each missed fire of the last
	// hour (the default misfire window), not only the latest.
	s, task, stop := startExample("misfire", "0 */5 * * * *", xtimer.WithMisfire(xtimer.MisfireRunAll))
	defer stop()
	t := task(s)
	fmt.Println(t.Misfire, t.MisfireWindow)
	// Output:
	// run_all 1h0m0s
}

func ExampleWithMisfireWindow() {
	// A fire more than 10 minutes overdue is recorded skipped, reason
	// misfire, instead of running late.
	s, task, stop := startExample("window", "0 */5 * * * *", xtimer.WithMisfireWindow(10*time.Minute))
	defer stop()
	t := task(s)
	fmt.Println(t.Misfire, t.MisfireWindow)
	// Output:
	// run_once 10m0s
}

func ExampleWithOverlap() {
	// A fire that comes while the previous one still runs, on any replica,
	// is recorded skipped, reason overlap.
	s, task, stop := startExample("overlap", "0 * * * * *", xtimer.WithOverlap(xtimer.OverlapForbid))
	defer stop()
	fmt.Println(task(s).Overlap)
	// Output:
	// forbid
}

func ExampleWithOverlap_buffer() {
	// A fire that comes while the previous one still runs waits for it, on
	// any replica, and starts within a second of its end; with
	// OverlapBufferOne, a fire due while one waits already is skipped.
	s, task, stop := startExample("buffer", "0 * * * * *", xtimer.WithOverlap(xtimer.OverlapBufferOne))
	defer stop()
	fmt.Println(task(s).Overlap)
	// Output:
	// buffer_one
}

func ExampleWithLocation() {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		log.Fatal(err)
	}
	s, task, stop := startExample("location", "0 30 9 * * *", xtimer.WithLocation(tokyo))
	defer stop()
	fmt.Println(task(s).Zone)
	next, err := s.NextRuns("example.location", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(next[0].Format("15:04 MST"))
	// Output:
	// Asia/Tokyo
	// 09:30 JST
}

func ExampleWithQuartz() {
	// Quartz: at 18:00 on the last Friday of every month.
	s, task, stop := startExample("quartz", "0 0 18 ? * 6L", xtimer.WithQuartz())
	defer stop()
	t := task(s)
	fmt.Println(t.Spec, t.Dialect)
	// Output:
	// 0 0 18 ? * 6L quartz
}

func ExampleWithName() {
	// The name the console shows; the code stays the task's key.
	s, task, stop := startExample("name", "0 0 2 * * *", xtimer.WithName("Nightly ledger close"))
	defer stop()
	t := task(s)
	fmt.Println(t.Code, "is shown as", t.Name)
	// Output:
	// example.name is shown as Nightly ledger close
}

func ExampleWithDescription() {
	s, task, stop := startExample("description", "0 0 2 * * *",
		xtimer.WithDescription("Closes the day's ledger and posts the totals."))
	defer stop()
	fmt.Println(task(s).Description)
	// Output:
	// Closes the day's ledger and posts the totals.
}

func ExampleWithOwner() {
	// The team to call; Scheduler.Tasks and the console filter on it.
	s, task, stop := startExample("owner", "0 0 2 * * *", xtimer.WithOwner("finance-platform"))
	defer stop()
	fmt.Println(task(s).Owner)
	// Output:
	// finance-platform
}

func ExampleWithEndAt() {
	// A campaign's daily mail, until the end of its last day.
	end := time.Date(2100, 1, 3, 23, 59, 59, 0, time.UTC)
	s, task, stop := startExample("endat", "0 0 8 ? 1 * 2100", xtimer.WithQuartz(), xtimer.WithEndAt(end))
	defer stop()
	fmt.Println(task(s).EndAt.Format(time.DateTime))
	next, err := s.NextRuns("example.endat", 5)
	if err != nil {
		log.Fatal(err)
	}
	for _, at := range next {
		fmt.Println(at.Format(time.DateTime))
	}
	// Output:
	// 2100-01-03 23:59:59
	// 2100-01-01 08:00:00
	// 2100-01-02 08:00:00
	// 2100-01-03 08:00:00
}

func ExampleWithMaxRuns() {
	// Three scheduled fires in all, across the fleet; manual runs do not
	// count.
	s, task, stop := startExample("maxruns", "0 */10 * * * *", xtimer.WithMaxRuns(3))
	defer stop()
	fmt.Println(task(s).MaxRuns)
	// Output:
	// 3
}

func ExampleWithJitter() {
	// Reports due at 09:00 on every service would hit the warehouse
	// together: each fire starts up to 45 s later, at an offset of its own
	// that every replica computes alike. Run.ScheduledAt stays 09:00.
	s, task, stop := startExample("jitter", "0 0 9 * * *", xtimer.WithJitter(45*time.Second))
	defer stop()
	fmt.Println(task(s).Jitter)
	// Output:
	// 45s
}

func ExampleScheduler_Pause() {
	s, task, stop := startExample("pause", "0 * * * * *")
	defer stop()
	ctx := context.Background()
	// Stored: every replica stops firing the task within a second, and a
	// redeploy does not resume it.
	if err := s.Pause(ctx, "example.pause"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("paused:", task(s).Paused)
	if err := s.Resume(ctx, "example.pause"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("paused:", task(s).Paused)
	// Output:
	// paused: true
	// paused: false
}

func ExampleScheduler_SetSchedule() {
	s, task, stop := startExample("reschedule", "0 0 2 * * *")
	defer stop()
	ctx := context.Background()
	// An operator's schedule, which wins over the code's until reset.
	if err := s.SetSchedule(ctx, "example.reschedule", "0 30 3 * * *", xtimer.DialectCron, "Europe/Berlin"); err != nil {
		log.Fatal(err)
	}
	t := task(s)
	fmt.Println(t.Spec, t.Zone, t.Overridden)
	if err := s.ResetSchedule(ctx, "example.reschedule"); err != nil {
		log.Fatal(err)
	}
	t = task(s)
	fmt.Println(t.Spec, t.Zone, t.Overridden)
	// Output:
	// 0 30 3 * * * Europe/Berlin true
	// 0 0 2 * * * UTC false
}

func ExampleScheduler_Trigger() {
	db, closeDB := exampleDB("xtimer-example-trigger")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan xtimer.Source, 1)
	err = s.Register("example.trigger", "0 0 2 * * *", func(ctx context.Context, run *xtimer.Run) error {
		ran <- run.Source
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)
	// A manual run, recorded like any fire and run once, now.
	e, err := s.Trigger(ctx, "example.trigger")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Source, e.Status)
	fmt.Println("ran:", <-ran)
	// Output:
	// manual scheduled
	// ran: manual
}

func ExampleScheduler_NextRuns() {
	db, closeDB := exampleDB("xtimer-example-nextruns")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	// NextRuns needs no Start: it reads the registered schedule.
	if err = s.Register("example.yearly", "@yearly", noop, xtimer.WithEndAt(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))); err != nil {
		log.Fatal(err)
	}
	next, err := s.NextRuns("example.yearly", 2)
	if err != nil {
		log.Fatal(err)
	}
	for _, at := range next {
		fmt.Println(at.Format("01-02 15:04"))
	}
	// Output:
	// 01-01 00:00
	// 01-01 00:00
}

func ExampleScheduler_Health() {
	db, closeDB := exampleDB("xtimer-example-health")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)
	h := s.Health(ctx)
	fmt.Println("ok:", h.OK, "db:", h.DB.OK)
	// Output:
	// ok: true db: true
}

// startExample opens an in-memory database, registers the task
// "example.<name>" with spec and opts, starts the scheduler, and returns
// it, a function that reads the task back, and one that stops everything.
func startExample(name, spec string, opts ...xtimer.TaskOption) (*xtimer.Scheduler, func(*xtimer.Scheduler) xtimer.Task, func()) {
	db, closeDB := exampleDB("xtimer-example-" + name)
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	code := "example." + name
	if err := s.Register(code, spec, noop, opts...); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	task := func(s *xtimer.Scheduler) xtimer.Task {
		tasks, err := s.Tasks(ctx, xtimer.TaskFilter{CodePrefix: code})
		if err != nil || len(tasks) != 1 {
			log.Fatalf("task %s: %v (%d found)", code, err, len(tasks))
		}
		return tasks[0]
	}
	stop := func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := s.Stop(stopCtx); err != nil {
			log.Fatal(err)
		}
		closeDB()
	}
	return s, task, stop
}
