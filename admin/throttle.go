package admin

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Failed logins are counted per client and per basic-auth user name, each
// in a token bucket of loginBurst attempts that refills one attempt every
// loginRefill: ten wrong passwords in a row, then one a minute. A request
// whose client or user name has no attempt left is answered 429 with
// Retry-After before the authorizer sees it, so a right password does not
// help while throttled. A success leaves every count as it is; the buckets
// refill with time only.
//
// The client is the TCP peer (RemoteAddr), never a header, which anyone
// can write; an IPv6 client is its /64, which one host usually holds
// whole. Behind a proxy every request has the proxy's address, and the
// client bucket is then shared by everyone behind it. The user-name bucket
// holds whoever tries that name from anywhere: guessing the password of
// "admin" from many addresses throttles "admin" itself, which is the point.
const (
	loginBurst  = 10
	loginRefill = time.Minute
	// loginMaxKeys caps the buckets kept. Past it, full buckets (which
	// hold nothing a new one would not) go first, then the oldest.
	loginMaxKeys = 10_000
	// loginLogBurst and loginLogRefill rate-limit the log lines of failed
	// logins: ten, then one every six seconds; the lines left out are
	// counted in the next one (unlogged).
	loginLogBurst  = 10
	loginLogRefill = 6 * time.Second
	// maxLoggedUser bounds the user name kept as a key and logged.
	maxLoggedUser = 128
)

// codeTooManyRequests is the API error code of a throttled login (429).
const codeTooManyRequests = "too_many_requests"

// bucket is a token bucket brought up to date lazily.
type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

// refill adds what the time since at earned, at one token per every, up to
// burst. A clock that went back earns nothing.
func (b *bucket) refill(now time.Time, burst int, every time.Duration) {
	if el := now.Sub(b.at); el > 0 {
		b.tokens = math.Min(float64(burst), b.tokens+float64(el)/float64(every))
		b.at = now
	}
}

// loginThrottle counts failed logins; see the constants above.
type loginThrottle struct {
	now func() time.Time
	log *slog.Logger

	mu         sync.Mutex
	keys       map[string]*bucket // "client 203.0.113.5", "user ops"
	logBucket  bucket
	suppressed int // failures not logged since the last line
}

func newLoginThrottle(now func() time.Time, log *slog.Logger) *loginThrottle {
	t := &loginThrottle{now: now, log: log, keys: map[string]*bucket{}}
	t.logBucket = bucket{tokens: loginLogBurst, at: now()}
	return t
}

// attempt is who a request says it is, for the buckets and the log.
type attempt struct {
	client string // the peer's IP as it connected
	user   string // the basic-auth user name, "" without one
	keys   []string
}

func attemptOf(r *http.Request) attempt {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a := attempt{client: host}
	key := host
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap().WithZone("")
		a.client, key = ip.String(), ip.String()
		if ip.Is6() {
			p, _ := ip.Prefix(64)
			key = p.String()
		}
	}
	a.keys = []string{"client " + key}
	if u, _, ok := r.BasicAuth(); ok {
		if len(u) > maxLoggedUser {
			u = u[:maxLoggedUser]
		}
		a.user = strings.ToValidUTF8(u, "\uFFFD")
		a.keys = append(a.keys, "user "+a.user)
	}
	return a
}

// throttled answers 429 with Retry-After and reports true when the client
// or the user name of r has no attempt left; the caller then returns
// without calling the authorizer.
func (t *loginThrottle) throttled(w http.ResponseWriter, r *http.Request) bool {
	a := attemptOf(r)
	now := t.now()
	var wait time.Duration
	t.mu.Lock()
	for _, k := range a.keys {
		if b := t.keys[k]; b != nil {
			b.refill(now, loginBurst, loginRefill)
			if b.tokens < 1 {
				wait = max(wait, time.Duration((1-b.tokens)*float64(loginRefill)))
			}
		}
	}
	t.mu.Unlock()
	if wait <= 0 {
		return false
	}
	t.logFailure(now, a, r.URL.Path, true)
	secs := int64(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, r, apiErrorf(http.StatusTooManyRequests, codeTooManyRequests,
		"too many failed logins from this client or for this user name: try again in %d s", secs))
	return true
}

// failed counts a request the authorizer refused as unauthenticated
// against its client and user name, and logs it.
func (t *loginThrottle) failed(r *http.Request) {
	a := attemptOf(r)
	now := t.now()
	t.mu.Lock()
	for _, k := range a.keys {
		b := t.keys[k]
		if b == nil {
			t.makeRoomLocked(now)
			b = &bucket{tokens: loginBurst, at: now}
			t.keys[k] = b
		}
		b.refill(now, loginBurst, loginRefill)
		b.tokens = math.Max(0, b.tokens-1)
	}
	t.mu.Unlock()
	t.logFailure(now, a, r.URL.Path, false)
}

// makeRoomLocked keeps the buckets under loginMaxKeys: full ones go first,
// then the one least recently brought up to date.
func (t *loginThrottle) makeRoomLocked(now time.Time) {
	if len(t.keys) < loginMaxKeys {
		return
	}
	for k, b := range t.keys {
		// Whether it is full by now, without bringing it up to date:
		// that would make every bucket as recent as the others, and the
		// oldest could no longer be told apart below.
		if b.tokens+float64(now.Sub(b.at))/float64(loginRefill) >= loginBurst {
			delete(t.keys, k)
		}
	}
	for len(t.keys) >= loginMaxKeys {
		var oldest string
		var at time.Time
		for k, b := range t.keys {
			if oldest == "" || b.at.Before(at) {
				oldest, at = k, b.at
			}
		}
		delete(t.keys, oldest)
	}
}

// logFailure writes one warning per failed or throttled login, within the
// log's own rate limit. It names the client, the user name and the path,
// never a password or token.
func (t *loginThrottle) logFailure(now time.Time, a attempt, path string, throttled bool) {
	t.mu.Lock()
	t.logBucket.refill(now, loginLogBurst, loginLogRefill)
	if t.logBucket.tokens < 1 {
		t.suppressed++
		t.mu.Unlock()
		return
	}
	t.logBucket.tokens--
	unlogged := t.suppressed
	t.suppressed = 0
	t.mu.Unlock()
	msg := "xtimer/admin: failed login"
	if throttled {
		msg = "xtimer/admin: login throttled after repeated failures"
	}
	attrs := []any{"client", a.client, "path", path}
	if a.user != "" {
		attrs = append(attrs, "user", a.user)
	}
	if unlogged > 0 {
		attrs = append(attrs, "unlogged", fmt.Sprint(unlogged))
	}
	t.log.Warn(msg, attrs...)
}
