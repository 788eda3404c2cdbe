package xtimer

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/xtimer-go/xtimer/internal/secretbox"
)

// SecretKey is one key of Options.SecretKeys: an ID, stored beside every
// value the key encrypts, and 32 bytes of AES-256 key.
type SecretKey struct {
	// ID names the key: 1-64 letters, digits and . _ -. It is stored in
	// the clear with each value it encrypts, so that a replica knows which
	// key decrypts it (and can say which it lacks).
	ID string
	// Key is 32 random bytes. It is never logged nor shown in errors.
	Key []byte
}

// SecretKeyError is ParseSecretKeys's error for a bad line: Line counts
// from 1 (0 when the text holds no key at all). It never holds key bytes.
type SecretKeyError struct {
	Line   int
	Reason string
}

// Error reads like `xtimer: secret keys line 3: key "k2": 16 bytes, want 32`.
func (e *SecretKeyError) Error() string {
	if e.Line == 0 {
		return "xtimer: secret keys: " + e.Reason
	}
	return fmt.Sprintf("xtimer: secret keys line %d: %s", e.Line, e.Reason)
}

// ParseSecretKeys reads keys in the text form of xtimer-server's
// -secret-key-file and XTIMER_SECRET_KEY: one key a line, its ID, a colon,
// and its 32 bytes in standard base64 (spaces around either are ignored);
// blank lines and lines starting with # are skipped. The first key
// encrypts new values; every key decrypts (docs/configuration.md, "Secret
// keys", has the rotation steps). A bad line fails with a
// *SecretKeyError naming the line and what is wrong with it; text
// without any key fails too.
//
// A key is made with
//
//	printf 'k1:%s\n' "$(head -c32 /dev/urandom | base64)"
func ParseSecretKeys(text string) ([]SecretKey, error) {
	var keys []SecretKey
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, args ...any) error {
			return &SecretKeyError{Line: n, Reason: fmt.Sprintf(format, args...)}
		}
		id, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, bad("no colon: want ID:base64-of-32-bytes")
		}
		id, b64 = strings.TrimSpace(id), strings.TrimSpace(b64)
		if reason := secretbox.IDProblem(id); reason != "" {
			return nil, bad("key id %q: %s", id, reason)
		}
		if first, dup := seen[id]; dup {
			return nil, bad("key id %q: duplicate of line %d", id, first)
		}
		key, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil {
			// The value is a key, or most of one: say where it breaks, not what it is.
			return nil, bad("key %q: not standard base64 (%d characters; %v)", id, len(b64), err)
		}
		if len(key) != secretbox.KeySize {
			return nil, bad("key %q: %d bytes, want %d (head -c32 /dev/urandom | base64)", id, len(key), secretbox.KeySize)
		}
		seen[id] = n
		keys = append(keys, SecretKey{ID: id, Key: key})
	}
	if err := sc.Err(); err != nil {
		return nil, &SecretKeyError{Reason: err.Error()}
	}
	if len(keys) == 0 {
		return nil, &SecretKeyError{Reason: "no key: want at least one line ID:base64-of-32-bytes"}
	}
	return keys, nil
}

// checkSecretKeys is Options.validate's check of SecretKeys.
func checkSecretKeys(keys []SecretKey) error {
	seen := map[string]int{}
	for i, k := range keys {
		field := fmt.Sprintf("SecretKeys[%d]", i)
		if reason := secretbox.IDProblem(k.ID); reason != "" {
			return &OptionsError{Field: field + ".ID", Value: fmt.Sprintf("%q", k.ID), Reason: reason}
		}
		if j, dup := seen[k.ID]; dup {
			return &OptionsError{Field: field + ".ID", Value: fmt.Sprintf("%q", k.ID), Reason: fmt.Sprintf("the ID of SecretKeys[%d] too: want each ID once", j)}
		}
		seen[k.ID] = i
		if len(k.Key) != secretbox.KeySize {
			return &OptionsError{Field: field + ".Key", Value: fmt.Sprintf("%d bytes", len(k.Key)), Reason: fmt.Sprintf("want %d bytes (AES-256)", secretbox.KeySize)}
		}
	}
	return nil
}

// keyring builds the engine's keyring of keys, nil for none; keys passed
// checkSecretKeys.
func keyring(keys []SecretKey) (*secretbox.Keyring, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	ks := make([]secretbox.Key, len(keys))
	for i, k := range keys {
		ks[i] = secretbox.Key{ID: k.ID, Bytes: k.Key}
	}
	kr, err := secretbox.New(ks)
	if err != nil {
		return nil, &OptionsError{Field: "SecretKeys", Value: fmt.Sprintf("%d keys", len(keys)), Reason: err.Error()}
	}
	return kr, nil
}

// String hides the key's bytes: a SecretKey printed or logged shows its ID.
func (k SecretKey) String() string {
	return fmt.Sprintf("SecretKey{ID: %q, Key: %d bytes hidden}", k.ID, len(k.Key))
}

// GoString is String, for %#v.
func (k SecretKey) GoString() string { return k.String() }
