package executor

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracedContext carries a sampled span context with a trace state, as a
// handler's context does under a TracerProvider.
func tracedContext(t *testing.T) context.Context {
	t.Helper()
	state, err := trace.ParseTraceState("vendor=abc")
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		TraceState: state,
	})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

func TestHTTPPropagatorSendsTheTraceContextOfCtx(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, "ok")
	c := newCaller(t, HTTPOptions{Allow: loopback, Propagator: propagation.TraceContext{}})
	_, err := c.Do(tracedContext(t), HTTPCall{URL: srv.URL, Headers: [][2]string{{"Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}})
	require.NoError(t, err)
	r := <-got
	require.Equal(t, []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, r.header.Values("Traceparent"), "ctx's wins over the call's own")
	require.Equal(t, []string{"vendor=abc"}, r.header.Values("Tracestate"))
}

func TestHTTPWithoutPropagatorSendsNoTraceContext(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, "ok")
	c := newCaller(t, HTTPOptions{Allow: loopback})
	_, err := c.Do(tracedContext(t), HTTPCall{URL: srv.URL})
	require.NoError(t, err)
	r := <-got
	require.NotContains(t, r.header, "Traceparent")
	require.NotContains(t, r.header, "Tracestate")
}
