package executor

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// received is what a test receiver saw.
type received struct {
	method        string
	host          string
	body          string
	contentLength int64
	header        http.Header
}

// receiver starts a server that records each request and answers with
// status and body.
func receiver(t *testing.T, status int, body string) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("receiver: reading body: %v", err)
		}
		got <- received{method: r.Method, host: r.Host, body: string(b), contentLength: r.ContentLength, header: r.Header.Clone()}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// loopback is the Allow of a caller whose receivers are httptest servers,
// which listen on 127.0.0.1: loopback is refused unless listed.
var loopback = []string{"127.0.0.1"}

func newCaller(t *testing.T, o HTTPOptions) *HTTPCaller {
	t.Helper()
	c, err := NewHTTPCaller(o)
	require.NoError(t, err)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func TestHTTPDeliversEachMethodWithBodyAndHeaders(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, "ok")
	c := newCaller(t, HTTPOptions{Allow: loopback})
	scheduled := time.Date(2026, 3, 1, 9, 30, 0, 120_000_000, time.FixedZone("CET", 3600))
	body := "{\"amount\": 12.5,\n \"note\": \"café ☕\"}\r\n\x00 trailing  "
	for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		resp, err := c.Do(t.Context(), HTTPCall{
			Method: method,
			URL:    srv.URL + "/hooks/billing?run=1",
			Headers: [][2]string{
				{"Content-Type", "application/json"},
				{"X-Api-Key", "  k3y with spaces "},
				{"x-multi", "first"},
				{"X-Multi", "second"},
				{"Host", "billing.internal"},
			},
			Body:        body,
			Execution:   9007199254740993,
			Task:        "billing.close-day",
			ScheduledAt: scheduled,
			Attempt:     2,
		})
		require.NoError(t, err, method)
		require.Equal(t, http.StatusOK, resp.Status)
		require.Equal(t, "ok", resp.Body)
		require.False(t, resp.Truncated)
		require.Positive(t, resp.Elapsed)

		r := <-got
		require.Equal(t, method, r.method)
		require.Equal(t, body, r.body, method)
		require.Equal(t, int64(len(body)), r.contentLength, method)
		require.Equal(t, "billing.internal", r.host)
		require.Equal(t, []string{"application/json"}, r.header["Content-Type"])
		require.Equal(t, "k3y with spaces", r.header.Get("X-Api-Key"), "the receiver trims a value's outer spaces, as HTTP says")
		require.Equal(t, []string{"first", "second"}, r.header["X-Multi"], "values of one name keep their order")
		require.Equal(t, "9007199254740993", r.header.Get("X-Xtimer-Execution"))
		require.Equal(t, "billing.close-day", r.header.Get("X-Xtimer-Task"))
		require.Equal(t, "2026-03-01T08:30:00.120Z", r.header.Get("X-Xtimer-Scheduled-At"))
		require.Equal(t, "2", r.header.Get("X-Xtimer-Attempt"))
		require.Equal(t, "xtimer/1", r.header.Get("User-Agent"))
		require.Equal(t, "no-referrer", r.header.Get("Referrer-Policy"))
		require.Empty(t, r.header.Values("X-Xtimer-Timestamp"), "unsigned")
		require.Empty(t, r.header.Values("X-Xtimer-Signature"), "unsigned")
	}
}

func TestHTTPOwnHeadersWinAndUserAgentCanBeSet(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusNoContent, "")
	c := newCaller(t, HTTPOptions{Allow: loopback})
	_, err := c.Do(t.Context(), HTTPCall{
		Method:    "post",
		URL:       srv.URL,
		Headers:   [][2]string{{"X-Xtimer-Task", "spoofed"}, {"User-Agent", "billing-cron"}},
		Execution: 7,
		Task:      "real",
		Attempt:   1,
	})
	require.NoError(t, err)
	r := <-got
	require.Equal(t, "POST", r.method)
	require.Equal(t, []string{"real"}, r.header["X-Xtimer-Task"])
	require.Equal(t, "billing-cron", r.header.Get("User-Agent"))
	require.Equal(t, "", r.body)
	require.Equal(t, int64(0), r.contentLength)
}

