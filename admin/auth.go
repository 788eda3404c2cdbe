package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
)

// Principal is who a request acts as: its Name is written beside every
// action in the log and the task's history, its Role says what it may do
// and its Apps whose tasks it may see.
type Principal struct {
	Name string
	// Role is what the principal may do. The zero value, which
	// authorizers written before roles existed return, is RoleAdmin: the
	// console logs that once.
	Role Role
	// Apps are the apps whose tasks, executions, history and calendars
	// the principal may see and act on; empty for every app.
	Apps []string
}

// Authorizer decides who may use the console. It returns the principal of
// the request, or an error: one wrapping ErrUnauthenticated answers 401
// (with a WWW-Authenticate challenge when the authorizer set one), any
// other 403.
type Authorizer func(r *http.Request) (Principal, error)

var (
	// ErrUnauthenticated is the error of a request that carries no
	// credential, or a wrong one.
	ErrUnauthenticated = errors.New("xtimer/admin: unauthenticated")
	// ErrForbidden is the error of a known principal who may not use the
	// console.
	ErrForbidden = errors.New("xtimer/admin: forbidden")
)

// MinSecretBytes is the shortest password BasicAuth and token BearerToken
// accept.
const MinSecretBytes = 16

// authorizerError is an authorizer of this package built with a bad
// argument (a short password): New refuses it, naming
// Options.Authorize, and, used without New, it refuses every request
// with a 500 that says why.
type authorizerError struct{ error }

func (e authorizerError) Unwrap() error { return e.error }

// probeKey marks the request New hands this package's authorizers to
// learn whether they were built with a bad argument: they answer
// authorizerError or errProbed, and check no credential.
type probeKey struct{}

var errProbed = errors.New("xtimer/admin: authorizer probed")

// probedAnyOf is AnyOf's answer to the probe: the authorizers it tries,
// for checkAuthorizer to ask in turn.
type probedAnyOf []Authorizer

func (probedAnyOf) Error() string { return "xtimer/admin: AnyOf probed" }

func probing(r *http.Request) bool { return r.Context().Value(probeKey{}) != nil }

// BasicAuth accepts HTTP basic authentication with one user name and
// password, compared in constant time, as an admin named by the user
// name. Browsers ask for the credential once and send it with every
// request. An empty user name, or a password shorter than MinSecretBytes,
// makes New return an error naming Options.Authorize (and the authorizer
// refuse every request).
//
//go:noinline
func BasicAuth(user, password string) Authorizer {
	var bad error
	switch {
	case user == "":
		bad = errors.New("xtimer/admin: BasicAuth: the user name is empty")
	case len(password) < MinSecretBytes:
		// The password is a secret: its length only.
		bad = fmt.Errorf("xtimer/admin: BasicAuth: the password of user %q is %d bytes, want at least %d (e.g. openssl rand -hex 24)", user, len(password), MinSecretBytes)
	}
	wantUser, wantPass := digest(user), digest(password)
	return func(r *http.Request) (Principal, error) {
		switch {
		case bad != nil:
			return Principal{}, authorizerError{bad}
		case probing(r):
			return Principal{}, errProbed
		}
		u, p, ok := r.BasicAuth()
		if !ok {
			return Principal{}, basicChallenge{fmt.Errorf("%w: send HTTP basic authentication", ErrUnauthenticated)}
		}
		// Both compared, whatever the first says, so timing tells nothing.
		okUser := subtle.ConstantTimeCompare(digest(u), wantUser)
		okPass := subtle.ConstantTimeCompare(digest(p), wantPass)
		if okUser&okPass != 1 {
			return Principal{}, basicChallenge{fmt.Errorf("%w: wrong user name or password", ErrUnauthenticated)}
		}
		return Principal{Name: u, Role: RoleAdmin}, nil
	}
}

// BearerToken accepts "Authorization: Bearer <token>" with one token,
// compared in constant time, as an admin named "token-" and the first 8
// hex digits of the token's SHA-256 (TokenName), which tell tokens apart
// in the history without revealing them. For scripts and for consoles
// behind a proxy that adds the header. A token shorter than
// MinSecretBytes makes New return an error naming Options.Authorize (and
// the authorizer refuse every request).
//
//go:noinline
func BearerToken(token string) Authorizer {
	var bad error
	if len(token) < MinSecretBytes {
		bad = fmt.Errorf("xtimer/admin: BearerToken: the token is %d bytes, want at least %d (e.g. openssl rand -hex 24)", len(token), MinSecretBytes)
	}
	want := digest(token)
	name := TokenName(token)
	return func(r *http.Request) (Principal, error) {
		switch {
		case bad != nil:
			return Principal{}, authorizerError{bad}
		case probing(r):
			return Principal{}, errProbed
		}
		got, ok := bearer(r)
		if !ok {
			return Principal{}, bearerChallenge{fmt.Errorf("%w: send Authorization: Bearer <token>", ErrUnauthenticated)}
		}
		if subtle.ConstantTimeCompare(digest(got), want) != 1 {
			return Principal{}, bearerChallenge{fmt.Errorf("%w: wrong token", ErrUnauthenticated)}
		}
		return Principal{Name: name, Role: RoleAdmin}, nil
	}
}

