package xtimer_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/xtimer-go/xtimer"
)

func ExampleScheduler_CreateHTTPTask() {
	// The receiver: a service with no xtimer code in it.
	called := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called <- r.Method + " " + r.URL.Path + " task=" + r.Header.Get("X-Xtimer-Task") + " attempt=" + r.Header.Get("X-Xtimer-Attempt")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	db, closeDB := exampleDB("xtimer-example-httptask")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example", HTTPSigningSecret: "signs-every-callback-of-the-app",
		HTTPAllow: []string{"127.0.0.1"}}) // the receiver listens on loopback, which is refused unless listed
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)

	// Stored, so every replica runs it; the console and the JSON API
	// create the same tasks.
	err = s.CreateHTTPTask(ctx, xtimer.HTTPTask{
		Code: "example.close-ledger", Spec: "0 0 2 * * *", MaxAttempts: 3,
		Target: xtimer.HTTPTarget{Method: http.MethodPost, URL: receiver.URL + "/jobs/close-ledger"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Trigger(ctx, "example.close-ledger"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-called)
	// Output:
	// POST /jobs/close-ledger task=example.close-ledger attempt=1
}

func ExampleHTTPTask_options() {
	db, closeDB := exampleDB("xtimer-example-httptask-options")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example", HTTPAllow: []string{"127.0.0.1"}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)

	// A callback task takes the options a Go task has: here one fire
	// waits for a slow run, missed fires of an outage all run, the
	// schedule ends after 30 fires, and starts spread over 20 s.
	err = s.CreateHTTPTask(ctx, xtimer.HTTPTask{
		Code: "example.export", Spec: "0 */5 * * * *",
		Target:  xtimer.HTTPTarget{Method: http.MethodPost, URL: "http://127.0.0.1:9/export"},
		Overlap: xtimer.OverlapBufferOne, Misfire: xtimer.MisfireRunAll, MaxRuns: 30,
		Jitter: 20 * time.Second, PauseOnFailure: 3,
	})
	if err != nil {
		log.Fatal(err)
	}
	t, err := s.HTTPTask(ctx, "example.export")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Overlap, t.Misfire, t.MisfireWindow, t.MaxRuns, t.Jitter, t.PauseOnFailure)
	// Output:
	// buffer_one run_all 1h0m0s 30 20s 3
}

func ExampleScheduler_DeleteTask() {
	db, closeDB := exampleDB("xtimer-example-delete")
	defer closeDB()
	ctx := context.Background()

	// The old build registers "example.legacy"; it stops, and the new
	// build no longer has it.
	old, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	if err = old.Register("example.legacy", "0 0 3 * * *", noop); err != nil {
		log.Fatal(err)
	}
	if err = old.Start(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(errors.Is(old.DeleteTask(ctx, "example.legacy"), xtimer.ErrTaskRegistered))
	if err = old.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)
	// No live replica registers it: it goes, its history stays.
	fmt.Println(s.DeleteTask(ctx, "example.legacy"))
	// Output:
	// true
	// <nil>
}