func TestHTTPSignedCallVerifiesAtTheReceiver(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, "")
	c := newCaller(t, HTTPOptions{Allow: loopback})
	body := `{"invoice":42}`
	before := time.Now().Unix()
	_, err := c.Do(t.Context(), HTTPCall{Method: "POST", URL: srv.URL, Body: body, Secret: "whsec_1", Execution: 1, Task: "t", Attempt: 1})
	require.NoError(t, err)
	r := <-got
	ts, err := strconv.ParseInt(r.header.Get("X-Xtimer-Timestamp"), 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, ts, before)
	require.LessOrEqual(t, ts, time.Now().Unix())
	sig := r.header.Get("X-Xtimer-Signature")
	require.Equal(t, Sign("whsec_1", ts, []byte(body)), sig)

	now := time.Now()
	require.True(t, VerifySignature("whsec_1", sig, ts, []byte(r.body), now, time.Minute))
	require.False(t, VerifySignature("whsec_2", sig, ts, []byte(r.body), now, time.Minute), "wrong secret")
	require.False(t, VerifySignature("whsec_1", sig, ts, []byte(`{"invoice":43}`), now, time.Minute), "changed body")
	require.False(t, VerifySignature("whsec_1", sig, ts, []byte(r.body), now.Add(10*time.Minute), time.Minute), "replayed later")
}

func TestHTTPSignedCallCarriesStandardWebhooksHeaders(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, "")
	c := newCaller(t, HTTPOptions{Allow: loopback})
	const secret, body, id = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `{"invoice":42}`, "billing/reconcile/1700000000000"
	_, err := c.Do(t.Context(), HTTPCall{Method: "POST", URL: srv.URL, Body: body, Secret: secret, ID: id, Execution: 1, Task: "reconcile", Attempt: 1,
		Headers: [][2]string{{"Webhook-Id", "forged"}, {"Webhook-Signature", "v1,forged"}}})
	require.NoError(t, err)
	r := <-got
	require.Equal(t, []string{id}, r.header.Values("Webhook-Id"), "the call's own headers cannot replace it")
	require.Equal(t, r.header.Get("X-Xtimer-Timestamp"), r.header.Get("Webhook-Timestamp"), "one timestamp for both signatures")
	require.Len(t, r.header.Values("Webhook-Signature"), 1)
	require.NoError(t, VerifyWebhook(secret, r.header, []byte(r.body), time.Now(), 0))
	ts, err := strconv.ParseInt(r.header.Get("X-Xtimer-Timestamp"), 10, 64)
	require.NoError(t, err)
	require.True(t, VerifySignature(secret, r.header.Get("X-Xtimer-Signature"), ts, []byte(r.body), time.Now(), 0), "the deprecated signature is still sent")
	require.ErrorIs(t, VerifyWebhook("whsec_c2Vjb25kLXNlY3JldA==", r.header, []byte(r.body), time.Now(), 0), ErrWebhookSignature)

	// A "whsec_" secret that is not base64 has no Standard Webhooks key:
	// the call is signed the deprecated way only, as before.
	_, err = c.Do(t.Context(), HTTPCall{Method: "POST", URL: srv.URL, Body: body, Secret: "whsec_1", ID: id, Task: "reconcile", Attempt: 1})
	require.NoError(t, err)
	r = <-got
	require.NotEmpty(t, r.header.Get("X-Xtimer-Signature"))
	require.Empty(t, r.header.Values("Webhook-Signature"))
	require.Empty(t, r.header.Values("Webhook-Id"))
}

