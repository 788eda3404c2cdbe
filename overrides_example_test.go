package xtimer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/xtimer-go/xtimer"
)

func ExampleScheduler_SetTaskOptions() {
	// An upstream is flaky tonight: give the task more attempts and a
	// longer timeout on every replica, without a deploy. A redeploy keeps
	// the overrides; ResetTaskOptions brings the code's options back.
	s, task, stop := startExample("set-options", "0 */5 * * * *", xtimer.WithRetry(1))
	defer stop()
	ctx := context.Background()
	attempts, timeout := 3, 2*time.Minute
	err := s.SetTaskOptions(ctx, "example.set-options", xtimer.TaskOverrides{MaxAttempts: &attempts, Timeout: &timeout})
	if err != nil {
		log.Fatal(err)
	}
	t := task(s)
	fmt.Printf("attempts: %d (code %d → override %d), timeout: %s\n",
		t.MaxAttempts, *t.CodeOptions.MaxAttempts, *t.Overrides.MaxAttempts, t.Timeout)

	zero := 0
	err = s.SetTaskOptions(ctx, "example.set-options", xtimer.TaskOverrides{MaxAttempts: &zero})
	fmt.Println(err)

	if err := s.ResetTaskOptions(ctx, "example.set-options"); err != nil {
		log.Fatal(err)
	}
	t = task(s)
	fmt.Printf("attempts: %d, timeout: %s\n", t.MaxAttempts, t.Timeout)
	// Output:
	// attempts: 3 (code 1 → override 3), timeout: 2m0s
	// xtimer: set options of task "example.set-options": TaskOverrides.MaxAttempts = 0: attempts must be 1-100 (1 means no retry)
	// attempts: 1, timeout: 10m0s
}
