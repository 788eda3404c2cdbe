// Package secretbox encrypts the secrets xtimer stores (the secret header
// values and signing secret of HTTP callback tasks) with AES-256-GCM from
// the standard library, under keys that each carry an ID, so that keys can
// be rotated: a Keyring seals with its first key and opens with any.
//
// A sealed value is text, so that it fits where the plaintext was:
//
//	xtenc:v1:<key id>:<base64 of nonce || ciphertext || tag>
//
// The key ID in the clear says which key opens it, and lets a replica
// that lacks that key say so. The caller's additional data (AAD) binds a
// value to where it belongs: opened with other additional data, a copy
// fails as a tampered value does.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Prefix starts every sealed value; plaintext that starts with it cannot
// be stored as such (the caller refuses it).
const Prefix = "xtenc:"

// prefixV1 is the prefix of the format this package writes.
const prefixV1 = Prefix + "v1:"

// KeySize is the length of a key: AES-256.
const KeySize = 32

// MaxIDLen bounds a key ID.
const MaxIDLen = 64

// Key is one key of a Keyring.
type Key struct {
	ID    string
	Bytes []byte
}

// Keyring seals with its first key and opens with any of its keys. Its
// methods are safe for concurrent use.
type Keyring struct {
	first string
	ids   []string
	aeads map[string]cipher.AEAD
}

// New returns the keyring of keys, the first sealing: at least one key,
// each with a valid ID (ValidID), KeySize bytes and an ID of its own. The
// error names the key by its index and ID, never its bytes.
func New(keys []Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	k := &Keyring{first: keys[0].ID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for i, key := range keys {
		if reason := IDProblem(key.ID); reason != "" {
			return nil, fmt.Errorf("key %d id %q: %s", i, key.ID, reason)
		}
		if len(key.Bytes) != KeySize {
			return nil, fmt.Errorf("key %d (id %q): %d bytes, want %d", i, key.ID, len(key.Bytes), KeySize)
		}
		if _, dup := k.aeads[key.ID]; dup {
			return nil, fmt.Errorf("key %d: id %q is given twice", i, key.ID)
		}
		block, err := aes.NewCipher(key.Bytes)
		if err != nil {
			return nil, fmt.Errorf("key %d (id %q): %w", i, key.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %d (id %q): %w", i, key.ID, err)
		}
		k.aeads[key.ID] = aead
		k.ids = append(k.ids, key.ID)
	}
	return k, nil
}

// IDProblem says what is wrong with a key ID, "" if nothing: 1 to
// MaxIDLen letters, digits and . _ -.
func IDProblem(id string) string {
	switch {
	case id == "":
		return "empty: want 1-64 letters, digits and . _ -"
	case len(id) > MaxIDLen:
		return fmt.Sprintf("%d bytes, want at most %d", len(id), MaxIDLen)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("character %q: want letters, digits and . _ -", c)
		}
	}
	return ""
}

// First is the ID of the key that seals.
func (k *Keyring) First() string { return k.first }

// IDs are the keys' IDs, the sealing one first.
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// Seal encrypts plaintext under the first key, bound to aad.
func (k *Keyring) Seal(plaintext string, aad []byte) (string, error) {
	aead := k.aeads[k.first]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secretbox: nonce: %w", err)
	}
	sealed := aead.Seal(nonce, nonce, []byte(plaintext), aad)
	return prefixV1 + k.first + ":" + base64.StdEncoding.EncodeToString(sealed), nil
}

// Errors of Open, for errors.Is; an *OpenError wraps one of them.
var (
	// ErrUnknownKey: the value names a key the keyring does not have.
	ErrUnknownKey = errors.New("sealed under a key this keyring does not have")
	// ErrNoKeys: a sealed value and no keyring at all.
	ErrNoKeys = errors.New("sealed, and no key is configured")
	// ErrMalformed: the value starts with Prefix but is not a value this
	// package writes.
	ErrMalformed = errors.New("not a well-formed sealed value")
	// ErrNotAuthentic: the key of that ID does not open the value: another
	// key under the same ID, or a value altered or bound to other
	// additional data (copied from elsewhere).
	ErrNotAuthentic = errors.New("does not decrypt: the key of that id differs from the one that encrypted it, or the value was altered or copied from elsewhere")
)

// OpenError says why a sealed value does not open: KeyID is the key it
// names ("" when malformed), Err one of the errors above. It never holds
// the value.
type OpenError struct {
	KeyID string
	Err   error
}

func (e *OpenError) Error() string {
	if e.KeyID == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("key id %q: %v", e.KeyID, e.Err)
}

func (e *OpenError) Unwrap() error { return e.Err }

// IsSealed reports whether v is a sealed value (starts with Prefix).
func IsSealed(v string) bool { return strings.HasPrefix(v, Prefix) }

// KeyID is the ID of the key v names; ok is false when v is not a
// well-formed sealed value.
func KeyID(v string) (id string, ok bool) {
	rest, found := strings.CutPrefix(v, prefixV1)
	if !found {
		return "", false
	}
	id, _, found = strings.Cut(rest, ":")
	return id, found && IDProblem(id) == ""
}

// Open decrypts a sealed value bound to aad; a nil keyring opens nothing
// (ErrNoKeys). Errors are *OpenError.
func (k *Keyring) Open(v string, aad []byte) (string, error) {
	id, ok := KeyID(v)
	if !ok {
		return "", &OpenError{Err: ErrMalformed}
	}
	if k == nil {
		return "", &OpenError{KeyID: id, Err: ErrNoKeys}
	}
	aead := k.aeads[id]
	if aead == nil {
		return "", &OpenError{KeyID: id, Err: fmt.Errorf("%w (its keys: %s)", ErrUnknownKey, strings.Join(k.ids, ", "))}
	}
	raw, err := base64.StdEncoding.DecodeString(v[len(prefixV1)+len(id)+1:])
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return "", &OpenError{KeyID: id, Err: ErrMalformed}
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], aad)
	if err != nil {
		return "", &OpenError{KeyID: id, Err: ErrNotAuthentic}
	}
	return string(plain), nil
}

// AAD builds additional data from parts, each length-prefixed so that no
// two lists of parts give the same bytes.
func AAD(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += 4 + len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p))) //nolint:gosec // G115: parts are names, far shorter than 4 GiB
		b = append(b, p...)
	}
	return b
}
