package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/admin"
	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "test-token-0123456789abcdef"

// buildServer compiles the command into a temporary directory, so the
// tests run it the way systemd does: a separate process, signals and all.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "xtimer-server")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// server is a running xtimer-server process.
type server struct {
	cmd     *exec.Cmd
	console string // http://127.0.0.1:port/xtimer/
	base    string // http://127.0.0.1:port
	stderr  *testsvc.LogBuffer
	exited  chan struct{} // closed when the process has exited; cmd.ProcessState is then set
}

// startServer runs the binary with args and waits for the console URL it
// prints once the scheduler has started. The process is killed at the end
// of the test if it is still running.
func startServer(t *testing.T, bin string, args ...string) *server {
	t.Helper()
	s := &server{cmd: exec.Command(bin, args...), stderr: &testsvc.LogBuffer{}, exited: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), "XTIMER_TOKEN=", "XTIMER_TOKEN_FILE=", "XTIMER_TOKENS_FILE=", "XTIMER_DB=", "XTIMER_LISTEN=", "XTIMER_REDIS=", "XTIMER_METRICS=",
		"XTIMER_ALERT_WEBHOOK=", "XTIMER_ALERT_SECRET=", "XTIMER_TLS_CERT=", "XTIMER_TLS_KEY=", "XTIMER_INSECURE_LISTEN=")
	s.cmd.Stderr = s.stderr
	stdout, err := s.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, s.cmd.Start())
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "console "); ok {
				url, _, _ := strings.Cut(rest, " ")
				select {
				case urls <- url:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("xtimer-server stderr:\n%s", s.stderr.String())
		}
	})
	select {
	case s.console = <-urls:
	case <-s.exited:
		t.Fatalf("xtimer-server exited before serving (%v):\n%s", s.cmd.ProcessState, s.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("xtimer-server printed no console URL within 60s:\n%s", s.stderr.String())
	}
	s.base = strings.TrimSuffix(s.console, "/xtimer/")
	return s
}

// stop sends SIGTERM and waits for the process to exit with 0; its stderr
// is then complete.
func (s *server) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-s.exited:
	case <-time.After(schedulerStopTimeout + httpStopTimeout + 5*time.Second):
		t.Fatal("xtimer-server did not exit after SIGTERM")
	}
	require.Equal(t, 0, s.cmd.ProcessState.ExitCode(), "exit after SIGTERM:\n%s", s.stderr.String())
}

// testCert is a self-signed certificate for 127.0.0.1, ::1 and localhost,
// written to a temporary directory as PEM, with a pool that trusts it and
// the key of another certificate.
type testCert struct {
	cert, key string // file paths for -tls-cert and -tls-key
	otherKey  string // a valid key that is not the certificate's
	pool      *x509.CertPool
}

func newTestCert(t *testing.T) testCert {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "xtimer-server test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	parsed, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	c := testCert{cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key"),
		otherKey: filepath.Join(dir, "other.key"), pool: x509.NewCertPool()}
	c.pool.AddCert(parsed)
	writePEM := func(path, typ string, der []byte) {
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	}
	writePEM(c.cert, "CERTIFICATE", der)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	writePEM(c.key, "PRIVATE KEY", keyDER)
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	otherDER, err := x509.MarshalECPrivateKey(other)
	require.NoError(t, err)
	writePEM(c.otherKey, "EC PRIVATE KEY", otherDER)
	return c
}

// request sends method to the server's path with an optional bearer
// token and JSON body, and returns the status and body.
func (s *server) request(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	status, got, err := s.send(method, path, token, body)
	require.NoError(t, err)
	return status, got
}

// send is request for callers that decide on the error themselves, such
// as an Eventually's condition, where a failed request means "not yet".
func (s *server) send(method, path, token, body string) (int, string, error) {
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, string(b), nil
}

// callback is one request the receiver got.
type callback struct {
	header http.Header
	body   []byte
	ok     bool // executor.VerifyWebhook accepted its signature
}

func TestServerRunsCallbackTasksAndStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	const secret = "whsec-server-test-0123456789"
	calls := make(chan callback, 100)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case calls <- callback{header: r.Header.Clone(), body: body, ok: executor.VerifyWebhook(secret, r.Header, body, time.Now(), 0) == nil}:
		default:
		}
	}))
	defer receiver.Close()

	s := startServer(t, bin, "-db", filepath.Join(t.TempDir(), "xtimer.db"), "-listen", "127.0.0.1:0",
		"-token", testToken, "-signing-secret", secret, "-app", "platform-test", "-allow", "127.0.0.1")
	status, body := s.request(t, http.MethodGet, "/healthz", "", "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ok", body)
	status, _ = s.request(t, http.MethodGet, "/", "", "")
	require.Equal(t, http.StatusFound, status, "/ redirects to the console")

	status, body = s.request(t, http.MethodGet, "/xtimer/api/tasks", "", "")
	require.Equal(t, http.StatusUnauthorized, status, body)
	status, body = s.request(t, http.MethodGet, "/xtimer/api/tasks", "wrong-token-0123456789", "")
	require.Equal(t, http.StatusUnauthorized, status, body)
	status, body = s.request(t, http.MethodGet, "/xtimer/api/tasks", testToken, "")
	require.Equal(t, http.StatusOK, status, body)

	task, err := json.Marshal(map[string]any{
		"code": "platform.ping", "name": "Ping", "spec": "* * * * * *", "zone": "Europe/Paris",
		"target": map[string]any{
			"method": "POST", "url": receiver.URL + "/ping", "body": `{"day":"today"}`, "success_codes": []int{200},
			"headers": []map[string]any{{"name": "Authorization", "value": "Bearer receiver-secret", "secret": true}},
		},
		"timeout_ms": 5000, "max_attempts": 3,
	})
	require.NoError(t, err)
	status, body = s.request(t, http.MethodPost, "/xtimer/api/tasks", testToken, string(task))
	require.Equal(t, http.StatusCreated, status, body)
	require.NotContains(t, body, "receiver-secret", "a secret header's value is write-only")

	select {
	case c := <-calls:
		require.Equal(t, "platform.ping", c.header.Get("X-Xtimer-Task"))
		require.NotEmpty(t, c.header.Get("X-Xtimer-Execution"))
		require.Equal(t, "1", c.header.Get("X-Xtimer-Attempt"))
		require.Equal(t, "Bearer receiver-secret", c.header.Get("Authorization"))
		require.Equal(t, `{"day":"today"}`, string(c.body))
		require.True(t, c.ok, "executor.VerifyWebhook accepts the signature of -signing-secret")
		require.Regexp(t, `^platform-test/platform\.ping/\d+$`, c.header.Get("Webhook-Id"), "the Run.ID")
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver was not called within 30s of creating a task that fires every second")
	}

	start := time.Now()
	s.stop(t)
	t.Logf("stopped in %s", time.Since(start))
}

func TestServerServesMetricsBehindTheToken(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	calls := make(chan struct{}, 100)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case calls <- struct{}{}:
		default:
		}
	}))
	defer receiver.Close()
	s := startServer(t, bin, "-db", filepath.Join(t.TempDir(), "xtimer.db"), "-listen", "127.0.0.1:0",
		"-token", testToken, "-app", "metrics-test", "-allow", "127.0.0.1")

	status, body := s.request(t, http.MethodGet, "/metrics", "", "")
	require.Equal(t, http.StatusUnauthorized, status, body)
	require.NotContains(t, body, "xtimer_", "nothing is served without the token")
	status, _ = s.request(t, http.MethodGet, "/metrics", "wrong-token-0123456789", "")
	require.Equal(t, http.StatusUnauthorized, status)

	task := `{"code":"metrics.ping","spec":"* * * * * *","target":{"method":"POST","url":"` + receiver.URL + `/ping"}}`
	status, body = s.request(t, http.MethodPost, "/xtimer/api/tasks", testToken, task)
	require.Equal(t, http.StatusCreated, status, body)
	select {
	case <-calls:
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver was not called within 30s of creating a task that fires every second")
	}
	// One scrape gathers the collectors concurrently, so it may show the
	// fire counted and its attempt not yet: wait for every series.
	series := []string{
		`xtimer_fires_total{app="metrics-test",status="succeeded",task="metrics.ping"}`,
		`xtimer_attempts_total{app="metrics-test",outcome="succeeded",task="metrics.ping"}`,
		`xtimer_running_handlers{app="metrics-test"}`,
		"go_goroutines ", "process_start_time_seconds ", `go_sql_max_open_connections{db_name="xtimer"}`,
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, body, err := s.send(http.MethodGet, "/metrics", testToken, "")
		if assert.NoError(c, err) && assert.Equal(c, http.StatusOK, status, body) {
			for _, name := range series {
				assert.Contains(c, body, name)
			}
		}
	}, 15*time.Second, 100*time.Millisecond, "GET /metrics never showed the fire with its attempt")
}

