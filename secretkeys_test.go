package xtimer

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

func TestParseSecretKeysReadsOneKeyALine(t *testing.T) {
	t.Parallel()
	a, b := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	text := fmt.Sprintf("# rotated 2026-12-01\n\n  k2 : %s  \nk1:%s\n", base64.StdEncoding.EncodeToString(b), base64.StdEncoding.EncodeToString(a))
	keys, err := ParseSecretKeys(text)
	require.NoError(t, err)
	require.Equal(t, []SecretKey{{ID: "k2", Key: b}, {ID: "k1", Key: a}}, keys)
	require.Equal(t, `SecretKey{ID: "k2", Key: 32 bytes hidden}`, fmt.Sprint(keys[0]))
	require.Equal(t, `SecretKey{ID: "k2", Key: 32 bytes hidden}`, fmt.Sprintf("%#v", keys[0]))
}

func TestParseSecretKeysNamesTheBadLine(t *testing.T) {
	t.Parallel()
	good := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 16))
	for _, c := range []struct {
		text string
		line int
		want string
	}{
		{"k1:" + good + "\n# ok\nk2:" + good[:10] + "!" + good[11:], 3, `xtimer: secret keys line 3: key "k2": not standard base64 (44 characters; illegal base64 data at input byte 10)`},
		{"k1:" + short, 1, `xtimer: secret keys line 1: key "k1": 16 bytes, want 32 (head -c32 /dev/urandom | base64)`},
		{"k1:" + good + "\n\nk1:" + good, 3, `xtimer: secret keys line 3: key id "k1": duplicate of line 1`},
		{":" + good, 1, `xtimer: secret keys line 1: key id "": empty: want 1-64 letters, digits and . _ -`},
		{"k 1:" + good, 1, `xtimer: secret keys line 1: key id "k 1": character ' ': want letters, digits and . _ -`},
		{"k1:" + good + "\n" + good, 2, `xtimer: secret keys line 2: no colon: want ID:base64-of-32-bytes`},
		{"# nothing\n\n", 0, `xtimer: secret keys: no key: want at least one line ID:base64-of-32-bytes`},
		{"k1:" + strings.TrimRight(good, "="), 1, `xtimer: secret keys line 1: key "k1": not standard base64 (43 characters; illegal base64 data at input byte 40)`},
	} {
		_, err := ParseSecretKeys(c.text)
		require.EqualError(t, err, c.want)
		var kerr *SecretKeyError
		require.True(t, errors.As(err, &kerr))
		require.Equal(t, c.line, kerr.Line)
		require.NotContains(t, err.Error(), good[:20], "never the key")
	}
}

func TestNewRefusesBadSecretKeys(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{3}, 32)
	for _, c := range []struct {
		keys []SecretKey
		want string
	}{
		{[]SecretKey{{ID: "k1", Key: key[:31]}}, "xtimer: Options.SecretKeys[0].Key = 31 bytes: want 32 bytes (AES-256)"},
		{[]SecretKey{{ID: "k1", Key: key}, {ID: "", Key: key}}, `xtimer: Options.SecretKeys[1].ID = "": empty: want 1-64 letters, digits and . _ -`},
		{[]SecretKey{{ID: "k1", Key: key}, {ID: "k1", Key: key}}, `xtimer: Options.SecretKeys[1].ID = "k1": the ID of SecretKeys[0] too: want each ID once`},
		{[]SecretKey{{ID: "a:b", Key: key}}, `xtimer: Options.SecretKeys[0].ID = "a:b": character ':': want letters, digits and . _ -`},
	} {
		_, err := New(Options{DB: testsvc.SQLite(t), SecretKeys: c.keys})
		require.EqualError(t, err, c.want)
		var oe *OptionsError
		require.ErrorAs(t, err, &oe)
	}
}
