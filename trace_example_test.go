package xtimer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer"
)

func ExampleOptions_tracerProvider() {
	db, err := gorm.Open(sqlite.Open("file:xtimer-example-tracing?mode=memory&cache=shared"), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		log.Fatal(err)
	}
	defer sqlDB.Close() // the pool is the application's: xtimer never closes it
	// In a service: sdktrace.WithBatcher(an OTLP exporter). The recorder
	// keeps the spans in memory, for this example.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	s, err := xtimer.New(xtimer.Options{DB: db, App: "billing", TracerProvider: tp})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	err = s.Register("billing.reconcile", "0 0 9 * * *", func(ctx context.Context, run *xtimer.Run) error {
		defer close(done)
		// Spans the handler starts from ctx are children of the attempt's.
		fmt.Println("handler traced:", trace.SpanContextFromContext(ctx).IsValid())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Trigger(ctx, "billing.reconcile"); err != nil {
		log.Fatal(err)
	}
	<-done
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Stop(stop); err != nil { // waits for the attempt, which ends its span
		log.Fatal(err)
	}
	for _, span := range spans.Ended() {
		fmt.Println(span.Name())
		for _, kv := range span.Attributes() {
			if kv.Key == "xtimer.task" || kv.Key == "xtimer.status" {
				fmt.Printf("  %s=%s\n", kv.Key, kv.Value.AsString())
			}
		}
	}
	// Output:
	// handler traced: true
	// xtimer.run billing.reconcile
	//   xtimer.task=billing.reconcile
	//   xtimer.status=succeeded
}
