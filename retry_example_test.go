package xtimer_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/xtimer-go/xtimer"
)

// startFlaky starts a scheduler with the task example.<name>, whose
// handler fails its first call and succeeds after, and runs it now: it
// returns the scheduler, the execution of the run, and a stop function.
func startFlaky(name string, opts ...xtimer.TaskOption) (*xtimer.Scheduler, int64, func()) {
	db, closeDB := exampleDB("xtimer-example-" + name)
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	var calls atomic.Int64
	code := "example." + name
	flaky := func(ctx context.Context, run *xtimer.Run) error {
		n := calls.Add(1)
		run.Printf("call %d", n)
		if n == 1 {
			return errors.New("upstream unavailable")
		}
		return nil
	}
	if err = s.Register(code, "0 0 2 * * *", flaky, opts...); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	e, err := s.Trigger(ctx, code)
	if err != nil {
		log.Fatal(err)
	}
	return s, e.ID, func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := s.Stop(stopCtx); err != nil {
			log.Fatal(err)
		}
		closeDB()
	}
}

// waitFor polls an execution until it has one of the statuses.
func waitFor(s *xtimer.Scheduler, id int64, statuses ...xtimer.Status) xtimer.Execution {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		e, err := s.Execution(context.Background(), id)
		if err != nil {
			log.Fatal(err)
		}
		for _, st := range statuses {
			if e.Status == st {
				return e
			}
		}
	}
	log.Fatalf("execution %d never reached %v", id, statuses)
	return xtimer.Execution{}
}

func ExampleScheduler_Retry() {
	s, id, stop := startFlaky("retry")
	defer stop()
	e := waitFor(s, id, xtimer.StatusFailed)
	fmt.Printf("%s after attempt %d of %d: %s\n", e.Status, e.Attempt, e.MaxAttempts, e.Error)

	// One more attempt on the same execution, run by any replica with the
	// handler within a second; no automatic retry follows it.
	e, err := s.Retry(context.Background(), id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, attempt %d of %d next\n", e.Status, e.Attempt+1, e.MaxAttempts)
	e = waitFor(s, id, xtimer.StatusSucceeded, xtimer.StatusFailed)
	fmt.Printf("%s after attempt %d of %d (%s)\n", e.Status, e.Attempt, e.MaxAttempts, e.Reason)

	// Only a failed or timed_out execution can be retried.
	_, err = s.Retry(context.Background(), id)
	fmt.Println(errors.Is(err, xtimer.ErrNotRetryable))
	// Output:
	// failed after attempt 1 of 1: upstream unavailable
	// retrying, attempt 2 of 2 next
	// succeeded after attempt 2 of 2 (retried)
	// true
}

func ExampleScheduler_Attempts() {
	// The first attempt fails, and the task's policy retries it.
	s, id, stop := startFlaky("attempts", xtimer.WithRetry(2), xtimer.WithBackoff(100*time.Millisecond, time.Second))
	defer stop()
	waitFor(s, id, xtimer.StatusSucceeded, xtimer.StatusFailed)

	// Every attempt is kept, not only the last one the execution shows.
	attempts, err := s.Attempts(context.Background(), id)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range attempts {
		fmt.Printf("attempt %d: %s, output %q, error %q\n", a.Number, a.Status, a.Output, a.Error)
	}
	// Output:
	// attempt 1: failed, output "call 1\n", error "upstream unavailable"
	// attempt 2: succeeded, output "call 2\n", error ""
}
