package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/admin"
)

// sha256Hex is what printf %s "$TOKEN" | sha256sum prints.
func sha256Hex(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// A bad -tokens-file is a start error (exit 2) naming the file, the
// entry's index and its field; no token is ever repeated.
func TestTokensFileErrorsNameTheFileEntryAndField(t *testing.T) {
	t.Parallel()
	good := sha256Hex("alice-token-0123456789")
	for _, c := range []struct {
		name, content, want string
	}{
		{"not JSON", `{"name": "alice"}`, `want a JSON list`},
		{"unknown field", `[{"name": "alice", "role": "admin", "token": "x", "token_sha256": "` + good + `"}]`, `unknown field "token"`},
		{"empty list", `[]`, `no entry`},
		{"no name", `[{"role": "admin", "token_sha256": "` + good + `"}]`, `entry 0: name: empty`},
		{"bad role", `[{"name": "alice", "role": "root", "token_sha256": "` + good + `"}]`, `entry 0: role: "root": want viewer, operator or admin`},
		{"no role", `[{"name": "alice", "token_sha256": "` + good + `"}]`, `entry 0: role: "": want viewer, operator or admin`},
		{"empty app", `[{"name": "alice", "role": "viewer", "apps": ["billing", ""], "token_sha256": "` + good + `"}]`, `entry 0: apps[1]: ""`},
		{"short hash", `[{"name": "alice", "role": "viewer", "token_sha256": "abc"}]`, `entry 0: token_sha256: 3 characters, not 64 hex digits`},
		{"plain token", `[{"name": "alice", "role": "viewer", "token_sha256": "alice-token-0123456789"}]`, `entry 0: token_sha256`},
		{"duplicate name", `[{"name": "alice", "role": "viewer", "token_sha256": "` + good + `"}, {"name": "alice", "role": "admin", "token_sha256": "` + sha256Hex("other-token-0123456789") + `"}]`,
			`entry 1: name: "alice" is entry 0's too`},
		{"shared token", `[{"name": "alice", "role": "viewer", "token_sha256": "` + good + `"}, {"name": "bob", "role": "admin", "token_sha256": "` + good + `"}]`,
			`entry 1: token_sha256: the same token as entry 0`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "tokens.json", c.content)
			_, err := parseConfig([]string{"-tokens-file", path}, func(string) string { return "" }, io.Discard)
			require.ErrorAs(t, err, new(usageError))
			require.ErrorContains(t, err, fmt.Sprintf("-tokens-file %q: ", path))
			require.ErrorContains(t, err, c.want)
			require.NotContains(t, err.Error(), "alice-token-0123456789"[:12]+"0", "a token is never repeated")
		})
	}
	_, err := parseConfig([]string{"-tokens-file", filepath.Join(t.TempDir(), "missing.json")}, func(string) string { return "" }, io.Discard)
	require.ErrorContains(t, err, "-tokens-file")
	require.ErrorIs(t, err, os.ErrNotExist)
}

// -token-file reads the admin token from a file (without its final line
// break); a short one, a second line, or -token beside it is refused.
func TestTokenFileReadsTheAdminToken(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	path := writeFile(t, "token", testToken+"\n")
	c, err := parseConfig([]string{"-token-file", path}, none, io.Discard)
	require.NoError(t, err)
	require.Equal(t, testToken, c.Token)
	c, err = parseConfig(nil, func(k string) string { return map[string]string{"XTIMER_TOKEN_FILE": path}[k] }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, testToken, c.Token)

	short := writeFile(t, "short", "fifteen-bytes!!\n")
	_, err = parseConfig([]string{"-token-file", short}, none, io.Discard)
	require.EqualError(t, err, fmt.Sprintf("-token-file %q: 15 bytes, want at least 16 (e.g. openssl rand -hex 24)", short))
	two := writeFile(t, "two", testToken+"\nsecond\n")
	_, err = parseConfig([]string{"-token-file", two}, none, io.Discard)
	require.ErrorContains(t, err, "more than one line")
	empty := writeFile(t, "empty", "\n")
	_, err = parseConfig([]string{"-token-file", empty}, none, io.Discard)
	require.ErrorContains(t, err, "empty")
	_, err = parseConfig([]string{"-token-file", path, "-token", testToken}, none, io.Discard)
	require.EqualError(t, err, "-token and -token-file are both set: give the admin token once, in the file")
	_, err = parseConfig([]string{"-token", "fifteen-bytes!!"}, none, io.Discard)
	require.EqualError(t, err, "-token: 15 bytes, want at least 16 (e.g. openssl rand -hex 24)")
	// A tokens file is enough to listen off loopback.
	tokens := writeFile(t, "tokens.json", `[{"name": "alice", "role": "viewer", "token_sha256": "`+sha256Hex(testToken)+`"}]`)
	_, err = parseConfig([]string{"-tokens-file", tokens, "-listen", "0.0.0.0:0"}, none, io.Discard)
	require.NoError(t, err)
}

