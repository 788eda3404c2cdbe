package xtimer_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/xtimer-go/xtimer"
)

func ExampleWithExclude() {
	// A daily report in January 2100, but not on the 2nd: that fire is
	// recorded skipped, reason "excluded".
	s, task, stop := startExample("exclude", "0 0 8 ? 1 * 2100", xtimer.WithQuartz(), xtimer.WithExclude("2100-01-02"))
	defer stop()
	fmt.Println(task(s).Exclude)
	next, err := s.NextRuns("example.exclude", 3)
	if err != nil {
		log.Fatal(err)
	}
	for _, at := range next {
		fmt.Println(at.Format(time.DateTime))
	}
	// Output:
	// [2100-01-02]
	// 2100-01-01 08:00:00
	// 2100-01-03 08:00:00
	// 2100-01-04 08:00:00
}

func ExampleWithExclude_badDay() {
	db, closeDB := exampleDB("xtimer-example-exclude-bad")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	err = s.Register("example.bad", "0 9 * * *", noop, xtimer.WithExclude("2100-12-25", "2100-13-01"))
	fmt.Println(err)
	// Output:
	// xtimer: task "example.bad": WithExclude("2100-13-01"): want a date YYYY-MM-DD
}

func ExampleWithCalendar() {
	// The task skips the days of the app's calendar "holidays", which
	// SetCalendar changes at runtime, for every replica.
	s, task, stop := startExample("calendar", "0 0 8 ? 1 * 2100", xtimer.WithQuartz(), xtimer.WithCalendar("holidays"))
	defer stop()
	ctx := context.Background()
	if err := s.SetCalendar(ctx, "holidays", []string{"2100-01-03", "2100-01-01"}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(task(s).Calendar)
	next, err := s.NextRuns("example.calendar", 3)
	if err != nil {
		log.Fatal(err)
	}
	for _, at := range next {
		fmt.Println(at.Format(time.DateTime))
	}
	// Output:
	// holidays
	// 2100-01-02 08:00:00
	// 2100-01-04 08:00:00
	// 2100-01-05 08:00:00
}

func ExampleScheduler_SetCalendar() {
	s, _, stop := startExample("setcalendar", "0 0 8 * * *")
	defer stop()
	ctx := context.Background()
	if err := s.SetCalendar(ctx, "holidays.fr", []string{"2100-12-25", "2100-01-01", "2100-12-25"}); err != nil {
		log.Fatal(err)
	}
	days, err := s.Calendar(ctx, "holidays.fr")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(days)

	err = s.SetCalendar(ctx, "holidays.fr", []string{"2100-07-14", "14/07/2100"})
	var calErr *xtimer.CalendarError
	if errors.As(err, &calErr) {
		fmt.Println(calErr.Field, calErr.Value)
	}
	fmt.Println(err)
	// Output:
	// [2100-01-01 2100-12-25]
	// days[1] 14/07/2100
	// xtimer: calendar "holidays.fr": days[1] "14/07/2100": want a date YYYY-MM-DD
}
