package xtimer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/executor"
)

// webhookReceiver is a real HTTP server answering with the statuses given,
// then 200, and keeping every request.
type webhookReceiver struct {
	mu       sync.Mutex
	statuses []int
	got      []*http.Request
	bodies   [][]byte
}

func (w *webhookReceiver) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	w.got, w.bodies = append(w.got, r), append(w.bodies, body)
	status := http.StatusOK
	if len(w.statuses) > 0 {
		status, w.statuses = w.statuses[0], w.statuses[1:]
	}
	w.mu.Unlock()
	rw.WriteHeader(status)
}

func sampleEvent() Event {
	return Event{ID: "a1b2", Kind: EventFailed, App: "billing", Task: "close-day", Replica: "node-1",
		At: time.Date(2026, 11, 30, 3, 0, 1, 0, time.UTC), ExecutionID: 42, ScheduledAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC),
		Attempt: 3, Error: "ledger locked", Suppressed: 4, Message: "task close-day: execution 42 failed"}
}

func TestWebhookPostsSignedJSONAndRetriesServerErrors(t *testing.T) {
	t.Parallel()
	rcv := &webhookReceiver{statuses: []int{503, 502}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	n, err := NewWebhookNotifier(WebhookOptions{URL: srv.URL + "/hooks/xtimer", Secret: "s3cret-s3cret", Headers: map[string]string{"X-Route": "ops"}})
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), sampleEvent()))

	require.Len(t, rcv.got, 3, "two server errors, then delivered")
	for i, r := range rcv.got {
		require.Equal(t, http.MethodPost, r.Method)
		require.Equal(t, "/hooks/xtimer", r.URL.Path)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		require.Equal(t, "a1b2", r.Header.Get("X-Xtimer-Alert"), "every try carries the alert's ID")
		require.Equal(t, "execution.failed", r.Header.Get("X-Xtimer-Event"))
		require.Equal(t, "ops", r.Header.Get("X-Route"))
		ts, err := strconv.ParseInt(r.Header.Get("X-Xtimer-Timestamp"), 10, 64)
		require.NoError(t, err)
		require.True(t, executor.VerifySignature("s3cret-s3cret", r.Header.Get("X-Xtimer-Signature"), ts, rcv.bodies[i], time.Now(), 0))
		require.False(t, executor.VerifySignature("other-secret", r.Header.Get("X-Xtimer-Signature"), ts, rcv.bodies[i], time.Now(), 0))
		require.Equal(t, "a1b2", r.Header.Get(HeaderWebhookID), "the alert's ID, the same on every try")
		require.NoError(t, executor.VerifyWebhook("s3cret-s3cret", r.Header, rcv.bodies[i], time.Now(), 0))
		require.ErrorIs(t, executor.VerifyWebhook("other-secret", r.Header, rcv.bodies[i], time.Now(), 0), executor.ErrWebhookSignature)
	}
	var got map[string]any
	require.NoError(t, json.Unmarshal(rcv.bodies[2], &got))
	require.Equal(t, map[string]any{
		"id": "a1b2", "kind": "execution.failed", "app": "billing", "task": "close-day", "replica": "node-1",
		"at": "2026-11-30T03:00:01Z", "execution_id": float64(42), "scheduled_at": "2026-11-30T03:00:00Z",
		"attempt": float64(3), "error": "ledger locked", "suppressed": float64(4),
		"message": "task close-day: execution 42 failed",
	}, got)
}

func TestWebhookDoesNotRetryAClientError(t *testing.T) {
	t.Parallel()
	rcv := &webhookReceiver{statuses: []int{400}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	n, err := NewWebhookNotifier(WebhookOptions{URL: srv.URL, Attempts: 5})
	require.NoError(t, err)
	err = n.Notify(context.Background(), sampleEvent())
	require.ErrorContains(t, err, "status 400")
	require.Len(t, rcv.got, 1)
	require.Empty(t, rcv.got[0].Header.Get("X-Xtimer-Signature"), "unsigned without a secret")
	require.Empty(t, rcv.got[0].Header.Values(HeaderWebhookSignature), "unsigned without a secret")
}

func TestWebhookOptionsAreValidated(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o    WebhookOptions
		want string
	}{
		{WebhookOptions{}, `WebhookOptions.URL = "": want an absolute http or https URL`},
		{WebhookOptions{URL: "ftp://example.com/x"}, `WebhookOptions.URL = "ftp://example.com/x"`},
		{WebhookOptions{URL: "https://bob:pw@example.com/x"}, "credentials in the URL are refused"},
		{WebhookOptions{URL: "https://example.com", Attempts: 11}, "WebhookOptions.Attempts = 11"},
		{WebhookOptions{URL: "https://example.com", Timeout: -time.Second}, "WebhookOptions.Timeout = -1s"},
		{WebhookOptions{URL: "https://example.com", Headers: map[string]string{"content-type": "text/plain"}}, `WebhookOptions.Headers = "content-type"`},
		{WebhookOptions{URL: "https://example.com", Headers: map[string]string{"webhook-signature": "v1,forged"}}, `WebhookOptions.Headers = "webhook-signature"`},
	} {
		_, err := NewWebhookNotifier(c.o)
		require.ErrorContains(t, err, c.want)
	}
}

func TestLogNotifierLogsFailuresAsErrors(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	n := NewLogNotifier(slog.New(slog.NewTextHandler(&buf, nil)))
	require.NoError(t, n.Notify(context.Background(), sampleEvent()))
	line := buf.String()
	for _, want := range []string{"level=ERROR", `msg="task close-day: execution 42 failed"`, "alert=a1b2", "kind=execution.failed",
		"task=close-day", "execution=42", "suppressed=4", `err="ledger locked"`} {
		require.Contains(t, line, want)
	}
	buf.Reset()
	require.NoError(t, n.Notify(context.Background(), Event{Kind: EventLate, Message: "late"}))
	require.Contains(t, buf.String(), "level=WARN")
	require.NotContains(t, buf.String(), "owner=", "no owner attribute for a task without one")
	buf.Reset()
	require.NoError(t, n.Notify(context.Background(), Event{Kind: EventLate, Task: "close-day", Owner: "team-ledger", Message: "late"}))
	require.Contains(t, buf.String(), "owner=team-ledger")
}
