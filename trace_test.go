package xtimer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// recorded returns a TracerProvider that keeps every span in memory.
func recorded() (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

// endedSpan waits for the one ended span of execution id: spans end just
// after the row's result is queued, so the row may be final first.
func endedSpan(t *testing.T, rec *tracetest.SpanRecorder, id int64) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		found = found[:0]
		for _, sp := range rec.Ended() {
			if spanAttrs(sp)["xtimer.execution_id"] == id {
				found = append(found, sp)
			}
		}
		return len(found) > 0
	}, 10*time.Second, 5*time.Millisecond, "no ended span for execution %d", id)
	require.Len(t, found, 1, "one span per attempt")
	return found[0]
}

func spanAttrs(sp sdktrace.ReadOnlySpan) map[string]any {
	m := map[string]any{}
	for _, kv := range sp.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// On the fake clock, frozen at t0, a manual run starts at its run time:
// the spans' bounds and lateness are exact.
func TestTracingSpanPerAttemptCarriesTheExecutionAndTheHandlerSeesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp, rec := recorded()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 250_000_000, time.UTC)
	app := testsvc.App(t)
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: app, clock: fakeclock.New(t0)}, func(o *Options) {
		o.TracerProvider = tp
		o.InstanceID = "replica-a"
	})
	seen := make(chan trace.SpanContext, 1)
	require.NoError(t, s.Register("ledger.ok", hourly, func(ctx context.Context, _ *Run) error {
		seen <- trace.SpanContextFromContext(ctx)
		return nil
	}))
	require.NoError(t, s.Register("ledger.bad", hourly, func(context.Context, *Run) error {
		return errors.New("ledger locked\nby the month-end close")
	}))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)

	row := runOnce(t, s, "ledger.ok")
	require.Equal(t, store.StatusSucceeded, row.Status)
	sp := endedSpan(t, rec, row.ID)
	require.Equal(t, "xtimer.run ledger.ok", sp.Name())
	require.Equal(t, trace.SpanKindInternal, sp.SpanKind())
	require.False(t, sp.Parent().IsValid(), "a fire starts its own trace")
	require.Equal(t, t0.UnixNano(), sp.StartTime().UnixNano(), "starts on the scheduler's clock")
	require.Equal(t, t0.UnixNano(), sp.EndTime().UnixNano())
	require.Equal(t, sdktrace.Status{Code: codes.Unset}, sp.Status(), "success leaves the status unset, as OTel asks of libraries")
	require.Empty(t, sp.Events())
	require.Equal(t, map[string]any{
		"xtimer.app": app, "xtimer.task": "ledger.ok", "xtimer.execution_id": row.ID,
		"xtimer.attempt": int64(1), "xtimer.max_attempts": int64(1), "xtimer.source": "manual",
		"xtimer.replica": "replica-a", "xtimer.scheduled_at": "2026-11-30T10:00:00.250Z",
		"xtimer.lateness_ms": int64(0), "xtimer.status": "succeeded",
	}, spanAttrs(sp))
	require.Equal(t, "github.com/xtimer-go/xtimer", sp.InstrumentationScope().Name)

	handler := <-seen
	require.True(t, handler.IsValid(), "the handler's ctx carries the span")
	require.True(t, handler.IsSampled())
	require.Equal(t, sp.SpanContext().TraceID(), handler.TraceID())
	require.Equal(t, sp.SpanContext().SpanID(), handler.SpanID(), "the attempt's span itself, so the handler's spans are its children")

	row = runOnce(t, s, "ledger.bad")
	require.Equal(t, store.StatusFailed, row.Status)
	sp = endedSpan(t, rec, row.ID)
	require.Equal(t, "xtimer.run ledger.bad", sp.Name())
	require.Equal(t, sdktrace.Status{Code: codes.Error, Description: "ledger locked"}, sp.Status(), "the error's first line")
	require.Len(t, sp.Events(), 1)
	ev := sp.Events()[0]
	require.Equal(t, "exception", ev.Name)
	require.Equal(t, map[string]any{"exception.type": "*errors.errorString", "exception.message": "ledger locked\nby the month-end close"},
		func() map[string]any {
			m := map[string]any{}
			for _, kv := range ev.Attributes {
				m[string(kv.Key)] = kv.Value.AsInterface()
			}
			return m
		}())
	attrs := spanAttrs(sp)
	require.Equal(t, "failed", attrs["xtimer.status"])
	require.Equal(t, "ledger.bad", attrs["xtimer.task"])
	require.NotContains(t, attrs, "xtimer.timed_out")
	require.NotContains(t, attrs, "http.response.status_code", "not an HTTP task")
	require.NotEqual(t, handler.TraceID(), sp.SpanContext().TraceID(), "one trace per attempt")
	require.Len(t, rec.Ended(), 2, "nothing else is traced")
}

