package engine

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file makes the OpenTelemetry span of each attempt
// (Options.TracerProvider). Without a provider s.tracer is nil and
// startSpan returns the handler context and a shared no-op: a fire pays a
// nil check, nothing more.
//
// The span starts when the attempt really starts on its pool (after any
// wait in this replica's queues) and ends when the attempt is settled, so
// its bounds match the row's started and finished times: both are read
// from Options.Clock. It is a root span, of kind Internal: the fire comes
// from this replica's own timer, not from a remote caller (Server) or a
// message broker (Consumer). No semantic convention covers scheduled jobs
// (the FaaS one, "faas.trigger=timer", asks for a FaaS resource), so its
// attributes live under xtimer.*, beside the standard
// http.response.status_code of callbacks. Its context reaches the handler
// in ctx, and HTTP callbacks carry it to the receiver as W3C Trace Context
// headers (executor.HTTPOptions.Propagator).

// tracerName is the instrumentation scope of the spans.
const tracerName = "github.com/xtimer-go/xtimer"

// spanPrefix starts every span name: "xtimer.run billing.reconcile". Task
// codes are few and stable, so the name stays low-cardinality.
const spanPrefix = "xtimer.run "

// Attributes of an attempt's span.
const (
	attrApp         = attribute.Key("xtimer.app")
	attrTask        = attribute.Key("xtimer.task")
	attrExecution   = attribute.Key("xtimer.execution_id")
	attrAttempt     = attribute.Key("xtimer.attempt")
	attrMaxAttempts = attribute.Key("xtimer.max_attempts")
	attrSource      = attribute.Key("xtimer.source")
	attrReplica     = attribute.Key("xtimer.replica")
	attrScheduledAt = attribute.Key("xtimer.scheduled_at") // the fire's run time, RFC 3339 UTC with ms
	attrLateness    = attribute.Key("xtimer.lateness_ms")  // start minus when the attempt was due
	attrStatus      = attribute.Key("xtimer.status")       // the row's status once settled: succeeded, retrying, failed, timed_out
	attrTimedOut    = attribute.Key("xtimer.timed_out")    // set, true, only on an attempt stopped at its timeout
	attrHTTPStatus  = attribute.Key("http.response.status_code")
)

// newTracer returns the tracer of tp, nil without one.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// CallbackPropagator is what writes the span's context into HTTP
// callbacks: nil, writing nothing, without a TracerProvider.
func CallbackPropagator(tp trace.TracerProvider, p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if tp == nil {
		return nil
	}
	return p
}

// endSpan ends an attempt's span with how the attempt ended.
type endSpan func(out executor.Outcome, fin store.Finish)

func noSpan(executor.Outcome, store.Finish) {}

// startSpan starts the span of attempt r as it starts, and returns the
// context its work runs under (the span in it) and the function that ends
// the span once the attempt is settled.
func (s *Engine) startSpan(r store.Execution) (context.Context, endSpan) {
	if s.tracer == nil {
		return s.handlerCtx(r.ID), noSpan
	}
	now := s.clock.Now()
	ctx, span := s.tracer.Start(s.handlerCtx(r.ID), spanPrefix+r.TaskCode,
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(now),
		trace.WithAttributes(
			attrApp.String(s.opts.App),
			attrTask.String(r.TaskCode),
			attrExecution.Int64(r.ID),
			attrAttempt.Int(r.Attempt),
			attrMaxAttempts.Int(r.MaxAttempts),
			attrSource.String(r.Source),
			attrReplica.String(s.opts.InstanceID),
			attrScheduledAt.String(time.UnixMilli(r.RunTime).UTC().Format("2006-01-02T15:04:05.000Z")),
			attrLateness.Int64(now.UnixMilli()-attemptDue(r)),
		))
	return ctx, func(out executor.Outcome, fin store.Finish) {
		span.SetAttributes(attrStatus.String(fin.Status))
		if fin.HTTPStatus > 0 {
			span.SetAttributes(attrHTTPStatus.Int(fin.HTTPStatus))
		}
		if out.Err != nil {
			if out.TimedOut() {
				span.SetAttributes(attrTimedOut.Bool(true))
			}
			span.RecordError(out.Err)
			// The first line: a panic's error goes on with its stack,
			// which the exception event holds already.
			msg, _, _ := strings.Cut(out.Err.Error(), "\n")
			span.SetStatus(codes.Error, msg)
		}
		span.End(trace.WithTimestamp(out.Finished))
	}
}

// attemptDue is when attempt r was due to start, in Unix ms: the fire's
// planned start (its run time, plus its jitter) for the first attempt,
// the retry's back-off instant after.
func attemptDue(r store.Execution) int64 {
	if r.Attempt > 1 {
		return r.NextAttemptMs
	}
	return r.Planned()
}
