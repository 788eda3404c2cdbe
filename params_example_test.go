package xtimer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/xtimer-go/xtimer"
)

func ExampleWithParams() {
	db, closeDB := exampleDB("xtimer-example-params")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	type exportParams struct {
		Region string `json:"region"`
		Days   int    `json:"days"`
	}
	got := make(chan exportParams, 1)
	export := func(ctx context.Context, run *xtimer.Run) error {
		var p exportParams
		if bindErr := run.Bind(&p); bindErr != nil {
			return bindErr // names the task and the type: the row records it
		}
		got <- p
		return nil
	}
	// One handler, two tasks: the parameters tell them apart.
	for code, region := range map[string]string{"example.export.eu": "eu", "example.export.us": "us"} {
		err = s.Register(code, "0 0 2 * * *", export, xtimer.WithParams(exportParams{Region: region, Days: 7}))
		if err != nil {
			log.Fatal(err)
		}
	}
	ctx := context.Background()
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)
	if _, err := s.Trigger(ctx, "example.export.eu"); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", <-got)
	// Output:
	// {Region:eu Days:7}
}

func ExampleScheduler_TriggerWith() {
	db, closeDB := exampleDB("xtimer-example-triggerwith")
	defer closeDB()
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	got := make(chan string, 1)
	err = s.Register("example.reindex", "0 0 3 * * *", func(ctx context.Context, run *xtimer.Run) error {
		got <- string(run.Params)
		return nil
	}, xtimer.WithParams(map[string]any{"index": "all"}))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err = s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)
	// A manual run with its own parameters, and why: both stay on its row.
	e, err := s.TriggerWith(ctx, "example.reindex", xtimer.TriggerOptions{
		Params: json.RawMessage(`{"index":"orders"}`),
		Note:   "orders index corrupted (INC-1042)",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Source, e.Params, e.Note)
	fmt.Println("ran with:", <-got)
	// Parameters that do not fit are refused, and nothing is recorded.
	_, err = s.TriggerWith(ctx, "example.reindex", xtimer.TriggerOptions{Params: json.RawMessage(`{"index":`)})
	fmt.Println(err)
	// Output:
	// manual {"index":"orders"} orders index corrupted (INC-1042)
	// ran with: {"index":"orders"}
	// xtimer: trigger "example.reindex": TriggerOptions.Params "{\"index\":": not valid JSON: unexpected end of JSON input
}
