package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

const testToken = "0123456789abcdef-console-token"

func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// Without an authorizer the console serves loopback clients only, and
// tells everyone else how to configure one.
func TestAuthLoopbackOnlyByDefault(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	h, err := New(f.S, Options{Logger: f.S.Options().Logger})
	require.NoError(t, err)
	call := func(method, path, remote string, headers ...string) apiResult {
		t.Helper()
		body := ""
		if method != http.MethodGet {
			body = "{}"
		}
		req := apiReq(t, method, "http://localhost/xtimer/"+path, body, headers...)
		req.RemoteAddr = remote
		return apiServe(t, h, req)
	}

	e := requireAPIError(t, call(http.MethodGet, "api/apps", "203.0.113.5:1234"), 403, codeForbidden, "")
	require.Contains(t, e.Message, "203.0.113.5")
	require.Contains(t, e.Message, "admin.Options.Authorize")
	require.Contains(t, e.Message, "admin.BasicAuth")
	require.Contains(t, e.Message, "admin.BearerToken")
	requireAPIError(t, call(http.MethodPost, "api/tasks/report.minutely/pause", "203.0.113.5:1234"), 403, codeForbidden, "")
	requireAPIError(t, call(http.MethodGet, "api/apps", "[2001:db8::1]:1234"), 403, codeForbidden, "")
	requireAPIError(t, call(http.MethodGet, "api/apps", "10.0.0.1:1234"), 403, codeForbidden, "")
	requireAPIError(t, call(http.MethodGet, "api/apps", "not an address"), 403, codeForbidden, "")
	requireAPIError(t, call(http.MethodGet, "api/apps", ""), 403, codeForbidden, "")

	// A loopback connection that came through a proxy speaks for someone else.
	e = requireAPIError(t, call(http.MethodGet, "api/apps", "127.0.0.1:40000", "X-Forwarded-For", "203.0.113.5"), 403, codeForbidden, "")
	require.Contains(t, e.Message, "proxy")
	require.Contains(t, e.Message, "admin.Options.Authorize")
	requireAPIError(t, call(http.MethodGet, "api/apps", "127.0.0.1:40000", "Forwarded", "for=203.0.113.5"), 403, codeForbidden, "")
	requireAPIError(t, call(http.MethodPost, "api/tasks/report.minutely/pause", "127.0.0.1:40000", "X-Forwarded-For", "127.0.0.1"), 403, codeForbidden, "")
	require.Equal(t, store.TaskActive, taskStatus(t, f, "report.minutely"))

	// Loopback, IPv4 or IPv6, is served.
	require.Equal(t, http.StatusOK, call(http.MethodGet, "api/apps", "127.0.0.1:40000").Status)
	require.Equal(t, http.StatusOK, call(http.MethodGet, "api/apps", "127.0.0.2:40000").Status)
	require.Equal(t, http.StatusOK, call(http.MethodGet, "api/apps", "[::1]:40000").Status)
	r := call(http.MethodPost, "api/tasks/report.minutely/pause", "[::1]:40000")
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "local", apiData[TaskDetail](t, r).Actions[0].Principal)

	// A path outside the configured prefix says so.
	req := apiReq(t, http.MethodGet, "http://localhost/elsewhere", "")
	req.RemoteAddr = "127.0.0.1:40000"
	e = requireAPIError(t, apiServe(t, h, req), 404, codeNotFound, "")
	require.Contains(t, e.Message, `Options.Prefix "/xtimer/"`)
}