func TestHTTPAnyTwoHundredIsSuccessUnlessSuccessCodesSaySo(t *testing.T) {
	t.Parallel()
	ok, _ := receiver(t, http.StatusOK, "fine")
	created, _ := receiver(t, http.StatusCreated, "made")
	accepted, _ := receiver(t, http.StatusAccepted, "")
	c := newCaller(t, HTTPOptions{Allow: loopback})

	for _, url := range []string{ok.URL, created.URL, accepted.URL} {
		_, err := c.Do(t.Context(), HTTPCall{URL: url})
		require.NoError(t, err, url)
	}

	resp, err := c.Do(t.Context(), HTTPCall{URL: created.URL, SuccessCodes: []int{201}})
	require.NoError(t, err)
	require.Equal(t, 201, resp.Status)

	resp, err = c.Do(t.Context(), HTTPCall{URL: ok.URL, SuccessCodes: []int{201}})
	require.EqualError(t, err, "HTTP 200 OK")
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 200, se.Code)
	require.Equal(t, HTTPResponse{Status: 200, Body: "fine", Elapsed: resp.Elapsed}, resp)
}

func TestHTTPServerErrorReturnsTheResponseAndAnError(t *testing.T) {
	t.Parallel()
	unavailable, _ := receiver(t, http.StatusServiceUnavailable, `{"error":"maintenance"}`)
	odd, _ := receiver(t, 599, "")
	c := newCaller(t, HTTPOptions{Allow: loopback})

	resp, err := c.Do(t.Context(), HTTPCall{Method: "POST", URL: unavailable.URL})
	require.EqualError(t, err, "HTTP 503 Service Unavailable")
	require.Equal(t, 503, resp.Status)
	require.Equal(t, `{"error":"maintenance"}`, resp.Body)

	resp, err = c.Do(t.Context(), HTTPCall{URL: odd.URL})
	require.EqualError(t, err, "HTTP 599")
	require.Equal(t, 599, resp.Status)

	_, err = c.Do(t.Context(), HTTPCall{URL: unavailable.URL, SuccessCodes: []int{200, 503}})
	require.NoError(t, err, "a listed code is a success, whatever it is")
}

func TestHTTPSlowReceiverTimesOutWithTheContextError(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c := newCaller(t, HTTPOptions{Allow: loopback})

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	resp, err := c.Do(ctx, HTTPCall{URL: srv.URL})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 0, resp.Status)
	require.Contains(t, err.Error(), "xtimer: GET 127.0.0.1:")

	// The scheduler's executor.Call cancels with ErrTimedOut as the cause.
	ctx2, cancel2 := context.WithCancelCause(t.Context())
	time.AfterFunc(50*time.Millisecond, func() { cancel2(ErrTimedOut) })
	_, err = c.Do(ctx2, HTTPCall{URL: srv.URL})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, ErrTimedOut)
}

func TestHTTPSlowBodyTimesOutWithTheContextError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c := newCaller(t, HTTPOptions{Allow: loopback})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	resp, err := c.Do(ctx, HTTPCall{URL: srv.URL})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "reading the response body")
	require.Equal(t, 200, resp.Status)
	require.Equal(t, "partial", resp.Body)
}

func TestHTTPReceiverDownIsAnError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c := newCaller(t, HTTPOptions{Allow: loopback})

	resp, err := c.Do(t.Context(), HTTPCall{Method: "POST", URL: "http://" + addr + "/hook"})
	require.Error(t, err)
	require.Equal(t, 0, resp.Status)
	require.Contains(t, err.Error(), "xtimer: POST "+addr+": dial tcp "+addr+": connect: connection refused")
	require.NotErrorIs(t, err, ErrForbiddenDestination)
}