// TokenName is the principal name BearerToken gives token: "token-" and
// the first 8 hex digits of its SHA-256.
func TokenName(token string) string {
	d := sha256.Sum256([]byte(token))
	return "token-" + hex.EncodeToString(d[:4])
}

// bearer reads the token of an "Authorization: Bearer <token>" header;
// the scheme is case-insensitive (RFC 9110 section 11.1).
func bearer(r *http.Request) (string, bool) {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(got), true
}

// AnyOf accepts a request that one of the authorizers accepts, tried in
// order; it refuses with the first authorizer's error otherwise. Use it
// for basic auth for people and a bearer token for scripts.
//
//go:noinline
func AnyOf(authorizers ...Authorizer) Authorizer {
	return func(r *http.Request) (Principal, error) {
		if probing(r) {
			return Principal{}, probedAnyOf(authorizers)
		}
		var first error
		for _, a := range authorizers {
			p, err := a(r)
			if err == nil {
				return p, nil
			}
			var bad authorizerError
			if first == nil || errors.As(err, &bad) {
				first = err
			}
			if errors.As(err, &bad) {
				break // misconfigured: refuse, whatever the others say
			}
		}
		if first == nil {
			first = fmt.Errorf("%w: no authorizer configured in AnyOf", ErrForbidden)
		}
		return Principal{}, first
	}
}

// challenger is an authorizer's error that tells the client how to
// authenticate: its Challenge is sent as WWW-Authenticate with the 401.
type challenger interface{ Challenge() string }

// basicChallenge makes a browser ask for the user name and password.
type basicChallenge struct{ error }

func (e basicChallenge) Unwrap() error     { return e.error }
func (e basicChallenge) Challenge() string { return `Basic realm="xtimer console", charset="UTF-8"` }

// bearerChallenge names the scheme a 401 must name (RFC 9110 section 15.5.2).
type bearerChallenge struct{ error }

func (e bearerChallenge) Unwrap() error     { return e.error }
func (e bearerChallenge) Challenge() string { return `Bearer realm="xtimer console"` }

// digest makes both sides of a comparison the same length, so that
// ConstantTimeCompare does not reveal the length of the secret.
func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

type principalKey struct{}

// principalOf returns the principal guard stored in the request context.
func principalOf(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// proxyHeaders are the request headers by which proxies and CDNs pass the
// client's address on: any of them on a loopback connection says that the
// connection speaks for someone else.
var proxyHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP", "True-Client-IP",
	"X-Client-IP", "X-Cluster-Client-IP", "CF-Connecting-IP", "Fastly-Client-IP", "X-Original-Forwarded-For"}

// LoopbackOnly is the authorizer a console without Options.Authorize uses
// (with Options.AllowedHosts), for a service's other endpoints to use
// alike: it serves clients on a loopback address that came through no
// proxy (no Forwarded, X-Forwarded-For, X-Real-IP or other client-IP
// header) and named a Host of this machine (localhost, a loopback
// address, or one of allowed), as the principal "local"; anyone else gets
// ErrForbidden saying how to configure an authorizer.
func LoopbackOnly(allowed ...string) Authorizer {
	return func(r *http.Request) (Principal, error) {
		const howto = "the console serves only loopback clients until an authorizer is configured: " +
			"set admin.Options.Authorize, e.g. admin.BasicAuth(user, password) or admin.BearerToken(token)"
		for _, h := range proxyHeaders {
			if r.Header.Get(h) != "" {
				return Principal{}, fmt.Errorf("%w: the request came through a proxy (%s); %s", ErrForbidden, h, howto)
			}
		}
		p, err := loopbackClient(r, howto)
		if err == nil && !localHost(r.Host, allowed) {
			return Principal{}, fmt.Errorf("%w: Host %q is not this console's (a page of another site pointed at this machine?): "+
				"a console without an authorizer answers to localhost and the loopback addresses; add a name with admin.Options.AllowedHosts, or %s",
				ErrForbidden, r.Host, howto)
		}
		return p, err
	}
}

