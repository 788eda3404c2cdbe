package xtimer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// BenchmarkHTTPCallbackThroughput measures how many callbacks a second one
// replica on PostgreSQL sustains against a local receiver that answers at
// once: N callback tasks fire every second for 10 s, and the figures are
// the callbacks received per second of the window, and the lateness at the
// receiver (received - scheduled). Run with -benchtime=1x:
//
//	go test -run '^$' -bench HTTPCallbackThroughput -benchtime=1x .
func BenchmarkHTTPCallbackThroughput(b *testing.B) {
	for _, tasks := range []int{500, 1000, 2000, 4000} {
		b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) {
			for range b.N {
				benchCallbacks(b, tasks, 10*time.Second)
			}
		})
	}
}

func benchCallbacks(b *testing.B, tasks int, window time.Duration) {
	ctx := context.Background()
	var mu sync.Mutex
	scheduled := map[int64]int{} // Unix second of the fire → callbacks received
	var lates []time.Duration    // of the fires in the window
	var from, to time.Time       // set before the window starts
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		now := time.Now()
		at, err := time.Parse("2006-01-02T15:04:05.000Z", r.Header.Get(HeaderScheduledAt))
		if err != nil {
			return
		}
		mu.Lock()
		scheduled[at.Unix()]++
		if !at.Before(from) && at.Before(to) {
			lates = append(lates, now.Sub(at))
		}
		mu.Unlock()
	}))
	defer rc.Close()
	db := testsvc.Postgres(b)
	app := testsvc.App(b)
	s, err := New(Options{DB: db, App: app, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HTTPAllow: []string{"127.0.0.1"}}) // the receiver above
	if err != nil {
		b.Fatal(err)
	}
	if err = s.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for k := range tasks {
		err = s.CreateHTTPTask(ctx, HTTPTask{Code: fmt.Sprintf("cb.%05d", k), Spec: "* * * * * *",
			Target: HTTPTarget{Method: "POST", URL: rc.URL, Body: `{}`}})
		if err != nil {
			b.Fatal(err)
		}
	}
	// The window starts after every task is in and every replica adopted it.
	mu.Lock()
	from = time.Now().Add(3 * time.Second).Truncate(time.Second)
	to = from.Add(window)
	mu.Unlock()
	want := tasks * int(window/time.Second)
	b.ResetTimer()
	time.Sleep(time.Until(to))
	// Fires of the window that are still on their way arrive late; wait for
	// them (up to 30 s) so that lateness counts them instead of losing them.
	deadline := time.Now().Add(30 * time.Second)
	got := 0
	for time.Now().Before(deadline) {
		mu.Lock()
		got = len(lates)
		mu.Unlock()
		if got >= want {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	mu.Lock()
	p50 := percentile(append([]time.Duration(nil), lates...), 50)
	p99 := percentile(append([]time.Duration(nil), lates...), 99)
	mu.Unlock()
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err = s.Stop(stopCtx); err != nil {
		b.Fatal(err)
	}
	var ok int64
	err = db.Model(&store.Execution{}).Where("app = ? AND run_time >= ? AND run_time < ? AND status = ?",
		app, from.UnixMilli(), to.UnixMilli(), store.StatusSucceeded).Count(&ok).Error
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(got)/window.Seconds(), "callbacks/s")
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	b.Logf("%d tasks every second for %s: %d fires due, %d received (%.0f/s), %d rows succeeded; lateness at the receiver p50 %s p99 %s",
		tasks, window, want, got, float64(got)/window.Seconds(), ok, p50, p99)
}
