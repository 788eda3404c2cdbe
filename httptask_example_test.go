package xtimer_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

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
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example", HTTPSigningSecret: "signs-every-callback-of-the-app"})
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