// localHost reports whether host, a request's Host header (with or without
// a port), names this machine: localhost, a loopback address, or one of
// allowed (compared without case).
func localHost(host string, allowed []string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if strings.EqualFold(name, "localhost") {
		return true
	}
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range allowed {
		if strings.EqualFold(name, a) {
			return true
		}
	}
	return false
}

// loopbackClient is the principal "local" for a request from a loopback
// address, ErrForbidden for any other.
func loopbackClient(r *http.Request, howto string) (Principal, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return Principal{}, fmt.Errorf("%w: client %s is not loopback; %s", ErrForbidden, host, howto)
	}
	return Principal{Name: "local", Role: RoleAdmin}, nil
}

// guard authenticates every request, enforces the read-only switch and the
// body limit, and sets the headers that keep the pages from being framed
// or sniffed.
func (c *console) guard(next http.Handler) http.Handler {
	authorize := c.opts.Authorize
	if authorize == nil {
		authorize = LoopbackOnly(c.opts.AllowedHosts...)
	}
	logins := newLoginThrottle(c.now, c.log) // throttle.go
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("Cache-Control", "no-store")
		if logins.throttled(w, r) {
			return
		}
		p, err := authorize(r)
		var bad authorizerError
		switch {
		case errors.As(err, &bad):
			writeError(w, r, apiErrorf(http.StatusInternalServerError, codeInternal, "the console's authorizer is misconfigured: %s", bad.Error()))
			return
		case err == nil:
			p, err = c.withRole(p)
		}
		if err != nil {
			if errors.Is(err, ErrUnauthenticated) {
				logins.failed(r)
				var ch challenger
				if errors.As(err, &ch) {
					h.Set("WWW-Authenticate", ch.Challenge())
				}
				writeError(w, r, apiErrorf(http.StatusUnauthorized, codeUnauthenticated, "%s", err.Error()))
				return
			}
			writeError(w, r, apiErrorf(http.StatusForbidden, codeForbidden, "%s", err.Error()))
			return
		}
		if changes(r) && c.opts.ReadOnly {
			writeError(w, r, apiErrorf(http.StatusForbidden, codeReadOnly, "the console is read-only (admin.Options.ReadOnly): %s %s is refused", r.Method, r.URL.Path))
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, c.opts.MaxBodyBytes)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// withRole completes the principal an authorizer returned: no role is
// RoleAdmin (authorizers written before roles), logged once; a read-only
// console caps every role at RoleViewer; a role that is none of the
// constants is refused.
func (c *console) withRole(p Principal) (Principal, error) {
	switch {
	case p.Role == "":
		c.noRoleOnce.Do(func() {
			c.log.Warn("the console's authorizer returned a principal without a role: it acts as admin; set admin.Principal.Role (viewer, operator or admin)",
				"principal", p.Name)
		})
		p.Role = RoleAdmin
	case !p.Role.Valid():
		return Principal{}, fmt.Errorf("%w: the authorizer gave principal %q the role %q: want %s, %s or %s",
			ErrForbidden, p.Name, p.Role, RoleViewer, RoleOperator, RoleAdmin)
	}
	if c.opts.ReadOnly {
		p.Role = RoleViewer
	}
	return p, nil
}

// checkAuthorizer returns the error an authorizer of this package was
// built with (BasicAuth with a short password), found by asking it with a
// probe request; nil for a good one, and for any other function, which
// New never calls.
func checkAuthorizer(a Authorizer) error {
	if a == nil || !slices.Contains(ownAuthorizers[:], reflect.ValueOf(a).Pointer()) {
		return nil
	}
	r, err := http.NewRequestWithContext(context.WithValue(context.Background(), probeKey{}, true), http.MethodGet, "/", nil)
	if err != nil {
		return err
	}
	_, err = a(r)
	var bad authorizerError
	var inner probedAnyOf
	switch {
	case errors.As(err, &bad):
		return bad.error
	case errors.As(err, &inner):
		for _, a := range inner {
			if err := checkAuthorizer(a); err != nil {
				return err
			}
		}
	}
	return nil
}

// ownAuthorizers are the code of the functions BasicAuth, BearerToken and
// AnyOf return (which is why they are never inlined: an inlined copy's
// closure would be other code), the authorizers checkAuthorizer asks.
var ownAuthorizers = [...]uintptr{
	reflect.ValueOf(BasicAuth("", "")).Pointer(),
	reflect.ValueOf(BearerToken("")).Pointer(),
	reflect.ValueOf(AnyOf()).Pointer(),
}

// changes reports whether a request may change state.
func changes(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}
