package xtimer_test

import (
	"context"
	"fmt"
	"log"

	"github.com/xtimer-go/xtimer"
)

func ExampleWithPauseOnFailure() {
	// After 3 scheduled fires in a row fail (after their retries), the task
	// is paused on every replica, with a note saying why, and a task.paused
	// alert goes to Options.Notifier. A success in between resets the count.
	s, task, stop := startExample("pause-on-failure", "0 */5 * * * *",
		xtimer.WithPauseOnFailure(3), xtimer.WithRetry(2))
	defer stop()
	fmt.Println(task(s).PauseOnFailure)
	// Output:
	// 3
}

func ExampleScheduler_PauseWith() {
	s, task, stop := startExample("pause-with", "0 * * * * *")
	defer stop()
	ctx := context.Background()
	if err := s.PauseWith(ctx, "example.pause-with", xtimer.PauseOptions{Note: "db migration until 14:00"}); err != nil {
		log.Fatal(err)
	}
	t := task(s)
	fmt.Printf("paused: %v, note: %s\n", t.Paused, t.PauseNote)
	// The resume's note replaces the pause's.
	if err := s.ResumeWith(ctx, "example.pause-with", xtimer.PauseOptions{Note: "migration done"}); err != nil {
		log.Fatal(err)
	}
	t = task(s)
	fmt.Printf("paused: %v, note: %s\n", t.Paused, t.PauseNote)
	// Output:
	// paused: true, note: db migration until 14:00
	// paused: false, note: migration done
}
