package secretbox_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/secretbox"
)

func key(t *testing.T, id string) secretbox.Key {
	t.Helper()
	b := make([]byte, secretbox.KeySize)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return secretbox.Key{ID: id, Bytes: b}
}

func ring(t *testing.T, keys ...secretbox.Key) *secretbox.Keyring {
	t.Helper()
	k, err := secretbox.New(keys)
	require.NoError(t, err)
	return k
}

var aad = secretbox.AAD("app", "billing.ping", "target.secret")

func TestSealedValueOpensToThePlaintextAndNamesItsKey(t *testing.T) {
	t.Parallel()
	k := ring(t, key(t, "k1"))
	sealed, err := k.Seal("Bearer s3cret", aad)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(sealed, "xtenc:v1:k1:"), sealed)
	require.NotContains(t, sealed, "s3cret")
	require.True(t, secretbox.IsSealed(sealed))
	id, ok := secretbox.KeyID(sealed)
	require.True(t, ok)
	require.Equal(t, "k1", id)
	plain, err := k.Open(sealed, aad)
	require.NoError(t, err)
	require.Equal(t, "Bearer s3cret", plain)

	again, err := k.Seal("Bearer s3cret", aad)
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "a fresh nonce each time")
	empty, err := k.Seal("", aad)
	require.NoError(t, err)
	plain, err = k.Open(empty, aad)
	require.NoError(t, err)
	require.Equal(t, "", plain)
}

func TestSealedValueDoesNotOpenWithOtherAdditionalData(t *testing.T) {
	t.Parallel()
	k := ring(t, key(t, "k1"))
	sealed, err := k.Seal("Bearer s3cret", aad)
	require.NoError(t, err)
	for _, other := range [][]byte{
		secretbox.AAD("app", "billing.other", "target.secret"),
		secretbox.AAD("app", "billing.ping", "target.headers[authorization]"),
		secretbox.AAD("other", "billing.ping", "target.secret"),
		secretbox.AAD("app", "billing.pingtarget.secret"),
		nil,
	} {
		_, err := k.Open(sealed, other)
		require.ErrorIs(t, err, secretbox.ErrNotAuthentic)
		require.NotContains(t, err.Error(), "s3cret")
	}
	require.NotEqual(t, secretbox.AAD("ab", "c"), secretbox.AAD("a", "bc"), "parts are length-prefixed")
}

func TestAlteredValueDoesNotOpen(t *testing.T) {
	t.Parallel()
	k := ring(t, key(t, "k1"))
	sealed, err := k.Seal("Bearer s3cret", aad)
	require.NoError(t, err)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "xtenc:v1:k1:"))
	require.NoError(t, err)
	for i := range raw {
		flipped := bytes.Clone(raw)
		flipped[i] ^= 1
		_, err := k.Open("xtenc:v1:k1:"+base64.StdEncoding.EncodeToString(flipped), aad)
		require.ErrorIs(t, err, secretbox.ErrNotAuthentic, "byte %d flipped", i)
	}
	for _, bad := range []string{"xtenc:v1:k1:", "xtenc:v1:k1:!!!", "xtenc:v1:k1:" + base64.StdEncoding.EncodeToString(raw[:20]), "xtenc:v2:k1:abc", "xtenc:v1:k1"} {
		_, err := k.Open(bad, aad)
		require.ErrorIs(t, err, secretbox.ErrMalformed, bad)
	}
}

func TestValueOpensOnlyWithTheKeyItNames(t *testing.T) {
	t.Parallel()
	k1 := key(t, "k1")
	sealed, err := ring(t, k1).Seal("Bearer s3cret", aad)
	require.NoError(t, err)

	// Rotation: a keyring whose first key is new still opens the old one's.
	rotated := ring(t, key(t, "k2"), k1)
	require.Equal(t, "k2", rotated.First())
	require.Equal(t, []string{"k2", "k1"}, rotated.IDs())
	plain, err := rotated.Open(sealed, aad)
	require.NoError(t, err)
	require.Equal(t, "Bearer s3cret", plain)
	resealed, err := rotated.Seal(plain, aad)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(resealed, "xtenc:v1:k2:"))

	_, err = ring(t, key(t, "k2")).Open(sealed, aad)
	require.ErrorIs(t, err, secretbox.ErrUnknownKey)
	require.EqualError(t, err, `key id "k1": sealed under a key this keyring does not have (its keys: k2)`)
	_, err = ring(t, key(t, "k1")).Open(sealed, aad)
	require.ErrorIs(t, err, secretbox.ErrNotAuthentic, "another key under the same id")
	var none *secretbox.Keyring
	_, err = none.Open(sealed, aad)
	require.ErrorIs(t, err, secretbox.ErrNoKeys)
	var oe *secretbox.OpenError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "k1", oe.KeyID)
}

func TestNewRefusesBadKeys(t *testing.T) {
	t.Parallel()
	k1 := key(t, "k1")
	for _, c := range []struct {
		keys []secretbox.Key
		want string
	}{
		{nil, "no key"},
		{[]secretbox.Key{{ID: "", Bytes: k1.Bytes}}, `key 0 id "": empty: want 1-64 letters, digits and . _ -`},
		{[]secretbox.Key{{ID: "a:b", Bytes: k1.Bytes}}, `key 0 id "a:b": character ':': want letters, digits and . _ -`},
		{[]secretbox.Key{k1, {ID: "k2", Bytes: k1.Bytes[:16]}}, `key 1 (id "k2"): 16 bytes, want 32`},
		{[]secretbox.Key{k1, k1}, `key 1: id "k1" is given twice`},
	} {
		_, err := secretbox.New(c.keys)
		require.EqualError(t, err, c.want)
	}
}