func TestHTTPLongResponseIsTruncatedAtARuneBoundary(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 9) + "é" + strings.Repeat("z", 2<<20) // é is 2 bytes: bytes 9 and 10
	srv, _ := receiver(t, http.StatusOK, long)
	exact, _ := receiver(t, http.StatusOK, "0123456789")
	invalid, _ := receiver(t, http.StatusOK, "ab\xffcd")
	c := newCaller(t, HTTPOptions{Allow: loopback, MaxResponse: 10})

	resp, err := c.Do(t.Context(), HTTPCall{URL: srv.URL})
	require.NoError(t, err)
	require.True(t, resp.Truncated)
	require.Equal(t, "aaaaaaaaa", resp.Body, "the é that does not fit whole is cut")

	resp, err = c.Do(t.Context(), HTTPCall{URL: exact.URL})
	require.NoError(t, err)
	require.False(t, resp.Truncated)
	require.Equal(t, "0123456789", resp.Body)

	resp, err = c.Do(t.Context(), HTTPCall{URL: invalid.URL})
	require.NoError(t, err)
	require.Equal(t, "ab\uFFFDcd", resp.Body)

	def := newCaller(t, HTTPOptions{Allow: loopback})
	resp, err = def.Do(t.Context(), HTTPCall{URL: srv.URL})
	require.NoError(t, err)
	require.True(t, resp.Truncated)
	require.Len(t, resp.Body, DefaultMaxResponse)
}

func TestCutUTF8KeepsWholeRunes(t *testing.T) {
	t.Parallel()
	s := []byte("ab€cd") // € is 3 bytes: 2, 3, 4
	for n, want := range map[int]string{0: "", 1: "a", 2: "ab", 3: "ab", 4: "ab", 5: "ab€", 6: "ab€c", 7: "ab€cd", 8: "ab€cd"} {
		require.Equal(t, want, string(cutUTF8(s, n)), n)
	}
	require.Equal(t, "\xff\xff", string(cutUTF8([]byte("\xff\xff\xff"), 2)))
}

func TestHTTPRefusesForbiddenAddressesWithoutConnecting(t *testing.T) {
	t.Parallel()
	c := newCaller(t, HTTPOptions{})
	for url, why := range map[string]string{
		"http://169.254.169.254/latest/meta-data/":    "169.254.169.254 is link-local (cloud metadata)",
		"http://[fd00:ec2::254]/latest/meta-data/":    "fd00:ec2::254 is a cloud metadata address",
		"http://100.100.100.200/latest/meta-data/":    "100.100.100.200 is a cloud metadata address",
		"http://[::ffff:169.254.169.254]/":            "169.254.169.254 is link-local (cloud metadata)",
		"http://0.0.0.0:80/":                          "0.0.0.0 is unspecified",
		"http://[64:ff9b::a9fe:a9fe]/computeMetadata": "NAT64 of 169.254.169.254",
		"http://168.63.129.16/machine?comp=goalstate": "168.63.129.16 is a cloud metadata address",
		"http://[::a9fe:a9fe]/latest/meta-data/":      "IPv4-compatible form of 169.254.169.254",
	} {
		resp, err := c.Do(t.Context(), HTTPCall{URL: url})
		require.ErrorIs(t, err, ErrForbiddenDestination, url)
		require.Contains(t, err.Error(), why, url)
		require.Equal(t, 0, resp.Status)
	}
}

