package xtimer_test

import (
	"context"
	"fmt"
	"log"
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
