package executor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
)

// Defaults of HTTPOptions.
const (
	// DefaultMaxResponse is how many bytes of a response body are kept.
	DefaultMaxResponse = 64 << 10
	// DefaultMaxConnsPerHost bounds connections per destination host.
	DefaultMaxConnsPerHost = 64
)

const (
	dialTimeout = 10 * time.Second
	tlsTimeout  = 10 * time.Second
	// maxRedirects is how many redirects a call follows.
	maxRedirects = 3
	// maxDrain is how much of a body beyond MaxResponse is read and thrown
	// away so that the connection can be reused; a longer body costs a
	// new connection instead.
	maxDrain = 1 << 20
	// userAgent is sent unless the call sets its own User-Agent.
	userAgent = "xtimer/1"
)

// Headers every call carries. They equal xtimer.Header* (the root package
// tests that they agree); executor cannot import the root package.
const (
	headerExecution   = "X-Xtimer-Execution"
	headerTask        = "X-Xtimer-Task"
	headerScheduledAt = "X-Xtimer-Scheduled-At"
	headerAttempt     = "X-Xtimer-Attempt"
	headerShard       = "X-Xtimer-Shard"
	headerShards      = "X-Xtimer-Shards"
	headerTimestamp   = "X-Xtimer-Timestamp"
	headerSignature   = "X-Xtimer-Signature"
)

// scheduledAtLayout is RFC 3339 in UTC with milliseconds.
const scheduledAtLayout = "2006-01-02T15:04:05.000Z"

// HTTPOptions configures an HTTPCaller.
type HTTPOptions struct {
	// Allow lists destinations allowed: host names ("billing.internal"),
	// wildcard domains ("*.example.com", which does not match example.com
	// itself), IPs and CIDRs ("10.0.0.0/8", "fd00::/8"). A destination
	// passes when its host name matches a name entry or the address dialed
	// matches an IP/CIDR entry. Empty allows any destination except
	// loopback and the forbidden ones (unspecified, link-local, cloud
	// metadata), which are refused even when listed here.
	//
	// Loopback (127.0.0.0/8, ::1, their IPv4-mapped, IPv4-compatible and
	// NAT64 forms, and localhost names) is refused unless listed: an IP or
	// CIDR entry holding the address ("127.0.0.1", "::1", "127.0.0.0/8";
	// "0.0.0.0/0" holds it too), or a "localhost" name entry for URLs that
	// name localhost. A callback to loopback reaches the host's own
	// services (the console, Redis), so another name entry, even one whose
	// DNS answers 127.0.0.1, never allows it.
	Allow []string
	// MaxResponse is how many bytes of a response body are kept. Defaults
	// to DefaultMaxResponse (64 KiB).
	MaxResponse int
	// MaxConnsPerHost bounds connections per destination host. Defaults to
	// DefaultMaxConnsPerHost (64).
	MaxConnsPerHost int
	// Propagator writes the trace context of a call's ctx into its request
	// headers (propagation.TraceContext: traceparent, tracestate), after
	// the call's own headers, so the receiver's spans join the caller's
	// trace. Nil, the default, writes none.
	Propagator propagation.TextMapPropagator
}

// HTTPCaller sends HTTP callbacks. It holds one client whose dialer checks
// every address it connects to, for the first request and for redirects
// alike, so a host name that resolves to a metadata address is refused too.
// It is safe for concurrent use; share one per scheduler.
type HTTPCaller struct {
	allow       allowlist
	maxResponse int
	transport   *http.Transport
	client      *http.Client
	resolver    *net.Resolver
	propagator  propagation.TextMapPropagator // nil: no trace headers
}

// NewHTTPCaller returns a caller configured by o. A bad Allow entry gives
// an *AllowError naming it.
func NewHTTPCaller(o HTTPOptions) (*HTTPCaller, error) {
	allow, err := parseAllow(o.Allow)
	if err != nil {
		return nil, err
	}
	if o.MaxResponse < 0 {
		return nil, fmt.Errorf("xtimer: HTTPOptions.MaxResponse %d: negative", o.MaxResponse)
	}
	if o.MaxConnsPerHost < 0 {
		return nil, fmt.Errorf("xtimer: HTTPOptions.MaxConnsPerHost %d: negative", o.MaxConnsPerHost)
	}
	if o.MaxResponse == 0 {
		o.MaxResponse = DefaultMaxResponse
	}
	if o.MaxConnsPerHost == 0 {
		o.MaxConnsPerHost = DefaultMaxConnsPerHost
	}
	c := &HTTPCaller{allow: allow, maxResponse: o.MaxResponse, resolver: net.DefaultResolver, propagator: o.Propagator}
	c.transport = &http.Transport{
		// No proxy, not even from the environment: a proxy would dial the
		// destination for us, and the Control hook would only see the
		// proxy's address.
		Proxy:               nil,
		DialContext:         c.dialContext,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: tlsTimeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: o.MaxConnsPerHost,
		MaxConnsPerHost:     o.MaxConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		// No ResponseHeaderTimeout: the caller's ctx bounds the whole call,
		// headers and body.
		ExpectContinueTimeout: time.Second,
	}
	c.client = &http.Client{Transport: c.transport, CheckRedirect: c.checkRedirect}
	return c, nil
}

