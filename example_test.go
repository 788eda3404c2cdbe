package xtimer_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer"
)

func ExampleParseSchedule() {
	s, err := xtimer.ParseSchedule("0 0 12 ? * 2-6", xtimer.Quartz())
	if err != nil {
		log.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 13, 0, 0, 0, time.UTC) // a Friday afternoon
	fmt.Println(s.Describe())
	fmt.Println(s.Next(at))
	// Output:
	// at 12:00 on Monday through Friday, UTC
	// 2026-11-30 12:00:00 +0000 UTC
}

func ExampleParseSchedule_error() {
	_, err := xtimer.ParseSchedule("0 60 * * *")
	fmt.Println(err)
	// Output:
	// xtimer: spec "0 60 * * *": hour field "60": value 60 out of range 0-23
}

func ExampleParseSchedule_daylightSaving() {
	ny, _ := time.LoadLocation("America/New_York")
	s, _ := xtimer.ParseSchedule("30 2 * * *", xtimer.In(ny))
	at := time.Date(2027, 3, 13, 12, 0, 0, 0, ny)
	for range 2 {
		at = s.Next(at)
		fmt.Println(at)
	}
	// Output:
	// 2027-03-14 03:00:00 -0400 EDT
	// 2027-03-15 02:30:00 -0400 EDT
}

func ExampleScheduler_Register() {
	db, err := gorm.Open(sqlite.Open("file::memory:?cache=shared"), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		log.Fatal(err)
	}
	defer sqlDB.Close() // the pool is the application's: xtimer never closes it

	s, err := xtimer.New(xtimer.Options{DB: db, App: "billing"}) // no Redis: one process only
	if err != nil {
		log.Fatal(err)
	}
	err = s.Register("billing.reconcile", "0 0 9 * * *", func(ctx context.Context, run *xtimer.Run) error {
		run.Printf("reconciling the fire %s", run.ID) // stored on the execution row
		return nil
	}, xtimer.WithTimeout(5*time.Minute), xtimer.WithRetry(3))
	fmt.Println(err)
	next, _ := s.NextRuns("billing.reconcile", 1)
	fmt.Println(next[0].Format("15:04 MST"))
	// Output:
	// <nil>
	// 09:00 UTC
}

func ExampleNextFires() {
	sched, err := xtimer.ParseSchedule("0 9 * * 1-5")
	if err != nil {
		panic(err)
	}
	from := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC) // a Friday
	for _, at := range xtimer.NextFires(sched, from, 3, time.Time{}) {
		fmt.Println(at.Format("Mon 2006-01-02 15:04"))
	}
	// Output:
	// Mon 2026-11-30 09:00
	// Tue 2026-12-01 09:00
	// Wed 2026-12-02 09:00
}

func ExampleScheduler_Executions() {
	db, closeDB := exampleDB("xtimer-example-executions")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	runs := 0
	done := make(chan struct{})
	err = s.Register("billing.reconcile", "0 0 9 * * *", func(ctx context.Context, run *xtimer.Run) error {
		runs++
		run.Printf("run %d", runs)
		done <- struct{}{}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if _, err := s.Trigger(ctx, "billing.reconcile"); err != nil {
			log.Fatal(err)
		}
		<-done
	}
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Stop(stop); err != nil { // waits for the results to be stored
		log.Fatal(err)
	}

	// The manual runs, two a page, newest first.
	f := xtimer.ExecutionFilter{Code: "billing.reconcile", Source: xtimer.SourceManual, Limit: 2}
	for {
		page, err := s.Executions(ctx, f)
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range page.Executions {
			fmt.Println(e.Code, e.Status, strings.TrimSpace(e.Output))
		}
		if page.Next == "" {
			break
		}
		fmt.Println("next page")
		f.After = page.Next
	}
	// Output:
	// billing.reconcile succeeded run 3
	// billing.reconcile succeeded run 2
	// next page
	// billing.reconcile succeeded run 1
}

func ExampleScheduler_Tasks() {
	db, closeDB := exampleDB("xtimer-example-tasks")
	defer closeDB()
	// The callback below calls this host, which is refused unless listed.
	s, err := xtimer.New(xtimer.Options{DB: db, App: "billing", HTTPAllow: []string{"localhost"}})
	if err != nil {
		log.Fatal(err)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	err = s.Register("billing.reconcile", "0 0 9 * * 1-5", func(ctx context.Context, run *xtimer.Run) error {
		return nil
	}, xtimer.WithLocation(paris), xtimer.WithOwner("payments"), xtimer.WithRetry(3))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)
	err = s.CreateHTTPTask(ctx, xtimer.HTTPTask{
		Code: "billing.ping", Owner: "payments", Spec: "*/5 * * * *", Paused: true,
		Target: xtimer.HTTPTarget{Method: "POST", URL: "http://localhost:8080/billing/ping"},
	})
	if err != nil {
		log.Fatal(err)
	}

	tasks, err := s.Tasks(ctx, xtimer.TaskFilter{Owner: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tasks {
		fmt.Printf("%s (%s): %q in %s, paused %t, %d attempts, %d replica(s)\n",
			t.Code, t.Kind, t.Spec, t.Zone, t.Paused, t.MaxAttempts, t.Replicas)
	}
	// Output:
	// billing.ping (http): "*/5 * * * *" in UTC, paused true, 1 attempts, 1 replica(s)
	// billing.reconcile (go): "0 0 9 * * 1-5" in Europe/Paris, paused false, 3 attempts, 1 replica(s)
}

func ExampleScheduler_Replicas() {
	db, closeDB := exampleDB("xtimer-example-replicas")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "billing", InstanceID: "billing-7f9c", Version: "v1.4.0"})
	if err != nil {
		log.Fatal(err)
	}
	for _, code := range []string{"billing.reconcile", "billing.invoice"} {
		if err = s.Register(code, "0 0 9 * * *", func(ctx context.Context, run *xtimer.Run) error { return nil }); err != nil {
			log.Fatal(err)
		}
	}
	ctx := context.Background()
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)

	replicas, err := s.Replicas(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range replicas {
		fmt.Println(r.ID, r.Version, r.Handlers)
	}
	// Output:
	// billing-7f9c v1.4.0 [billing.invoice billing.reconcile]
}

// exampleDB opens a SQLite database in a temporary file for an example,
// and the function that closes its pool (the application's to close, not
// xtimer's) and removes the file. WAL and a busy timeout let the engine's
// goroutines read while another writes, as a service's database would.
func exampleDB(name string) (*gorm.DB, func()) {
	dir, err := os.MkdirTemp("", name)
	if err != nil {
		log.Fatal(err)
	}
	dsn := "file:" + filepath.Join(dir, "xtimer.db") + "?_journal_mode=WAL&_busy_timeout=10000&_txlock=immediate"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		log.Fatal(err)
	}
	return db, func() {
		_ = sqlDB.Close()
		_ = os.RemoveAll(dir)
	}
}