// Issue 25, hole 5: without an explicit allow, a callback may not call the
// scheduler's own host — the console at 127.0.0.1:PORT/xtimer/api/..., Redis
// at localhost:6379 — in any spelling of a loopback address.
func TestHTTPRefusesLoopbackUnlessAllowed(t *testing.T) {
	t.Parallel()
	console, got := receiver(t, http.StatusOK, `{"tasks":[]}`)
	port := console.URL[strings.LastIndex(console.URL, ":")+1:]
	c := newCaller(t, HTTPOptions{})
	for url, why := range map[string]string{
		console.URL + "/xtimer/api/tasks":                "127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it",
		"http://127.1.2.3:" + port + "/xtimer/api/tasks": "127.1.2.3 is loopback",
		"http://localhost:" + port + "/xtimer/api/tasks": "localhost is a loopback name, refused unless HTTPOptions.Allow lists it",
		"http://LocalHost.:" + port + "/":                "LocalHost. is a loopback name",
		"http://console.localhost:" + port + "/":         "console.localhost is a loopback name",
		"http://localhost:6379/":                         "localhost is a loopback name",
		"http://[::1]:" + port + "/":                     "::1 is loopback",
		"http://[::ffff:127.0.0.1]:" + port + "/":        "127.0.0.1 is loopback",
		"http://[::127.0.0.1]:" + port + "/":             "::7f00:1 is loopback (IPv4-compatible form of 127.0.0.1)",
		"http://[64:ff9b::127.0.0.1]:" + port + "/":      "64:ff9b::7f00:1 is loopback (NAT64 of 127.0.0.1)",
		"http://0.0.0.0:" + port + "/":                   "0.0.0.0 is unspecified",
		"http://[::]:" + port + "/":                      ":: is unspecified",
		"http://[::ffff:0.0.0.0]:" + port + "/":          "0.0.0.0 is unspecified",
	} {
		resp, err := c.Do(t.Context(), HTTPCall{Method: "POST", URL: url, Body: "{}"})
		require.ErrorIs(t, err, ErrForbiddenDestination, url)
		require.Contains(t, err.Error(), why, url)
		require.NotContains(t, err.Error(), "/xtimer/api", "the error names the host, not the path")
		require.Equal(t, 0, resp.Status, url)
	}
	require.Empty(t, got, "nothing reached the console")

	for _, allow := range [][]string{{"127.0.0.1"}, {"127.0.0.0/8"}, {"::ffff:127.0.0.1"}, {"0.0.0.0/0"}} {
		resp, err := newCaller(t, HTTPOptions{Allow: allow}).Do(t.Context(), HTTPCall{URL: console.URL + "/xtimer/api/tasks"})
		require.NoError(t, err, allow)
		require.Equal(t, `{"tasks":[]}`, resp.Body)
		<-got
	}
}

// A name that is not a localhost name but resolves to loopback is refused
// after DNS, by the dialer's Control hook: the request below skips Do's
// early checks and goes straight to the transport.
func TestHTTPDialerRefusesLoopbackAfterDNS(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, "")
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, allow := range [][]string{nil, {"billing.internal", "10.0.0.0/8"}, {"::1"}} {
		c := newCaller(t, HTTPOptions{Allow: allow})
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://localhost:"+port+"/", nil)
		require.NoError(t, err)
		resp, err := c.client.Do(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		require.ErrorIs(t, err, ErrForbiddenDestination, allow)
		require.Contains(t, err.Error(), "127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it", allow)
	}
	require.Empty(t, got)
}

func TestHTTPAllowFencesDestinationsByNameOrAddress(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, "")
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, tc := range []struct {
		allow []string
		url   string
		why   string // "" when allowed
	}{
		{[]string{"10.0.0.0/8"}, srv.URL, "127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it"},
		{[]string{"10.0.0.0/8"}, "http://localhost:" + port, "localhost is a loopback name, refused unless"},
		{[]string{"billing.internal"}, srv.URL, "127.0.0.1 is loopback, refused unless"},
		{[]string{"billing.internal"}, "http://localhost:" + port, "localhost is a loopback name, refused unless"},
		{[]string{"*.localhost"}, "http://localhost:" + port, "localhost is a loopback name, refused unless"},
		{[]string{"127.0.0.0/8"}, srv.URL, ""},
		{[]string{"127.0.0.1", "::1"}, "http://localhost:" + port, ""},
		{[]string{"localhost"}, "http://localhost:" + port, ""},
		{[]string{"localhost"}, srv.URL, "127.0.0.1 is loopback, refused unless"},
		{[]string{"127.0.0.1"}, "http://10.0.0.1:" + port, "10.0.0.1 is not in HTTPOptions.Allow"},
	} {
		c := newCaller(t, HTTPOptions{Allow: tc.allow})
		_, err := c.Do(t.Context(), HTTPCall{URL: tc.url})
		if tc.why == "" {
			require.NoError(t, err, "%v %s", tc.allow, tc.url)
			<-got
			continue
		}
		require.ErrorIs(t, err, ErrForbiddenDestination, "%v %s", tc.allow, tc.url)
		require.Contains(t, err.Error(), tc.why, "%v %s", tc.allow, tc.url)
	}
	require.Empty(t, got)
}