// CloseIdleConnections closes connections kept for reuse; call it when the
// scheduler stops.
func (c *HTTPCaller) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// HTTPCall is one request.
type HTTPCall struct {
	// Method defaults to GET. A GET may carry a body.
	Method, URL string
	// Headers are name, value pairs, added in order (names are
	// canonicalized; several values of one name keep their order). A
	// "Host" header sets the request's Host. A User-Agent replaces the
	// default "xtimer/1". The X-Xtimer-* headers are set after these and
	// replace any of the same name.
	Headers [][2]string
	// Body is sent byte for byte, with its Content-Length.
	Body string
	// Secret keys the signatures; "" sends the call unsigned. A signed
	// call carries X-Xtimer-Timestamp and X-Xtimer-Signature (Sign,
	// deprecated) and the Standard Webhooks headers webhook-id,
	// webhook-timestamp and webhook-signature (SignWebhook, one
	// signature). Those need an ID, and a key: a "whsec_" secret whose
	// rest is not base64 has none, and such a call carries the X-Xtimer-*
	// signature only.
	Secret string
	// ID is the webhook-id of a signed call: the fire's run ID, the same on
	// every attempt, so that receivers deduplicate on it.
	ID string
	// Execution, Task, ScheduledAt and Attempt fill the X-Xtimer-* headers.
	Execution   int64
	Task        string
	ScheduledAt time.Time
	Attempt     int
	// Shards, when above 0, is how many shards the fire has, and Shard
	// the call's (0 to Shards-1): they are sent as X-Xtimer-Shard and
	// X-Xtimer-Shards. Unsharded calls send neither.
	Shard, Shards int
	// SuccessCodes are the statuses that count as success; empty means
	// any 2xx.
	SuccessCodes []int
}

// HTTPResponse is what came back. Status is 0 when there was no response.
type HTTPResponse struct {
	Status int
	// Body is the first MaxResponse bytes of the body, cut at a UTF-8
	// boundary, with invalid UTF-8 replaced by U+FFFD.
	Body string
	// Truncated reports that the body was longer than MaxResponse.
	Truncated bool
	// Elapsed runs from sending the request to the last byte read.
	Elapsed time.Duration
}

// StatusError is the error of a response whose status is not a success.
type StatusError struct {
	Code int
}

// Error is "HTTP 503 Service Unavailable".
func (e *StatusError) Error() string {
	if t := http.StatusText(e.Code); t != "" {
		return "HTTP " + strconv.Itoa(e.Code) + " " + t
	}
	return "HTTP " + strconv.Itoa(e.Code)
}

// userHeadersKey carries the names of a call's own headers to checkRedirect.
type userHeadersKey struct{}