// A callback task whose receiver answers 500 is alerted to the webhook of
// -alert-webhook, signed with -alert-secret, once for its damping window.
func TestServerSendsAlertsToTheWebhook(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	const secret = "alert-secret-0123456789"
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer receiver.Close()
	alerts := make(chan callback, 100)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		alerts <- callback{header: r.Header.Clone(), body: body, ok: executor.VerifyWebhook(secret, r.Header, body, time.Now(), 0) == nil}
	}))
	defer hook.Close()
	s := startServer(t, bin, "-db", filepath.Join(t.TempDir(), "xtimer.db"), "-listen", "127.0.0.1:0",
		"-token", testToken, "-app", "alerts-test", "-alert-webhook", hook.URL+"/alerts", "-alert-secret", secret, "-allow", "127.0.0.1")
	task := `{"code":"alerts.broken","spec":"* * * * * *","target":{"method":"POST","url":"` + receiver.URL + `/broken"}}`
	status, body := s.request(t, http.MethodPost, "/xtimer/api/tasks", testToken, task)
	require.Equal(t, http.StatusCreated, status, body)

	var got callback
	select {
	case got = <-alerts:
	case <-time.After(30 * time.Second):
		t.Fatal("no alert within 30s of creating a task that fails every second")
	}
	require.True(t, got.ok, "signed with -alert-secret")
	require.Equal(t, "execution.failed", got.header.Get("X-Xtimer-Event"))
	var e map[string]any
	require.NoError(t, json.Unmarshal(got.body, &e))
	require.Equal(t, "alerts.broken", e["task"])
	require.Equal(t, "alerts-test", e["app"])
	require.Contains(t, e["error"], "500")
	require.Equal(t, got.header.Get("X-Xtimer-Alert"), e["id"])
	require.Equal(t, e["id"], got.header.Get("Webhook-Id"))
	// Failing every second: the next ones are damped for the 10-minute window.
	select {
	case again := <-alerts:
		t.Fatalf("a second alert within the window: %s", again.body)
	case <-time.After(3 * time.Second):
	}
}