func TestHTTPRefusesARedirectToForbiddenAddresses(t *testing.T) {
	t.Parallel()
	for _, to := range []string{"http://169.254.169.254/latest/meta-data/iam", "http://[fd00:ec2::254]/", "http://[::]:80/"} {
		srv := httptest.NewServer(http.RedirectHandler(to, http.StatusFound))
		t.Cleanup(srv.Close)
		c := newCaller(t, HTTPOptions{Allow: loopback})
		resp, err := c.Do(t.Context(), HTTPCall{URL: srv.URL})
		require.ErrorIs(t, err, ErrForbiddenDestination, to)
		require.Contains(t, err.Error(), "xtimer: GET "+srv.Listener.Addr().String()+": redirected to ", to)
		require.Equal(t, 0, resp.Status)
	}

	// Allowed by name; the redirect goes to an address that is not.
	target, got := receiver(t, http.StatusOK, "")
	srv := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	c := newCaller(t, HTTPOptions{Allow: []string{"localhost"}})
	_, err := c.Do(t.Context(), HTTPCall{URL: "http://localhost:" + port})
	require.ErrorIs(t, err, ErrForbiddenDestination)
	require.Contains(t, err.Error(), "127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it")
	require.Empty(t, got)
}

func TestHTTPRedirectsKeepMethodAndBodyOn307And308(t *testing.T) {
	t.Parallel()
	target, got := receiver(t, http.StatusOK, "")
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.RedirectHandler(target.URL+"/moved", code))
		t.Cleanup(srv.Close)
		c := newCaller(t, HTTPOptions{Allow: loopback})
		_, err := c.Do(t.Context(), HTTPCall{Method: "PUT", URL: srv.URL, Body: "payload", Headers: [][2]string{{"X-Api-Key", "k"}}, Task: "t"})
		require.NoError(t, err)
		r := <-got
		require.Equal(t, "PUT", r.method, code)
		require.Equal(t, "payload", r.body, code)
		require.Empty(t, r.header.Get("X-Api-Key"), "another port: another origin")
		require.Empty(t, r.header.Get("Referer"), code)
		require.Equal(t, "no-referrer", r.header.Get("Referrer-Policy"), code)
		require.Equal(t, "t", r.header.Get("X-Xtimer-Task"))
	}

	// Within one origin the call's headers and signature are kept.
	same := make(chan http.Header, 1)
	mux := http.NewServeMux()
	mux.Handle("/", http.RedirectHandler("/moved", http.StatusTemporaryRedirect))
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { same <- r.Header.Clone() })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := newCaller(t, HTTPOptions{Allow: loopback})
	_, err := c.Do(t.Context(), HTTPCall{Method: "PUT", URL: srv.URL + "/", Body: "payload", Secret: "s", Headers: [][2]string{{"X-Api-Key", "k"}}, Task: "t", ID: "app/t/1"})
	require.NoError(t, err)
	h := <-same
	require.Equal(t, "k", h.Get("X-Api-Key"), "same origin: user headers are kept")
	require.NotEmpty(t, h.Get("X-Xtimer-Signature"))
	require.NoError(t, VerifyWebhook("s", h, []byte("payload"), time.Now(), 0))
}