func TestAuthBasicAuth(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{Authorize: BasicAuth("alice", "correct horse battery staple")}})

	r := apiGet(t, f, "api/apps")
	requireAPIError(t, r, 401, codeUnauthenticated, "")
	require.Equal(t, `Basic realm="xtimer console", charset="UTF-8"`, r.Header.Get("WWW-Authenticate"))
	require.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))
	for _, wrong := range []string{basicAuth("alice", "wrong"), basicAuth("mallory", "correct horse battery staple"), basicAuth("", ""), "Basic !!!", "Bearer " + testToken} {
		r = apiGet(t, f, "api/apps", "Authorization", wrong)
		requireAPIError(t, r, 401, codeUnauthenticated, "")
		require.Contains(t, r.Header.Get("WWW-Authenticate"), "Basic ", wrong)
	}
	r = apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/pause", "{}", "Authorization", basicAuth("alice", "wrong"))
	requireAPIError(t, r, 401, codeUnauthenticated, "")
	require.Equal(t, store.TaskActive, taskStatus(t, f, "report.minutely"))

	ok := basicAuth("alice", "correct horse battery staple")
	require.Equal(t, http.StatusOK, apiGet(t, f, "api/apps", "Authorization", ok).Status)
	r = apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/pause", "{}", "Authorization", ok)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, store.TaskPaused, taskStatus(t, f, "report.minutely"))
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely", "Authorization", ok))
	require.Equal(t, []ActionView{{At: fakeStart, Principal: "alice", Action: "pause"}}, d.Actions)

	// With an authorizer, the client's address does not matter.
	h, err := New(f.S, Options{Authorize: BasicAuth("alice", "correct horse battery staple"), Logger: f.S.Options().Logger})
	require.NoError(t, err)
	req := apiReq(t, http.MethodGet, "http://console.test/xtimer/api/apps", "", "Authorization", ok)
	req.RemoteAddr = "203.0.113.5:1234"
	require.Equal(t, http.StatusOK, apiServe(t, h, req).Status)
	req = apiReq(t, http.MethodGet, "http://console.test/xtimer/api/apps", "")
	req.RemoteAddr = "127.0.0.1:1234"
	requireAPIError(t, apiServe(t, h, req), 401, codeUnauthenticated, "")
}

func TestAuthBearerToken(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{Authorize: BearerToken(testToken)}})

	r := apiGet(t, f, "api/apps")
	requireAPIError(t, r, 401, codeUnauthenticated, "")
	require.Equal(t, `Bearer realm="xtimer console"`, r.Header.Get("WWW-Authenticate"))
	for _, wrong := range []string{"Bearer wrong-token-0123456789", "Bearer " + testToken + "x", "Bearer", "Bearer ", testToken, basicAuth("token", testToken)} {
		r = apiGet(t, f, "api/apps", "Authorization", wrong)
		requireAPIError(t, r, 401, codeUnauthenticated, "")
		require.Equal(t, `Bearer realm="xtimer console"`, r.Header.Get("WWW-Authenticate"), wrong)
	}
	requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/pause", "{}"), 401, codeUnauthenticated, "")
	require.Equal(t, store.TaskActive, taskStatus(t, f, "report.minutely"))

	// The scheme is case-insensitive (RFC 9110).
	for _, ok := range []string{"Bearer " + testToken, "bearer " + testToken, "BEARER " + testToken} {
		require.Equal(t, http.StatusOK, apiGet(t, f, "api/apps", "Authorization", ok).Status, ok)
	}
	ok := "Bearer " + testToken
	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/pause", "{}", "Authorization", ok).Status)
	require.Equal(t, store.TaskPaused, taskStatus(t, f, "report.minutely"))
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely", "Authorization", ok))
	require.Equal(t, []ActionView{{At: fakeStart, Principal: TokenName(testToken), Action: "pause"}}, d.Actions)
}

