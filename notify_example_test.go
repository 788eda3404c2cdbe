package xtimer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/executor"
)

func ExampleNotifierFunc() {
	db, closeDB := exampleDB("xtimer-example-notifier")
	defer closeDB()
	alerts := make(chan xtimer.Event, 1)
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example",
		// Your own notifier: a chat message, a page, a ticket.
		Notifier: xtimer.NotifierFunc(func(ctx context.Context, e xtimer.Event) error {
			if e.Kind == xtimer.EventFailed {
				alerts <- e
			}
			return nil
		})})
	if err != nil {
		log.Fatal(err)
	}
	err = s.Register("example.export", "0 0 2 * * *", func(ctx context.Context, run *xtimer.Run) error {
		return errors.New("bucket not found")
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Stop(ctx)
	if _, err := s.Trigger(ctx, "example.export"); err != nil {
		log.Fatal(err)
	}
	e := <-alerts // sent by one replica of the fleet, damped per AlertWindow
	fmt.Println(e.Kind, e.Task, e.Error)
	// Output:
	// execution.failed example.export bucket not found
}

func ExampleNewLogNotifier() {
	// Alerts as log lines: errors for failures, warnings for the rest.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a fixed output for this example
			}
			return a
		}}))
	n := xtimer.NewLogNotifier(logger)
	_ = n.Notify(context.Background(), xtimer.Event{ID: "a1", Kind: xtimer.EventLate, App: "billing",
		Replica: "billing-7f9c", Task: "billing.reconcile", Message: "billing.reconcile started 42s late"})
	// Output:
	// level=WARN msg="billing.reconcile started 42s late" alert=a1 kind=task.late app=billing replica=billing-7f9c suppressed=0 task=billing.reconcile
}

func ExampleNewWebhookNotifier() {
	const secret = "a-secret-shared-with-the-receiver"
	// The receiver: check the signature, then read the alert.
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := executor.VerifyWebhook(secret, r.Header, body, time.Now(), 0); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var e xtimer.Event
		_ = json.Unmarshal(body, &e)
		fmt.Println("received", e.Kind, e.Task)
	}))
	defer receiver.Close()

	hook, err := xtimer.NewWebhookNotifier(xtimer.WebhookOptions{URL: receiver.URL + "/hooks/xtimer", Secret: secret})
	if err != nil {
		log.Fatal(err)
	}
	// xtimer.Options{Notifier: hook} sends every alert this way; here, one by hand.
	err = hook.Notify(context.Background(), xtimer.Event{ID: "a2", Kind: xtimer.EventSilent, App: "billing",
		Task: "billing.reconcile", Message: "no success in the last 3 fires"})
	fmt.Println(err)
	// Output:
	// received task.silent billing.reconcile
	// <nil>
}

func ExampleNewWebhookNotifier_error() {
	_, err := xtimer.NewWebhookNotifier(xtimer.WebhookOptions{URL: "https://ops:hunter2@hooks.example.com/x"})
	fmt.Println(err)
	// Output:
	// xtimer: WebhookOptions.URL = https://ops:xxxxx@hooks.example.com/x: credentials in the URL are refused; send them in Headers
}

func ExampleOptions_metrics() {
	db, closeDB := exampleDB("xtimer-example-metrics")
	defer closeDB()
	reg := prometheus.NewRegistry() // serve it with promhttp.HandlerFor(reg, ...)
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example", Metrics: reg})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	err = s.Register("example.report", "0 0 2 * * *", func(ctx context.Context, run *xtimer.Run) error {
		close(done)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Trigger(ctx, "example.report"); err != nil {
		log.Fatal(err)
	}
	<-done
	defer s.Stop(ctx) // Stop unregisters the collectors
	// The counter moves as the attempt is settled, just after the handler
	// returned: read until it has.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if line := firesTotal(reg); line != "" {
			fmt.Println(line)
			break
		}
	}
	// Output:
	// xtimer_fires_total example example.report succeeded 1
}

// firesTotal prints the series of xtimer_fires_total in reg, or "" while
// there is none.
func firesTotal(reg *prometheus.Registry) string {
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "xtimer_fires_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			return fmt.Sprintf("%s %s %s %s %v", f.GetName(), labels["app"], labels["task"], labels["status"], m.GetCounter().GetValue())
		}
	}
	return ""
}
