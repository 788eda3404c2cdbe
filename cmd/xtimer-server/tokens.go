package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/xtimer-go/xtimer/admin"
)

// The console's principals of -tokens-file: a JSON list of named tokens,
// each with a role and the apps it may see, the token stored as the hex
// SHA-256 of its bytes (printf %s "$TOKEN" | sha256sum):
//
//	[{"name": "alice", "role": "operator", "apps": ["billing"], "token_sha256": "9f86d0…"}]
//
// A request presents its token as "Authorization: Bearer <token>", or as
// basic authentication with the entry's name and the token as password
// (what a browser asks for).

// tokenEntry is one entry of -tokens-file.
type tokenEntry struct {
	Name        string   `json:"name"`
	Role        string   `json:"role"`
	Apps        []string `json:"apps"`
	TokenSHA256 string   `json:"token_sha256"`
}

// namedToken is an entry read and checked: its principal and its hash.
type namedToken struct {
	principal admin.Principal
	sum       [sha256.Size]byte
}

// maxTokensFile bounds -tokens-file, which is read whole at start.
const maxTokensFile = 1 << 20

// readTokensFile reads and checks -tokens-file: every error names the
// file, and an entry's index and field.
func readTokensFile(path string) ([]namedToken, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the operator names the file with a flag
	if err != nil {
		return nil, usagef("-tokens-file %q: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokensFile+1))
	if err != nil {
		return nil, usagef("-tokens-file %q: %w", path, err)
	}
	if len(data) > maxTokensFile {
		return nil, usagef("-tokens-file %q: over %d bytes", path, maxTokensFile)
	}
	var entries []tokenEntry
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, usagef(`-tokens-file %q: want a JSON list of {"name", "role", "apps", "token_sha256"} objects: %w`, path, err)
	}
	if len(entries) == 0 {
		return nil, usagef("-tokens-file %q: no entry: list at least one token", path)
	}
	out := make([]namedToken, 0, len(entries))
	names := map[string]int{}
	sums := map[[sha256.Size]byte]int{}
	for i, e := range entries {
		bad := func(field, format string, args ...any) error {
			return usagef("-tokens-file %q: entry %d: %s: %s", path, i, field, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.TrimSpace(e.Name) == "":
			return nil, bad("name", "empty: want the principal's name, written in the task history")
		case len(e.Name) > 255 || strings.ContainsAny(e.Name, ":\r\n\x00"):
			return nil, bad("name", "%q: want at most 255 bytes without a colon or line break", e.Name)
		}
		if j, ok := names[e.Name]; ok {
			return nil, bad("name", "%q is entry %d's too", e.Name, j)
		}
		names[e.Name] = i
		role, err := admin.ParseRole(e.Role)
		if err != nil {
			return nil, bad("role", "%q: want %s, %s or %s", e.Role, admin.RoleViewer, admin.RoleOperator, admin.RoleAdmin)
		}
		for k, app := range e.Apps {
			if app == "" || len(app) > 64 {
				return nil, bad(fmt.Sprintf("apps[%d]", k), "%q: want an app name of 1 to 64 bytes", app)
			}
		}
		raw, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(raw) != sha256.Size {
			// Not shown: a token pasted here instead of its hash is a secret.
			return nil, bad("token_sha256", "%d characters, not 64 hex digits: want the token's SHA-256 (printf %%s \"$TOKEN\" | sha256sum), not the token", len(e.TokenSHA256))
		}
		var sum [sha256.Size]byte
		copy(sum[:], raw)
		if j, ok := sums[sum]; ok {
			return nil, bad("token_sha256", "the same token as entry %d: give each principal a token of its own", j)
		}
		sums[sum] = i
		out = append(out, namedToken{principal: admin.Principal{Name: e.Name, Role: role, Apps: e.Apps}, sum: sum})
	}
	return out, nil
}

// tokensAuthorizer accepts the tokens of -tokens-file. Every entry is
// compared, in constant time, whichever matches, so timing tells neither
// which entry matched nor whether one did.
func tokensAuthorizer(tokens []namedToken) admin.Authorizer {
	return func(r *http.Request) (admin.Principal, error) {
		secret, user, basic := "", "", false
		if u, p, ok := r.BasicAuth(); ok {
			secret, user, basic = p, u, true
		} else if scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			secret = strings.TrimSpace(t)
		} else {
			return admin.Principal{}, bearerChallenge{fmt.Errorf("%w: send Authorization: Bearer <token>, or basic authentication with your name and token", admin.ErrUnauthenticated)}
		}
		sum := sha256.Sum256([]byte(secret))
		found := -1
		for i, t := range tokens {
			match := subtle.ConstantTimeCompare(sum[:], t.sum[:])
			if basic {
				match &= subtle.ConstantTimeCompare([]byte(user), []byte(t.principal.Name))
			}
			if match == 1 {
				found = i
			}
		}
		if found < 0 {
			return admin.Principal{}, bearerChallenge{fmt.Errorf("%w: wrong token", admin.ErrUnauthenticated)}
		}
		return tokens[found].principal, nil
	}
}

// bearerChallenge names the Bearer scheme on a 401.
type bearerChallenge struct{ error }

func (e bearerChallenge) Unwrap() error     { return e.error }
func (e bearerChallenge) Challenge() string { return `Bearer realm="xtimer console"` }

// readTokenFile reads -token-file: the token, without the line break an
// editor or echo leaves at its end.
func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path) //nolint:gosec // G304: the operator names the file with a flag
	if err != nil {
		return "", usagef("-token-file %q: %w", path, err)
	}
	token := strings.TrimRight(string(data), "\r\n")
	if token == "" {
		return "", usagef("-token-file %q: empty: want the token on its first line", path)
	}
	if strings.ContainsAny(token, "\r\n") {
		return "", usagef("-token-file %q: more than one line: want the token alone", path)
	}
	return token, nil
}

// authorizer is the console's: -token as the admin (basic user admin, or
// Bearer) and the tokens of -tokens-file; nil when neither is set
// (loopback clients only).
func (c config) authorizer() admin.Authorizer {
	var as []admin.Authorizer
	if c.Token != "" {
		as = append(as, admin.BasicAuth("admin", c.Token), admin.BearerToken(c.Token))
	}
	if len(c.tokens) > 0 {
		as = append(as, tokensAuthorizer(c.tokens))
	}
	if len(as) == 0 {
		return nil
	}
	return admin.AnyOf(as...)
}