func TestTracingMarksAnAttemptStoppedAtItsTimeout(t *testing.T) {
	t.Parallel()
	tp, rec := recorded()
	s := startHTTP(t, func(o *Options) { o.TracerProvider = tp })
	require.NoError(t, s.Register("report.build", hourly, func(ctx context.Context, _ *Run) error {
		<-ctx.Done()
		return ctx.Err()
	}, WithTimeout(100*time.Millisecond), WithRetry(2), WithBackoff(10*time.Millisecond, 10*time.Millisecond)))

	row := runOnce(t, s, "report.build")
	require.Equal(t, store.StatusTimedOut, row.Status)
	require.Equal(t, 2, row.Attempt)
	var spans []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool { spans = rec.Ended(); return len(spans) == 2 }, 10*time.Second, 5*time.Millisecond)
	for i, want := range []string{"retrying", "timed_out"} {
		sp := spans[i]
		attrs := spanAttrs(sp)
		require.Equal(t, int64(i+1), attrs["xtimer.attempt"])
		require.Equal(t, int64(2), attrs["xtimer.max_attempts"])
		require.Equal(t, want, attrs["xtimer.status"], "attempt %d", i+1)
		require.Equal(t, true, attrs["xtimer.timed_out"])
		require.Equal(t, sdktrace.Status{Code: codes.Error, Description: "handler did not return before its timeout (100ms)"}, sp.Status())
		require.GreaterOrEqual(t, sp.EndTime().Sub(sp.StartTime()), 100*time.Millisecond)
	}
	require.Equal(t, "manual", spanAttrs(spans[0])["xtimer.source"])
	require.Equal(t, row.FinishedMs, spans[1].EndTime().UnixMilli(), "the last span ends when the row says the execution finished")
}

func TestTracingSendsTraceparentToHTTPCallbacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp, rec := recorded()
	s := startHTTP(t, func(o *Options) { o.TracerProvider = tp })
	require.Equal(t, propagation.TraceContext{}, s.Options().Propagator, "W3C Trace Context by default")
	rc := newReceiver(t, nil)
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "cb.traced", Spec: hourly, Target: HTTPTarget{
		Method: "POST", URL: rc.URL + "/hook",
		// A stale value configured on the task is replaced by the attempt's own.
		Headers: []HTTPHeader{{Name: "Traceparent", Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
	}}))

	row := runOnce(t, s, "cb.traced")
	require.Equal(t, store.StatusSucceeded, row.Status, row.Error)
	sp := endedSpan(t, rec, row.ID)
	sc := sp.SpanContext()
	got := rc.requests()
	require.Len(t, got, 1)
	require.Equal(t, []string{fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())}, got[0].Header.Values("Traceparent"),
		"the receiver's spans join the attempt's trace")
	require.Empty(t, got[0].Header.Values("Tracestate"), "a root span has no trace state to send")
	require.Equal(t, "xtimer.run cb.traced", sp.Name())
	attrs := spanAttrs(sp)
	require.Equal(t, int64(200), attrs["http.response.status_code"])
	require.Equal(t, "succeeded", attrs["xtimer.status"])
	require.Equal(t, "cb.traced", attrs["xtimer.task"])
}

// Not parallel: it sets the process's global TracerProvider, which no
// other test uses, to show that the scheduler ignores it.
func TestTracingOffRecordsNothingAndSendsNoTraceparent(t *testing.T) {
	ctx := context.Background()
	global, rec := recorded()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(global)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	s := startHTTP(t, nil)
	require.Nil(t, s.Options().TracerProvider)
	require.Nil(t, s.Options().Propagator)
	seen := make(chan trace.SpanContext, 1)
	require.NoError(t, s.Register("quiet.job", hourly, func(ctx context.Context, _ *Run) error {
		seen <- trace.SpanContextFromContext(ctx)
		return nil
	}))
	rc := newReceiver(t, nil)
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "quiet.cb", Spec: hourly, Target: HTTPTarget{Method: "POST", URL: rc.URL}}))

	require.Equal(t, store.StatusSucceeded, runOnce(t, s, "quiet.job").Status)
	require.False(t, (<-seen).IsValid(), "no span in the handler's ctx")
	require.Equal(t, store.StatusSucceeded, runOnce(t, s, "quiet.cb").Status)
	got := rc.requests()
	require.Len(t, got, 1)
	require.NotContains(t, got[0].Header, "Traceparent")
	require.NotContains(t, got[0].Header, "Tracestate")
	require.Empty(t, rec.Started(), "the global provider is not used")
}
