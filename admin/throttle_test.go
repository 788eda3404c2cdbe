package admin

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// syncBuffer is a log destination the handler and the test share.
type syncBuffer struct{ testsvc.LogBuffer }

func (b *syncBuffer) lines() []string {
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}

// Issue 25, hole 6: a burst of wrong passwords is answered 429 with
// Retry-After, after which the right password does not help (the
// authorizer is not even asked) until the bucket refills on the
// scheduler's clock; another client with another credential is not
// affected; every failure is logged without the secret.
func TestFailedLoginsAreThrottledPerClientAndUserName(t *testing.T) {
	t.Parallel()
	const password = "correct horse battery staple"
	const token = "bearer-token-0123456789"
	var calls atomic.Int64
	basic, bearer := BasicAuth("ops", password), BearerToken(token)
	logs := &syncBuffer{}
	f := setup(t, fixtureOpts{admin: Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Authorize: func(r *http.Request) (Principal, error) {
			calls.Add(1)
			return AnyOf(basic, bearer)(r)
		},
	}})
	send := func(remote string, auth func(*http.Request)) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, f.URL+"api/apps", nil)
		req.RemoteAddr = remote
		auth(req)
		rec := httptest.NewRecorder()
		f.Server.Config.Handler.ServeHTTP(rec, req)
		return rec
	}
	wrong := func(n int) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth("ops", fmt.Sprintf("wrong-password-%d", n)) }
	}
	right := func(r *http.Request) { r.SetBasicAuth("ops", password) }

	for i := range loginBurst {
		require.Equal(t, http.StatusUnauthorized, send("203.0.113.5:40000", wrong(i)).Code, "attempt %d", i)
	}
	before := calls.Load()
	rec := send("203.0.113.5:40001", right)
	require.Equal(t, http.StatusTooManyRequests, rec.Code, rec.Body.String())
	require.Equal(t, "60", rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), `"code":"too_many_requests"`)
	require.Equal(t, before, calls.Load(), "the authorizer is not called while throttled")

	// Another client with a credential of its own is served; the same
	// user name from another address is throttled with it.
	require.Equal(t, http.StatusOK, send("198.51.100.7:5000", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }).Code)
	require.Equal(t, http.StatusUnauthorized, send("198.51.100.7:5000", func(r *http.Request) { r.SetBasicAuth("alice", "nope") }).Code)
	require.Equal(t, http.StatusTooManyRequests, send("198.51.100.8:5000", right).Code, "the user name has no attempt left")
	// That success did not reset the throttled client's count.
	require.Equal(t, http.StatusTooManyRequests, send("203.0.113.5:40002", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }).Code)

	require.Len(t, logs.lines(), loginLogBurst, "ten lines, then the log's own limit")

	f.Clock.Advance(loginRefill)
	require.Equal(t, http.StatusOK, send("203.0.113.5:40003", right).Code, "a minute later, one attempt")
	require.Equal(t, http.StatusUnauthorized, send("203.0.113.5:40004", wrong(99)).Code)
	rec = send("203.0.113.5:40005", right)
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "60", rec.Header().Get("Retry-After"))
	f.Clock.Advance(loginBurst * loginRefill)
	for range loginBurst {
		require.Equal(t, http.StatusOK, send("203.0.113.5:40006", right).Code, "recovered")
	}

	lines := logs.lines()
	var failed []string
	for _, l := range lines {
		require.NotContains(t, l, "wrong-password", "no password is logged")
		require.NotContains(t, l, password)
		require.NotContains(t, l, token)
		if strings.Contains(l, "failed login") || strings.Contains(l, "login throttled") {
			failed = append(failed, l)
		}
	}
	require.Len(t, failed, len(lines))
	require.Contains(t, failed[0], `level=WARN msg="xtimer/admin: failed login" client=203.0.113.5 path=/xtimer/api/apps user=ops`)
	require.Contains(t, failed[loginLogBurst], `client=203.0.113.5 path=/xtimer/api/apps user=ops unlogged=4`,
		"the next line counts the four left out")
	require.Contains(t, failed[loginLogBurst+1], `msg="xtimer/admin: login throttled after repeated failures" client=203.0.113.5`)
}

func TestLoginThrottleKeysIPv6ByPrefixAndLogsWithinItsLimit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	logs := &syncBuffer{}
	th := newLoginThrottle(func() time.Time { return now }, slog.New(slog.NewTextHandler(logs, nil)))
	req := func(remote string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/xtimer/", nil)
		r.RemoteAddr = remote
		r.Header.Set("Authorization", "Bearer wrong")
		return r
	}
	for i := range loginBurst {
		th.failed(req(fmt.Sprintf("[2001:db8:1:2::%x]:443", i+1)))
	}
	rec := httptest.NewRecorder()
	require.True(t, th.throttled(rec, req("[2001:db8:1:2:ffff::1]:443")), "one /64, one client")
	require.False(t, th.throttled(httptest.NewRecorder(), req("[2001:db8:1:3::1]:443")), "another /64")
	require.False(t, th.throttled(httptest.NewRecorder(), req("[::ffff:192.0.2.1]:443")))

	// Ten lines, the rest counted; six seconds on, one line says how many
	// were left out.
	require.Len(t, logs.lines(), loginLogBurst)
	now = now.Add(loginLogRefill)
	th.failed(req("192.0.2.9:1"))
	last := logs.lines()[loginLogBurst]
	require.Contains(t, last, "client=192.0.2.9")
	require.Contains(t, last, "unlogged=1", "the throttled request was not logged within the burst")
}

func TestLoginThrottleKeepsAtMostMaxKeys(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	th := newLoginThrottle(func() time.Time { return now }, slog.New(slog.DiscardHandler))
	first := httptest.NewRequest(http.MethodGet, "/xtimer/", nil)
	first.RemoteAddr = "192.0.2.1:1"
	for range loginBurst {
		th.failed(first)
	}
	for i := range loginMaxKeys + 500 {
		now = now.Add(time.Millisecond)
		r := httptest.NewRequest(http.MethodGet, "/xtimer/", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		th.failed(r)
		require.LessOrEqual(t, len(th.keys), loginMaxKeys)
	}
	require.Len(t, th.keys, loginMaxKeys)
	require.NotContains(t, th.keys, "client 192.0.2.1", "the oldest went first")
}