func TestServerRefusesBadFlagsWithExitCode2(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	dir := t.TempDir()
	sqlite := filepath.Join(dir, "xtimer.db")
	cert := newTestCert(t)
	notPEM := filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))
	missing := filepath.Join(dir, "missing.crt")
	for _, c := range []struct {
		name string
		args []string
		env  []string
		code int
		want []string // in stderr
	}{
		{"console on all interfaces without a token", []string{"-listen", "0.0.0.0:0", "-db", sqlite}, nil, 2,
			[]string{"-listen", "0.0.0.0:0", "-token"}},
		{"console on all interfaces from the environment", []string{"-db", sqlite}, []string{"XTIMER_LISTEN=:8080"}, 2,
			[]string{"-listen", ":8080", "-token"}},
		{"token too short", []string{"-token", "short", "-db", sqlite}, nil, 2,
			[]string{"-token", "5 bytes", "at least 16"}},
		{"listen without a port", []string{"-listen", "localhost", "-db", sqlite}, nil, 2,
			[]string{"-listen", `"localhost"`}},
		{"mysql DSN without a database", []string{"-db", "mysql://bad-dsn"}, nil, 2,
			[]string{"-db", "mysql://bad-dsn", "database name required"}},
		{"DSN with an unknown scheme", []string{"-db", "sqlserver://u:hunter2@host/db"}, nil, 2,
			[]string{"-db", "unknown scheme"}},
		{"read-only from the environment", []string{"-db", sqlite}, []string{"XTIMER_READ_ONLY=maybe"}, 2,
			[]string{"XTIMER_READ_ONLY", "maybe"}},
		{"metrics from the environment", []string{"-db", sqlite}, []string{"XTIMER_METRICS=sometimes"}, 2,
			[]string{"XTIMER_METRICS", "sometimes"}},
		{"unknown flag", []string{"-dsn", sqlite}, nil, 2, []string{"-dsn"}},
		{"no read timeout", []string{"-db", sqlite, "-read-timeout", "0s"}, nil, 2, []string{"-read-timeout 0s: want more than 0 and at most 10m"}},
		{"idle timeout too long", []string{"-db", sqlite}, []string{"XTIMER_IDLE_TIMEOUT=1h"}, 2, []string{"-idle-timeout 1h0m0s"}},
		{"read timeout from the environment", []string{"-db", sqlite}, []string{"XTIMER_READ_TIMEOUT=soon"}, 2, []string{"XTIMER_READ_TIMEOUT", "soon"}},
		{"alert webhook not http", []string{"-db", sqlite, "-alert-webhook", "smtp://ops@example.com"}, nil, 2,
			[]string{"-alert-webhook", "smtp://ops@example.com", "http or https"}},
		{"alert secret without a webhook", []string{"-db", sqlite}, []string{"XTIMER_ALERT_SECRET=s3cret"}, 2,
			[]string{"-alert-secret", "-alert-webhook"}},
		{"bad app", []string{"-db", sqlite, "-app", "Not An App"}, nil, 2, []string{`-app: xtimer: Options.App = "Not An App"`}},
		{"metadata address allowed", []string{"-db", sqlite, "-allow", "10.0.0.0/8, 169.254.169.254"}, nil, 2,
			[]string{`-allow: xtimer: Options.HTTPAllow[1] = "169.254.169.254"`}},
		{"certificate without a key", []string{"-db", sqlite, "-tls-cert", cert.cert}, nil, 2,
			[]string{"-tls-cert", cert.cert, "without -tls-key"}},
		{"key without a certificate", []string{"-db", sqlite}, []string{"XTIMER_TLS_KEY=" + cert.key}, 2,
			[]string{"-tls-key", cert.key, "without -tls-cert"}},
		{"certificate file missing", []string{"-db", sqlite, "-tls-cert", missing, "-tls-key", cert.key}, nil, 2,
			[]string{"-tls-cert", missing, "no such file"}},
		{"key file missing", []string{"-db", sqlite, "-tls-cert", cert.cert, "-tls-key", missing}, nil, 2,
			[]string{"-tls-key", missing, "no such file"}},
		{"certificate not PEM", []string{"-db", sqlite, "-tls-cert", notPEM, "-tls-key", cert.key}, nil, 2,
			[]string{"-tls-cert", notPEM, "no PEM CERTIFICATE block"}},
		{"key not PEM", []string{"-db", sqlite, "-tls-cert", cert.cert, "-tls-key", notPEM}, nil, 2,
			[]string{"-tls-key", notPEM, "no PEM PRIVATE KEY block"}},
		{"key of another certificate", []string{"-db", sqlite, "-tls-cert", cert.cert, "-tls-key", cert.otherKey}, nil, 2,
			[]string{"-tls-key", cert.otherKey, "does not fit -tls-cert", cert.cert, "does not match"}},
		{"key given as the certificate", []string{"-db", sqlite, "-tls-cert", cert.key, "-tls-key", cert.key}, nil, 2,
			[]string{"-tls-cert", cert.key, "no PEM CERTIFICATE block"}},
		{"insecure listen from the environment", []string{"-db", sqlite}, []string{"XTIMER_INSECURE_LISTEN=perhaps"}, 2,
			[]string{"XTIMER_INSECURE_LISTEN", "perhaps"}},
		{"database that does not answer", []string{"-db", "mysql://root:hunter2@127.0.0.1:1/xtimer"}, nil, 1,
			[]string{"-db", "127.0.0.1:1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, c.args...)
			cmd.Env = append(append(os.Environ(), "XTIMER_TOKEN=", "XTIMER_TOKEN_FILE=", "XTIMER_TOKENS_FILE=", "XTIMER_DB=", "XTIMER_LISTEN=", "XTIMER_REDIS=", "XTIMER_READ_ONLY=", "XTIMER_METRICS=",
				"XTIMER_ALERT_WEBHOOK=", "XTIMER_ALERT_SECRET=", "XTIMER_READ_TIMEOUT=", "XTIMER_IDLE_TIMEOUT=",
				"XTIMER_TLS_CERT=", "XTIMER_TLS_KEY=", "XTIMER_INSECURE_LISTEN="), c.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			require.NoError(t, cmd.Start())
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var exit *exec.ExitError
				require.True(t, errors.As(err, &exit), "want a failing exit, got %v:\n%s", err, stderr.String())
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("still running after 30s:\n%s", stderr.String())
			}
			require.Equal(t, c.code, cmd.ProcessState.ExitCode(), stderr.String())
			for _, w := range c.want {
				require.Contains(t, stderr.String(), w)
			}
			require.NotContains(t, stderr.String(), "hunter2", "passwords are masked in errors")
		})
	}
}