// The tokens of -tokens-file authorize their principals, as a bearer
// token or as basic authentication with the entry's name; a wrong token,
// or another entry's name, is refused.
func TestTokensAuthorizeTheirPrincipals(t *testing.T) {
	t.Parallel()
	entries := []tokenEntry{
		{Name: "alice", Role: "operator", Apps: []string{"billing"}, TokenSHA256: sha256Hex("alice-token-0123456789")},
		{Name: "bob", Role: "viewer", TokenSHA256: sha256Hex("bob-token-0123456789ab")},
	}
	data, err := json.Marshal(entries)
	require.NoError(t, err)
	c, err := parseConfig([]string{"-tokens-file", writeFile(t, "tokens.json", string(data))}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	authorize := c.authorizer()
	ask := func(set func(r *http.Request)) (admin.Principal, error) {
		r := httptest.NewRequest(http.MethodGet, "/xtimer/", nil)
		set(r)
		return authorize(r)
	}
	p, err := ask(func(r *http.Request) { r.Header.Set("Authorization", "Bearer alice-token-0123456789") })
	require.NoError(t, err)
	require.Equal(t, admin.Principal{Name: "alice", Role: admin.RoleOperator, Apps: []string{"billing"}}, p)
	p, err = ask(func(r *http.Request) { r.SetBasicAuth("bob", "bob-token-0123456789ab") })
	require.NoError(t, err)
	require.Equal(t, admin.Principal{Name: "bob", Role: admin.RoleViewer}, p)
	for _, set := range []func(r *http.Request){
		func(r *http.Request) {},
		func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong-token-0123456789") },
		func(r *http.Request) { r.SetBasicAuth("alice", "bob-token-0123456789ab") },
		func(r *http.Request) { r.SetBasicAuth("bob", "wrong") },
	} {
		_, err = ask(set)
		require.ErrorIs(t, err, admin.ErrUnauthenticated)
		var ch interface{ Challenge() string }
		require.True(t, errors.As(err, &ch))
	}
}

// End to end: a viewer reads and may not create, an operator pauses
// (its name in the task's history), the admin of -token-file creates, a
// principal of another app gets 404 for this one's task and no metrics.
func TestServerAuthorizesTheTokensFilesPrincipals(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	tokens := []tokenEntry{
		{Name: "alice", Role: "operator", Apps: []string{"billing"}, TokenSHA256: sha256Hex("alice-token-0123456789")},
		{Name: "bob", Role: "viewer", TokenSHA256: sha256Hex("bob-token-0123456789ab")},
		{Name: "carol", Role: "admin", Apps: []string{"search"}, TokenSHA256: sha256Hex("carol-token-0123456789")},
	}
	data, err := json.Marshal(tokens)
	require.NoError(t, err)
	s := startServer(t, bin, "-db", filepath.Join(t.TempDir(), "xtimer.db"), "-listen", "127.0.0.1:0", "-app", "billing",
		"-tokens-file", writeFile(t, "tokens.json", string(data)), "-token-file", writeFile(t, "token", testToken+"\n"))

	task := `{"code":"billing.ping","spec":"0 0 1 1 *","paused":true,"target":{"method":"POST","url":"http://192.0.2.10/ping"}}`
	status, body := s.request(t, http.MethodPost, "/xtimer/api/tasks", "bob-token-0123456789ab", task)
	require.Equal(t, http.StatusForbidden, status, body)
	status, body = s.request(t, http.MethodPost, "/xtimer/api/tasks", "alice-token-0123456789", task)
	require.Equal(t, http.StatusForbidden, status, body)
	status, body = s.request(t, http.MethodPost, "/xtimer/api/tasks", testToken, task)
	require.Equal(t, http.StatusCreated, status, body)
	status, body = s.request(t, http.MethodPost, "/xtimer/api/tasks/billing.ping/resume", "alice-token-0123456789", "{}")
	require.Equal(t, http.StatusOK, status, body)
	status, body = s.request(t, http.MethodGet, "/xtimer/api/tasks/billing.ping", "bob-token-0123456789ab", "")
	require.Equal(t, http.StatusOK, status, body)
	var detail struct {
		Data struct {
			Actions []struct{ Principal, Action string } `json:"actions"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &detail))
	require.Equal(t, []struct{ Principal, Action string }{{"alice", "resume"}, {admin.TokenName(testToken), "create"}}, detail.Data.Actions)

	status, body = s.request(t, http.MethodGet, "/xtimer/api/tasks/billing.ping", "carol-token-0123456789", "")
	require.Equal(t, http.StatusNotFound, status, body)
	status, _ = s.request(t, http.MethodGet, "/metrics", "carol-token-0123456789", "")
	require.Equal(t, http.StatusForbidden, status)
	status, _ = s.request(t, http.MethodGet, "/metrics", "bob-token-0123456789ab", "")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, strings.Join(s.cmd.Args, " "), testToken, "the admin token is not on the command line")
	s.stop(t)
}