// Do sends call under ctx; the caller sets the timeout on ctx. The error is
// nil only for a success status. A non-success status returns the response
// and a *StatusError ("HTTP 503 Service Unavailable"); a forbidden
// destination, for the URL or a redirect, an error wrapping
// ErrForbiddenDestination; a cancelled or expired ctx an error wrapping
// ctx.Err() (and context.Cause(ctx) when it differs). Errors other than
// *StatusError name the method and host, never the path or query, which may
// hold tokens.
func (c *HTTPCaller) Do(ctx context.Context, call HTTPCall) (HTTPResponse, error) {
	method := strings.ToUpper(call.Method)
	if method == "" {
		method = http.MethodGet
	}
	host := call.URL
	if u, err := url.Parse(call.URL); err == nil {
		host = u.Host
	}
	fail := func(err error) error { return fmt.Errorf("xtimer: %s %s: %w", method, host, err) }

	names := make([]string, 0, len(call.Headers))
	for _, h := range call.Headers {
		names = append(names, h[0])
	}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, userHeadersKey{}, names), method, call.URL, strings.NewReader(call.Body))
	if err != nil {
		return HTTPResponse{}, fail(unwrapURLError(err))
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return HTTPResponse{}, fail(fmt.Errorf("scheme %q not allowed (want http or https)", req.URL.Scheme))
	}
	// The dialer would refuse these too; this fails before opening a socket.
	if err = c.checkHost(req.URL.Hostname()); err != nil {
		return HTTPResponse{}, fail(err)
	}
	for _, h := range call.Headers {
		if strings.EqualFold(h[0], "Host") {
			req.Host = h[1]
			continue
		}
		req.Header.Add(h[0], h[1])
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	if c.propagator != nil {
		c.propagator.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	}
	// The callback's own policy, for a receiver (or a proxy, or a browser
	// it hands the call to) that passes the URL on: its query may hold a
	// token. Go's client never sends a Referer of its own (checkRedirect).
	req.Header.Set("Referrer-Policy", "no-referrer")
	req.Header.Set(headerExecution, strconv.FormatInt(call.Execution, 10))
	req.Header.Set(headerTask, call.Task)
	req.Header.Set(headerScheduledAt, call.ScheduledAt.UTC().Format(scheduledAtLayout))
	req.Header.Set(headerAttempt, strconv.Itoa(call.Attempt))
	if call.Shards > 0 {
		req.Header.Set(headerShard, strconv.Itoa(call.Shard))
		req.Header.Set(headerShards, strconv.Itoa(call.Shards))
	}
	if call.Secret != "" {
		ts := time.Now().Unix()
		req.Header.Set(headerTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(headerSignature, Sign(call.Secret, ts, []byte(call.Body)))
		if sig, keyErr := SignWebhook(call.Secret, call.ID, ts, []byte(call.Body)); keyErr == nil && call.ID != "" {
			req.Header.Set(headerWebhookID, call.ID)
			req.Header.Set(headerWebhookTimestamp, strconv.FormatInt(ts, 10))
			req.Header.Set(headerWebhookSignature, sig)
		}
	}

	start := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
			if u, perr := url.Parse(ue.URL); perr == nil && u.Host != host {
				err = fmt.Errorf("redirected to %s: %w", u.Host, err)
			}
		}
		return HTTPResponse{Elapsed: time.Since(start)}, fail(ctxErr(ctx, err))
	}
	b, readErr := io.ReadAll(io.LimitReader(resp.Body, int64(c.maxResponse)+1))
	out := HTTPResponse{Status: resp.StatusCode, Elapsed: time.Since(start)}
	if len(b) > c.maxResponse {
		out.Truncated = true
		b = cutUTF8(b, c.maxResponse)
	}
	out.Body = strings.ToValidUTF8(string(b), "\uFFFD")
	if readErr == nil && out.Truncated {
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	}
	_ = resp.Body.Close()
	if readErr != nil {
		return out, fail(fmt.Errorf("reading the response body: %w", ctxErr(ctx, readErr)))
	}
	if !success(resp.StatusCode, call.SuccessCodes) {
		return out, &StatusError{Code: resp.StatusCode}
	}
	return out, nil
}

func success(code int, codes []int) bool {
	if len(codes) == 0 {
		return code >= 200 && code <= 299
	}
	return slices.Contains(codes, code)
}

// ctxErr replaces err with ctx's error when ctx has ended, since err is then
// only a symptom ("request canceled"); a forbidden destination stays as is.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, ErrForbiddenDestination) {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("%w: %w", ctx.Err(), cause)
	}
	return ctx.Err()
}

// cutUTF8 returns the first n bytes of b, fewer when byte n is inside a
// rune, so that a truncated body does not end in half a character.
func cutUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return b[:i]
		}
	}
	return b[:n]
}

// checkRedirect follows at most maxRedirects redirects, never from https to
// http, and checks the name allowlist early; the dialer checks the
// addresses. On a redirect to another origin (scheme, host or port: another
// port of the same host is another service), the call's own headers are
// dropped but for Content-Type, Accept and User-Agent, and so is the
// signature: they may hold credentials meant for the first receiver, and a
// signature would vouch for the call to whoever the redirect names. No
// redirect carries a Referer: the first URL's query may hold a token.
func (c *HTTPCaller) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("scheme %q not allowed", req.URL.Scheme)
	}
	for _, v := range via {
		if v.URL.Scheme == "https" && req.URL.Scheme != "https" {
			return errors.New("downgrade from https to http not allowed")
		}
	}
	if err := c.checkHost(req.URL.Hostname()); err != nil {
		return err
	}
	req.Header.Del("Referer")
	if origin(req.URL) != origin(via[0].URL) {
		names, _ := req.Context().Value(userHeadersKey{}).([]string)
		for _, n := range names {
			switch http.CanonicalHeaderKey(n) {
			case "Content-Type", "Accept", "User-Agent":
			default:
				req.Header.Del(n)
			}
		}
		req.Header.Del(headerSignature)
		req.Header.Del(headerTimestamp)
		req.Header.Del(headerWebhookSignature)
		req.Header.Del(headerWebhookTimestamp)
	}
	return nil
}

// origin is u's scheme, host (lower case, without a trailing dot) and
// port (the scheme's default when none is given).
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return u.Scheme + "://" + strings.TrimSuffix(strings.ToLower(u.Hostname()), ".") + ":" + port
}