func TestNewRefusesWeakSecretsNamingTheOption(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	for _, c := range []struct {
		name string
		auth Authorizer
		want string
	}{
		{"empty user", BasicAuth("", "correct horse battery staple"), "xtimer/admin: Options.Authorize: xtimer/admin: BasicAuth: the user name is empty"},
		{"short password", BasicAuth("alice", "fifteen bytes!!"),
			`xtimer/admin: Options.Authorize: xtimer/admin: BasicAuth: the password of user "alice" is 15 bytes, want at least 16 (e.g. openssl rand -hex 24)`},
		{"empty password", BasicAuth("alice", ""),
			`xtimer/admin: Options.Authorize: xtimer/admin: BasicAuth: the password of user "alice" is 0 bytes, want at least 16 (e.g. openssl rand -hex 24)`},
		{"short token", BearerToken("short"), "xtimer/admin: Options.Authorize: xtimer/admin: BearerToken: the token is 5 bytes, want at least 16 (e.g. openssl rand -hex 24)"},
		{"inside AnyOf", AnyOf(BearerToken(testToken), AnyOf(BasicAuth("alice", "short"))),
			`xtimer/admin: Options.Authorize: xtimer/admin: BasicAuth: the password of user "alice" is 5 bytes, want at least 16 (e.g. openssl rand -hex 24)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(f.S, Options{Authorize: c.auth})
			require.EqualError(t, err, c.want)
			require.NotPanics(t, func() { c.auth(httptest.NewRequest(http.MethodGet, "/", nil)) })
		})
	}
	// Used without New (wrapped in a function of the caller's), a weak
	// authorizer refuses every request, the right credential too.
	weak := BasicAuth("alice", "short")
	h, err := New(f.S, Options{Authorize: func(r *http.Request) (Principal, error) { return weak(r) }})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "/xtimer/api/apps", nil)
	req.SetBasicAuth("alice", "short")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Contains(t, rec.Body.String(), "misconfigured")
}

func TestAuthAnyOf(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{Authorize: AnyOf(BasicAuth("alice", "correct horse battery staple"), BearerToken(testToken))}})
	pause := "api/tasks/report.minutely/pause"

	// Refused with the first authorizer's error: a browser is asked for a password.
	r := apiGet(t, f, "api/apps")
	requireAPIError(t, r, 401, codeUnauthenticated, "")
	require.Equal(t, `Basic realm="xtimer console", charset="UTF-8"`, r.Header.Get("WWW-Authenticate"))
	requireAPIError(t, apiGet(t, f, "api/apps", "Authorization", "Bearer wrong-token-0123456789"), 401, codeUnauthenticated, "")
	requireAPIError(t, apiGet(t, f, "api/apps", "Authorization", basicAuth("alice", "wrong")), 401, codeUnauthenticated, "")

	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, pause, "{}", "Authorization", basicAuth("alice", "correct horse battery staple")).Status)
	r = apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/resume", "{}", "Authorization", "Bearer "+testToken)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, []ActionView{
		{At: fakeStart, Principal: TokenName(testToken), Action: "resume"},
		{At: fakeStart, Principal: "alice", Action: "pause"},
	}, apiData[TaskDetail](t, r).Actions)

	// An authorizer's own refusal: a known principal without access is 403.
	forbidding := setup(t, fixtureOpts{admin: Options{Authorize: AnyOf(func(r *http.Request) (Principal, error) {
		return Principal{}, fmt.Errorf("%w: bob may only read", ErrForbidden)
	})}})
	r = apiGet(t, forbidding, "api/apps")
	e := requireAPIError(t, r, 403, codeForbidden, "")
	require.Contains(t, e.Message, "bob may only read")
	require.Empty(t, r.Header.Get("WWW-Authenticate"))
	// An error that is neither sentinel is a refusal too, never a pass.
	other := setup(t, fixtureOpts{admin: Options{Authorize: func(r *http.Request) (Principal, error) {
		return Principal{}, errors.New("directory down")
	}}})
	requireAPIError(t, apiGet(t, other, "api/apps"), 403, codeForbidden, "")
	// AnyOf of nothing lets nobody in.
	nobody := setup(t, fixtureOpts{admin: Options{Authorize: AnyOf()}})
	requireAPIError(t, apiGet(t, nobody, "api/apps"), 403, codeForbidden, "")
}

// ReadOnly refuses every state-changing endpoint and serves every read.
func TestAuthReadOnly(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{ReadOnly: true}})
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "api/tasks/report.minutely/pause", "{}"},
		{http.MethodPost, "api/tasks/report.minutely/resume", "{}"},
		{http.MethodPost, "api/tasks/report.minutely/trigger", "{}"},
		{http.MethodPut, "api/tasks/report.minutely/schedule", `{"spec": "*/5 * * * *"}`},
		{http.MethodDelete, "api/tasks/report.minutely/schedule", "{}"},
		{http.MethodPost, "api/tasks/no.such.task/pause", "{}"},
	} {
		e := requireAPIError(t, apiSend(t, f, c.method, c.path, c.body), 403, codeReadOnly, "")
		require.Contains(t, e.Message, "admin.Options.ReadOnly", "%s %s", c.method, c.path)
	}
	for _, path := range []string{"api/apps", "api/tasks", "api/tasks/report.minutely", "api/executions",
		"api/replicas", "api/preview?spec=*+*+*+*+*"} {
		require.Equal(t, http.StatusOK, apiGet(t, f, path).Status, path)
	}
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely"))
	require.Equal(t, store.TaskActive, d.Task.Status)
	require.False(t, d.Task.Overridden)
	require.Equal(t, []ActionView{}, d.Actions)
	require.Equal(t, []ExecutionView{}, apiData[[]ExecutionView](t, apiGet(t, f, "api/executions")))
}

// A cross-site form or fetch cannot act through the operator's browser.
func TestCSRFCrossSiteRequestsAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{Authorize: BasicAuth("alice", "correct horse battery staple")}})
	auth := basicAuth("alice", "correct horse battery staple") // the browser sends it along, as it would a cookie
	pause := "api/tasks/report.minutely/pause"

	// The classic: an HTML form on evil.example posting to the console.
	r := apiSend(t, f, http.MethodPost, pause, "a=b", "Content-Type", "application/x-www-form-urlencoded",
		"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Authorization", auth)
	e := requireAPIError(t, r, 403, codeCrossOrigin, "")
	require.Contains(t, e.Message, "TrustedOrigins")
	require.Equal(t, store.TaskActive, taskStatus(t, f, "report.minutely"))

	// A cross-site fetch with a JSON body, a same-site one (a sibling
	// host), and an old browser that sends Origin only.
	for _, headers := range [][]string{
		{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"},
		{"Origin", "https://evil.example", "Sec-Fetch-Site", "same-site"},
		{"Origin", "https://evil.example"},
		{"Origin", "null"},
	} {
		for _, c := range []struct{ method, path string }{
			{http.MethodPost, pause},
			{http.MethodPost, "api/tasks/report.minutely/trigger"},
			{http.MethodPut, "api/tasks/report.minutely/schedule"},
			{http.MethodDelete, "api/tasks/report.minutely/schedule"},
		} {
			body := "{}"
			if c.method == http.MethodPut {
				body = `{"spec": "*/5 * * * *"}`
			}
			requireAPIError(t, apiSend(t, f, c.method, c.path, body, append(headers, "Authorization", auth)...), 403, codeCrossOrigin, "")
		}
	}
	d := apiData[TaskDetail](t, apiGet(t, f, "api/tasks/report.minutely", "Authorization", auth))
	require.Equal(t, store.TaskActive, d.Task.Status)
	require.False(t, d.Task.Overridden)
	require.Equal(t, []ActionView{}, d.Actions)
	require.Equal(t, []ExecutionView{}, apiData[[]ExecutionView](t, apiGet(t, f, "api/executions", "Authorization", auth)))

	// Reads are not state-changing: a cross-site GET is served (the
	// browser keeps the answer from the other site).
	require.Equal(t, http.StatusOK, apiGet(t, f, "api/apps", "Authorization", auth, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example").Status)

	// The console's own page, fetching with a JSON body, passes.
	r = apiSend(t, f, http.MethodPost, pause, "{}", "Origin", f.Server.URL, "Sec-Fetch-Site", "same-origin", "Authorization", auth)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, store.TaskPaused, taskStatus(t, f, "report.minutely"))
	// So does an old browser on the same origin, and a script (no Origin).
	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/resume", "{}", "Origin", f.Server.URL, "Authorization", auth).Status)
	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, pause, "{}", "Authorization", auth).Status)
	require.Equal(t, store.TaskPaused, taskStatus(t, f, "report.minutely"))
}

func TestCSRFTrustedOriginsPass(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{TrustedOrigins: []string{"https://ops.example.com"}}})
	pause := "api/tasks/report.minutely/pause"
	r := apiSend(t, f, http.MethodPost, pause, "{}", "Origin", "https://ops.example.com", "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, store.TaskPaused, taskStatus(t, f, "report.minutely"))
	require.Equal(t, http.StatusOK, apiSend(t, f, http.MethodPost, "api/tasks/report.minutely/resume", "{}", "Origin", "https://ops.example.com").Status)

	for _, origin := range []string{"https://evil.example", "http://ops.example.com", "https://ops.example.com:8443", "https://x.ops.example.com"} {
		requireAPIError(t, apiSend(t, f, http.MethodPost, pause, "{}", "Origin", origin, "Sec-Fetch-Site", "cross-site"), 403, codeCrossOrigin, "")
	}
	require.Equal(t, store.TaskActive, taskStatus(t, f, "report.minutely"))
}

// Invalid options: New names the option, Handler panics with the same.
func TestOptionsInvalidAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Prefix: "xtimer"}, `xtimer/admin: Options.Prefix "xtimer"`},
		{Options{Prefix: "/xtimer"}, `Options.Prefix "/xtimer"`},
		{Options{Prefix: "xtimer/"}, `Options.Prefix "xtimer/"`},
		{Options{Prefix: "/x{id}/"}, `Options.Prefix "/x{id}/"`},
		{Options{Prefix: "/a b/"}, `Options.Prefix "/a b/"`},
		{Options{MaxBodyBytes: 10}, "xtimer/admin: Options.MaxBodyBytes 10: want at least 1024"},
		{Options{MaxBodyBytes: -1}, "Options.MaxBodyBytes -1"},
		{Options{TrustedOrigins: []string{"ops.example.com"}}, `xtimer/admin: Options.TrustedOrigins "ops.example.com"`},
		{Options{TrustedOrigins: []string{"https://ops.example.com/console"}}, `Options.TrustedOrigins "https://ops.example.com/console"`},
		{Options{TrustedOrigins: []string{"https://ok.example.com", ""}}, `Options.TrustedOrigins ""`},
	} {
		h, err := New(f.S, c.opts)
		require.Nil(t, h)
		require.ErrorContains(t, err, c.want)
		require.PanicsWithError(t, err.Error(), func() { Handler(f.S, c.opts) })
	}
	_, err := New(nil, Options{})
	require.EqualError(t, err, "xtimer/admin: scheduler is nil")

	// A valid prefix of one's own is served there.
	custom := setup(t, fixtureOpts{admin: Options{Prefix: "/ops/cron/"}})
	require.Equal(t, http.StatusOK, apiGet(t, custom, "api/apps").Status)
	require.NotPanics(t, func() { Handler(f.S, Options{Prefix: "/ops/cron/", MaxBodyBytes: 1024}) })
}

// DNS rebinding: a page on a domain its attacker points at 127.0.0.1 is
// same-origin for the browser and its requests come from loopback, so a
// console without an authorizer must tell it apart by the Host it names.
// The audit's request (issue 25), sent to a real listener on loopback, is
// refused and creates nothing; localhost, the loopback addresses and the
// names of Options.AllowedHosts are served. Every header by which a proxy
// passes a client's address on marks the request as someone else's.
func TestAuthLoopbackRefusesAReboundHostAndProxiedRequests(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	h, err := New(f.S, Options{Logger: f.S.Options().Logger, AllowedHosts: []string{"ops-console.internal"}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(DefaultPrefix, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	send := func(method, path, host, body string, headers ...string) *http.Response {
		t.Helper()
		req, reqErr := http.NewRequest(method, srv.URL+"/xtimer/"+path, strings.NewReader(body))
		require.NoError(t, reqErr)
		req.Host = host
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, doErr := srv.Client().Do(req)
		require.NoError(t, doErr)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}

	attack := `{"code":"rebind.task","spec":"0 0 1 1 *","paused":true,"target":{"method":"GET","url":"http://127.0.0.1:9/x"}}`
	resp := send(http.MethodPost, "api/tasks", "rebind.attacker.example:8080", attack,
		"Origin", "http://rebind.attacker.example:8080", "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	var e apiResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	require.Contains(t, e.Error.Message, `Host "rebind.attacker.example:8080" is not this console's`)
	require.Contains(t, e.Error.Message, "admin.Options.AllowedHosts")
	_, err = f.S.HTTPTask(context.Background(), "rebind.task")
	require.ErrorIs(t, err, xtimer.ErrTaskNotFound, "the attack created nothing")
	require.Equal(t, http.StatusForbidden, send(http.MethodGet, "api/apps", "rebind.attacker.example", "").StatusCode, "reads too")

	for _, host := range []string{"localhost:8080", "LOCALHOST", "127.0.0.1:8080", "127.0.0.2", "[::1]:8080", "ops-console.internal:8443", "OPS-console.internal"} {
		require.Equal(t, http.StatusOK, send(http.MethodGet, "api/apps", host, "").StatusCode, host)
	}
	for _, host := range []string{"localhost.attacker.example", "127.0.0.1.nip.io", "ops-console.internal.attacker.example", "10.0.0.1"} {
		require.Equal(t, http.StatusForbidden, send(http.MethodGet, "api/apps", host, "").StatusCode, host)
	}
	for _, header := range proxyHeaders {
		resp := send(http.MethodGet, "api/apps", "localhost", "", header, "203.0.113.5")
		require.Equal(t, http.StatusForbidden, resp.StatusCode, header)
	}

	_, err = New(f.S, Options{AllowedHosts: []string{"ops.example.com:8080"}})
	require.ErrorContains(t, err, `xtimer/admin: Options.AllowedHosts "ops.example.com:8080": want a host name`)
	_, err = New(f.S, Options{AllowedHosts: []string{"https://ops.example.com"}})
	require.ErrorContains(t, err, `Options.AllowedHosts "https://ops.example.com"`)
}