func TestFlagsOverrideEnvironmentOverrideDefaults(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"XTIMER_DB": "postgres://env@db:5432/xtimer", "XTIMER_REDIS": "env-redis:6379", "XTIMER_LISTEN": "0.0.0.0:9000",
		"XTIMER_TOKEN": "env-token-0123456789", "XTIMER_APP": "env-app", "XTIMER_SIGNING_SECRET": "env-secret",
		"XTIMER_ALLOW": "billing.internal, 10.0.0.0/8,", "XTIMER_INSTANCE": "env-instance", "XTIMER_READ_ONLY": "true",
		"XTIMER_METRICS": "false", "XTIMER_READ_TIMEOUT": "20s", "XTIMER_IDLE_TIMEOUT": "1m",
		"XTIMER_TLS_CERT": "/etc/env.crt", "XTIMER_TLS_KEY": "/etc/env.key", "XTIMER_INSECURE_LISTEN": "true",
	}
	getenv := func(k string) string { return env[k] }
	none := func(string) string { return "" }

	c, err := parseConfig(nil, none, io.Discard)
	require.NoError(t, err)
	require.Equal(t, config{DB: "./xtimer.db", Listen: "127.0.0.1:8080", App: "platform", Metrics: true,
		ReadTimeout: admin.ReadTimeout, IdleTimeout: admin.IdleTimeout}, c, "defaults")

	c, err = parseConfig(nil, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, config{
		DB: "postgres://env@db:5432/xtimer", Redis: "env-redis:6379", Listen: "0.0.0.0:9000", Token: "env-token-0123456789",
		App: "env-app", SigningSecret: "env-secret", Allow: []string{"billing.internal", "10.0.0.0/8"},
		Instance: "env-instance", ReadOnly: true, Metrics: false, ReadTimeout: 20 * time.Second, IdleTimeout: time.Minute,
		TLSCert: "/etc/env.crt", TLSKey: "/etc/env.key", InsecureListen: true,
	}, c, "environment")

	c, err = parseConfig([]string{
		"-db", "flag.db", "-redis", "flag-redis:6379", "-listen", "[::1]:8081", "-token", "flag-token-0123456789",
		"-app", "flag-app", "-signing-secret", "flag-secret", "-allow", "*.example.com", "-instance", "flag-instance",
		"-read-only=false", "-metrics", "-read-timeout", "5s", "-idle-timeout", "10s",
		"-tls-cert", "flag.crt", "-tls-key", "flag.key", "-insecure-listen=false",
	}, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, config{
		DB: "flag.db", Redis: "flag-redis:6379", Listen: "[::1]:8081", Token: "flag-token-0123456789",
		App: "flag-app", SigningSecret: "flag-secret", Allow: []string{"*.example.com"},
		Instance: "flag-instance", ReadOnly: false, Metrics: true, ReadTimeout: 5 * time.Second, IdleTimeout: 10 * time.Second,
		TLSCert: "flag.crt", TLSKey: "flag.key", InsecureListen: false,
	}, c, "flags win")

	// An empty flag is a value too: -redis "" turns the environment's off.
	c, err = parseConfig([]string{"-redis", "", "-allow", ""}, getenv, io.Discard)
	require.NoError(t, err)
	require.Empty(t, c.Redis)
	require.Empty(t, c.Allow)
}

func TestConsoleOffLoopbackNeedsToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		listen, token string
		ok            bool
	}{
		{"127.0.0.1:8080", "", true},
		{"localhost:8080", "", true},
		{"[::1]:8080", "", true},
		{"127.0.0.2:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"[::]:8080", "", false},
		{"10.1.2.3:8080", "", false},
		{"0.0.0.0:8080", testToken, true},
		{":8080", testToken, true},
	} {
		t.Run(fmt.Sprintf("%s token=%t", c.listen, c.token != ""), func(t *testing.T) {
			err := config{DB: defaultDB, Listen: c.listen, Token: c.token, App: defaultApp,
				ReadTimeout: admin.ReadTimeout, IdleTimeout: admin.IdleTimeout}.validate()
			if c.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorAs(t, err, new(usageError))
			require.ErrorContains(t, err, "-token")
			require.ErrorContains(t, err, c.listen)
		})
	}
}

func TestFlagOfNamesTheFlagBehindAnOptionsError(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	for _, c := range []struct {
		opts xtimer.Options
		want string
	}{
		{xtimer.Options{DB: db, App: "Not An App"}, "-app: "},
		{xtimer.Options{DB: db, InstanceID: strings.Repeat("i", 129)}, "-instance: "},
		{xtimer.Options{DB: db, HTTPAllow: []string{"169.254.169.254"}}, "-allow: "},
		{xtimer.Options{DB: db, HTTPSigningSecret: strings.Repeat("s", 1025)}, "-signing-secret: "},
		{xtimer.Options{DB: db, Buckets: -1}, ""},
	} {
		_, err := xtimer.New(c.opts)
		require.Error(t, err)
		require.Equal(t, c.want, flagOf(err), err.Error())
	}
	require.Empty(t, flagOf(errors.New("xtimer: Options.App is not an OptionsError")), "only a typed error names a flag")
}

// A client that sends a request body slowly, or holds an idle keep-alive
// connection, is cut off by the server's read and idle timeouts instead of
// holding a connection forever, before any authorizer has seen it (issue
// 25, hole 3). Short timeouts through the flags; the test waits for the
// server to close each connection.
func TestSlowAndIdleClientsAreCutOff(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	s := startServer(t, bin, "-db", filepath.Join(t.TempDir(), "xtimer.db"), "-listen", "127.0.0.1:0",
		"-read-timeout", "300ms", "-idle-timeout", "300ms")
	addr := strings.TrimPrefix(s.base, "http://")
	closed := func(conn net.Conn, what string) {
		t.Helper()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
		_, err := io.Copy(io.Discard, conn) // returns when the server closes
		require.NoError(t, err, "%s: the server did not close the connection", what)
	}

	slow, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer slow.Close()
	_, err = io.WriteString(slow, "POST /xtimer/api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	require.NoError(t, err)
	closed(slow, "a body that never comes")

	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	closed(idle, "an idle keep-alive connection")
}

// Without -token, GET /metrics follows the console's loopback rule: a
// request that came through a proxy (any client-IP header) or names a
// Host of another site is refused, as the console refuses it (issue 25,
// hole 4; before, /metrics answered both).
func TestMetricsWithoutATokenFollowTheConsolesLoopbackRule(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	s := startServer(t, bin, "-db", filepath.Join(t.TempDir(), "xtimer.db"), "-listen", "127.0.0.1:0")
	get := func(host string, headers ...string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.base+"/metrics", nil)
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get(""))
	require.Equal(t, http.StatusForbidden, get("", "X-Forwarded-For", "203.0.113.5"))
	require.Equal(t, http.StatusForbidden, get("", "X-Real-IP", "203.0.113.5"))
	require.Equal(t, http.StatusForbidden, get("rebind.attacker.example:8080"))
}
