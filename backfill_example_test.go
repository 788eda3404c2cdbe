package xtimer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/xtimer-go/xtimer"
)

func ExampleScheduler_Backfill() {
	db, closeDB := exampleDB("xtimer-example-backfill")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan time.Time, 10)
	err = s.Register("billing.reconcile", "0 0 9 * * *", func(ctx context.Context, run *xtimer.Run) error {
		if run.Source == xtimer.SourceBackfill {
			ran <- run.ScheduledAt
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() {
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = s.Stop(stop)
	}()

	// The task was deployed late: run the three days it missed, one fire
	// at a time, oldest first.
	today := time.Now().UTC().Truncate(24 * time.Hour)
	n, err := s.Backfill(ctx, "billing.reconcile", today.AddDate(0, 0, -4), today.AddDate(0, 0, -1))
	fmt.Println(n, err)
	var last time.Time
	for range n {
		at := <-ran
		fmt.Println(at.After(last), at.Format("15:04"))
		last = at
	}
	n, err = s.Backfill(ctx, "billing.reconcile", today.AddDate(0, 0, -4), today.AddDate(0, 0, -1))
	fmt.Println(n, err)

	_, err = s.Backfill(ctx, "billing.reconcile", today, today.AddDate(0, 0, 2))
	fmt.Println(err != nil)
	// Output:
	// 3 <nil>
	// true 09:00
	// true 09:00
	// true 09:00
	// 0 <nil>
	// true
}
