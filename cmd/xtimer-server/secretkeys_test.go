package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
)

// keyLine is a key in the file's format: printf 'k1:%s\n' "$(head -c32 /dev/urandom | base64)".
func keyLine(t *testing.T, id string) (string, []byte) {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return id + ":" + base64.StdEncoding.EncodeToString(b) + "\n", b
}

func TestSecretKeysComeFromTheFileOrTheEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l2, k2 := keyLine(t, "k2")
	l1, k1 := keyLine(t, "k1")
	file := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(file, []byte("# rotation: k2 encrypts\n"+l2+l1), 0o600))
	none := func(string) string { return "" }
	envKeys := func(k string) string {
		if k == "XTIMER_SECRET_KEY" {
			return l1
		}
		return ""
	}

	c, err := parseConfig([]string{"-secret-key-file", file}, none, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []xtimer.SecretKey{{ID: "k2", Key: k2}, {ID: "k1", Key: k1}}, c.SecretKeys)

	c, err = parseConfig(nil, envKeys, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []xtimer.SecretKey{{ID: "k1", Key: k1}}, c.SecretKeys)

	c, err = parseConfig(nil, none, io.Discard)
	require.NoError(t, err)
	require.Nil(t, c.SecretKeys, "no key: plaintext")

	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(bad, []byte(l1+"\nk2:"+base64.StdEncoding.EncodeToString(k2[:16])+"\n"), 0o600))
	for _, c := range []struct {
		args []string
		env  func(string) string
		want string
	}{
		{[]string{"-secret-key-file", bad}, none,
			`-secret-key-file "` + bad + `": xtimer: secret keys line 3: key "k2": 16 bytes, want 32 (head -c32 /dev/urandom | base64)`},
		{[]string{"-secret-key-file", filepath.Join(dir, "missing")}, none, `-secret-key-file "` + filepath.Join(dir, "missing") + `": open`},
		{nil, func(k string) string {
			if k == "XTIMER_SECRET_KEY" {
				return l1 + l1
			}
			return ""
		}, `XTIMER_SECRET_KEY: xtimer: secret keys line 2: key id "k1": duplicate of line 1`},
		{[]string{"-secret-key-file", file}, envKeys, `-secret-key-file "` + file + `" and XTIMER_SECRET_KEY are both set: give the keys one way`},
	} {
		_, err := parseConfig(c.args, c.env, io.Discard)
		require.ErrorContains(t, err, c.want)
		require.True(t, errors.As(err, new(usageError)), "a usage error: exit 2")
		require.NotContains(t, err.Error(), strings.TrimSpace(l1[3:]), "never a key")
	}
}

// A bad key file stops the server at start, exit 2, naming the line.
func TestServerRefusesABadSecretKeyFile(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	l1, _ := keyLine(t, "k1")
	require.NoError(t, os.WriteFile(file, []byte(l1+"k2:not base64!\n"), 0o600))
	cmd := exec.Command(bin, "-db", filepath.Join(dir, "xtimer.db"), "-secret-key-file", file)
	cmd.Env = append(os.Environ(), "XTIMER_SECRET_KEY=", "XTIMER_TOKEN=", "XTIMER_DB=", "XTIMER_LISTEN=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "want a failing exit, got %v:\n%s", err, stderr.String())
	require.Equal(t, 2, exit.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), `-secret-key-file "`+file+`": xtimer: secret keys line 2: key "k2": not standard base64`)
}

// With -secret-key-file, the server stores a task's secrets encrypted
// and its callbacks carry them decrypted.
func TestServerStoresSecretsEncryptedWithTheKeyFile(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	calls := make(chan http.Header, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case calls <- r.Header.Clone():
		default:
		}
	}))
	defer receiver.Close()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	l1, _ := keyLine(t, "k1")
	require.NoError(t, os.WriteFile(keys, []byte(l1), 0o600))
	db := filepath.Join(dir, "xtimer.db")

	s := startServer(t, bin, "-db", db, "-listen", "127.0.0.1:0", "-token", testToken, "-allow", "127.0.0.1",
		"-app", "secrets-test", "-secret-key-file", keys)
	task, err := json.Marshal(map[string]any{
		"code": "platform.ping", "spec": "* * * * * *",
		"target": map[string]any{"method": "POST", "url": receiver.URL + "/ping",
			"headers": []map[string]any{{"name": "Authorization", "value": "Bearer receiver-secret", "secret": true}}},
	})
	require.NoError(t, err)
	status, body := s.request(t, http.MethodPost, "/xtimer/api/tasks", testToken, string(task))
	require.Equal(t, http.StatusCreated, status, body)
	select {
	case h := <-calls:
		require.Equal(t, "Bearer receiver-secret", h.Get("Authorization"))
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver was not called within 30s of creating a task that fires every second")
	}
	s.stop(t)

	var stored []byte
	for _, f := range []string{db, db + "-wal"} {
		b, err := os.ReadFile(f)
		if !errors.Is(err, os.ErrNotExist) {
			require.NoError(t, err)
		}
		stored = append(stored, b...)
	}
	require.NotContains(t, string(stored), "receiver-secret")
	require.Contains(t, string(stored), "xtenc:v1:k1:")
	require.NotContains(t, s.stderr.String(), "stored in plaintext")
}
