package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// verify reports whether a callback from xtimer-server is genuine: signed
// with secret less than 5 minutes ago. body is the request body, read whole.
func verify(r *http.Request, body []byte, secret string) bool {
	ts := r.Header.Get("X-Xtimer-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := "v1=" + hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(r.Header.Get("X-Xtimer-Signature")), []byte(want))
}

// readme:receiver:end

// signedRequest is a callback as xtimer sends it, signed by the executor.
func signedRequest(secret string, ts int64, signedBody, sentBody string) (*http.Request, []byte) {
	r := httptest.NewRequest(http.MethodPost, "/reconcile", strings.NewReader(sentBody))
	r.Header.Set("X-Xtimer-Timestamp", strconv.FormatInt(ts, 10))
	r.Header.Set("X-Xtimer-Signature", executor.Sign(secret, ts, []byte(signedBody)))
	return r, []byte(sentBody)
}

func TestReceiverExampleAcceptsOnlyGenuineCallbacks(t *testing.T) {
	t.Parallel()
	const secret, body = "whsec-0123456789abcdef", `{"day":"today"}`
	now := time.Now().Unix()
	for _, c := range []struct {
		name                 string
		secret               string
		ts                   int64
		signedBody, sentBody string
		want                 bool
	}{
		{"genuine", secret, now, body, body, true},
		{"genuine, empty body", secret, now, "", "", true},
		{"signed 4 minutes ago", secret, now - 4*60, body, body, true},
		{"body changed", secret, now, body, `{"day":"yesterday"}`, false},
		{"wrong secret", "another-secret-0123456789", now, body, body, false},
		{"signed 6 minutes ago", secret, now - 6*60, body, body, false},
		{"signed 6 minutes ahead", secret, now + 6*60, body, body, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, got := signedRequest(c.secret, c.ts, c.signedBody, c.sentBody)
			require.Equal(t, c.want, verify(r, got, secret))
		})
	}

	r, got := signedRequest(secret, now, body, body)
	r.Header.Set("X-Xtimer-Timestamp", strconv.FormatInt(now+1, 10))
	require.False(t, verify(r, got, secret), "timestamp changed after signing")
	r.Header.Del("X-Xtimer-Signature")
	require.False(t, verify(r, got, secret), "no signature")
	r.Header.Set("X-Xtimer-Timestamp", "yesterday")
	require.False(t, verify(r, got, secret), "timestamp not a number")
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
		"docs/server.md's receiver example must be the verify func of receiver_example_test.go, character for character")
}