// A redirect to another origin (another host, or another port of the
// same host, issue 25's hole 5) carries none of the call's own headers but
// Content-Type, and no signature: the first receiver's credentials and a
// signature by the task's key would vouch for the call to whoever the
// redirect names. No redirect carries a Referer, which would hand on the
// first URL's query token.
func TestHTTPRedirectToAnotherOriginDropsTheCallsHeadersAndSignature(t *testing.T) {
	t.Parallel()
	target, got := receiver(t, http.StatusOK, "")
	port := target.URL[strings.LastIndex(target.URL, ":")+1:]
	for _, to := range []string{"http://localhost:" + port + "/", target.URL + "/"} {
		srv := httptest.NewServer(http.RedirectHandler(to, http.StatusTemporaryRedirect))
		t.Cleanup(srv.Close)
		c := newCaller(t, HTTPOptions{Allow: []string{"127.0.0.1", "localhost"}})
		_, err := c.Do(t.Context(), HTTPCall{
			Method: "POST", URL: srv.URL + "/hook?token=q-s3cret", Body: "{}", Secret: "s", Task: "t", ID: "app/t/1",
			Headers: [][2]string{{"Content-Type", "application/json"}, {"X-Api-Key", "k"}, {"Authorization", "Bearer b"}},
		})
		require.NoError(t, err)
		r := <-got
		require.Equal(t, "{}", r.body, to)
		require.Equal(t, "application/json", r.header.Get("Content-Type"), to)
		require.Empty(t, r.header.Values("X-Api-Key"), to)
		require.Empty(t, r.header.Values("Authorization"), to)
		require.Equal(t, "t", r.header.Get("X-Xtimer-Task"), to)
		require.Empty(t, r.header.Get("X-Xtimer-Signature"), to)
		require.Empty(t, r.header.Get("X-Xtimer-Timestamp"), to)
		require.Empty(t, r.header.Get("Webhook-Signature"), to)
		require.Empty(t, r.header.Get("Webhook-Timestamp"), to)
		require.Empty(t, r.header.Get("Referer"), to)
	}
}

func TestHTTPFollowsAtMostThreeRedirects(t *testing.T) {
	t.Parallel()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if n < limit {
			http.Redirect(w, r, srv.URL+"/"+strconv.Itoa(n+1)+"?limit="+r.URL.Query().Get("limit"), http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "end")
	}))
	t.Cleanup(srv.Close)
	c := newCaller(t, HTTPOptions{Allow: loopback})

	resp, err := c.Do(t.Context(), HTTPCall{URL: srv.URL + "/0?limit=3"})
	require.NoError(t, err)
	require.Equal(t, "end", resp.Body)

	_, err = c.Do(t.Context(), HTTPCall{URL: srv.URL + "/0?limit=4"})
	require.ErrorContains(t, err, "stopped after 3 redirects")
}

func TestHTTPNeverRedirectsFromHTTPSToHTTP(t *testing.T) {
	t.Parallel()
	plain, got := receiver(t, http.StatusOK, "")
	tlsSrv := httptest.NewTLSServer(http.RedirectHandler(plain.URL, http.StatusFound))
	t.Cleanup(tlsSrv.Close)
	c := newCaller(t, HTTPOptions{Allow: loopback})
	c.transport.TLSClientConfig = tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()

	_, err := c.Do(t.Context(), HTTPCall{URL: tlsSrv.URL})
	require.ErrorContains(t, err, "redirected to "+plain.Listener.Addr().String()+": downgrade from https to http not allowed")
	require.Empty(t, got)
}

func TestHTTPRejectsBadCalls(t *testing.T) {
	t.Parallel()
	c := newCaller(t, HTTPOptions{Allow: loopback})
	_, err := c.Do(t.Context(), HTTPCall{URL: "ftp://127.0.0.1/x"})
	require.EqualError(t, err, `xtimer: GET 127.0.0.1: scheme "ftp" not allowed (want http or https)`)
	_, err = c.Do(t.Context(), HTTPCall{URL: "http://127.0.0.1:1/", Headers: [][2]string{{"X-Bad", "a\r\nX-Injected: 1"}}})
	require.ErrorContains(t, err, "invalid header field value")
	_, err = c.Do(t.Context(), HTTPCall{Method: "BAD METHOD", URL: "http://127.0.0.1:1/"})
	require.ErrorContains(t, err, "invalid method")
	require.False(t, errors.Is(err, ErrForbiddenDestination))
}
