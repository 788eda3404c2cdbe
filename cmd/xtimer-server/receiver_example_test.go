package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/executor"
)

// The receiver example of docs/server.md, compiled and tested here so
// that it cannot rot: TestReadmeHasReceiverExample checks that
// docs/server.md shows exactly the text between the markers.

// readme:receiver:start

// receive handles a callback from xtimer-server: it accepts only a request
// signed with secret (Standard Webhooks) less than 5 minutes ago, and
// passes the body and the webhook-id, the same on every attempt of a fire,
// to handle, which stores the id with its effect to dedupe retries.
func receive(secret string, handle func(id string, body []byte) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := executor.VerifyWebhook(secret, r.Header, body, time.Now(), 0); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if err := handle(r.Header.Get("Webhook-Id"), body); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // xtimer retries
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// readme:receiver:end

// signedRequest is a callback as xtimer sends it, signed by the executor.
func signedRequest(t *testing.T, secret, id string, ts int64, signedBody, sentBody string) *http.Request {
	t.Helper()
	sig, err := executor.SignWebhook(secret, id, ts, []byte(signedBody))
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/reconcile", strings.NewReader(sentBody))
	r.Header.Set("webhook-id", id)
	r.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	r.Header.Set("webhook-signature", sig)
	return r
}

// callReceiver runs r through the example and returns the status and what
// handle was given.
func callReceiver(secret string, r *http.Request) (status int, id, body string) {
	w := httptest.NewRecorder()
	receive(secret, func(i string, b []byte) error {
		id, body = i, string(b)
		return nil
	})(w, r)
	return w.Code, id, body
}

func TestReceiverExampleAcceptsOnlyGenuineCallbacks(t *testing.T) {
	t.Parallel()
	const secret, body, id = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `{"day":"today"}`, "platform/billing.reconcile/1764662400000"
	now := time.Now().Unix()
	for _, c := range []struct {
		name                 string
		secret               string
		ts                   int64
		signedBody, sentBody string
		want                 int
	}{
		{"genuine", secret, now, body, body, http.StatusNoContent},
		{"genuine, empty body", secret, now, "", "", http.StatusNoContent},
		{"signed 4 minutes ago", secret, now - 4*60, body, body, http.StatusNoContent},
		{"body changed", secret, now, body, `{"day":"yesterday"}`, http.StatusUnauthorized},
		{"wrong secret", "another-secret-0123456789", now, body, body, http.StatusUnauthorized},
		{"signed 6 minutes ago", secret, now - 6*60, body, body, http.StatusUnauthorized},
		{"signed 6 minutes ahead", secret, now + 6*60, body, body, http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, gotID, gotBody := callReceiver(secret, signedRequest(t, c.secret, id, c.ts, c.signedBody, c.sentBody))
			require.Equal(t, c.want, status)
			if c.want == http.StatusNoContent {
				require.Equal(t, id, gotID)
				require.Equal(t, c.sentBody, gotBody)
			} else {
				require.Empty(t, gotID, "handle is not called")
			}
		})
	}

	for name, tamper := range map[string]func(h http.Header){
		"timestamp changed after signing": func(h http.Header) { h.Set("webhook-timestamp", strconv.FormatInt(now+1, 10)) },
		"id changed after signing":        func(h http.Header) { h.Set("webhook-id", id+"/1") },
		"no signature":                    func(h http.Header) { h.Del("webhook-signature") },
		"no id":                           func(h http.Header) { h.Del("webhook-id") },
		"timestamp not a number":          func(h http.Header) { h.Set("webhook-timestamp", "yesterday") },
		"malformed signature list":        func(h http.Header) { h.Set("webhook-signature", "v1,%%% v1") },
	} {
		r := signedRequest(t, secret, id, now, body, body)
		tamper(r.Header)
		status, _, _ := callReceiver(secret, r)
		require.Equal(t, http.StatusUnauthorized, status, name)
	}

	// During a rotation the sender lists both signatures; either secret verifies.
	r := signedRequest(t, secret, id, now, body, body)
	retired, err := executor.SignWebhook("retired-secret-0123456789", id, now, []byte(body))
	require.NoError(t, err)
	r.Header.Set("webhook-signature", retired+" "+r.Header.Get("webhook-signature"))
	status, _, _ := callReceiver(secret, r)
	require.Equal(t, http.StatusNoContent, status)
}

func TestReadmeHasReceiverExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("receiver_example_test.go")
	require.NoError(t, err)
	_, example, ok := strings.Cut(string(src), "// readme:receiver:"+"start\n")
	require.True(t, ok)
	example, _, ok = strings.Cut(example, "// readme:receiver:"+"end\n")
	require.True(t, ok)
	readme, err := os.ReadFile("../../docs/server.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), strings.TrimSpace(example),
		"docs/server.md's receiver example must be the receive func of receiver_example_test.go, character for character")
}
