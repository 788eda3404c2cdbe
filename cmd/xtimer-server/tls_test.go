package main

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With -tls-cert and -tls-key the console and /healthz are served over
// HTTPS only, to TLS 1.2 or later (issue 25).
func TestServerServesHTTPSFromTLS12(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	cert := newTestCert(t)
	s := startServer(t, bin, "-db", filepath.Join(t.TempDir(), "xtimer.db"), "-listen", "127.0.0.1:0",
		"-token", testToken, "-tls-cert", cert.cert, "-tls-key", cert.key)
	require.True(t, strings.HasPrefix(s.console, "https://127.0.0.1:"), s.console)
	addr := strings.TrimPrefix(s.base, "https://")

	get := func(maxVersion uint16, path, token string) (int, string) {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.pool, MaxVersion: maxVersion}}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequest(http.MethodGet, s.base+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	status, body := get(0, "/healthz", "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ok", body)
	status, body = get(tls.VersionTLS12, "/xtimer/api/tasks", testToken)
	require.Equal(t, http.StatusOK, status, "a TLS 1.2 client is served: %s", body)
	status, _ = get(0, "/xtimer/api/tasks", "")
	require.Equal(t, http.StatusUnauthorized, status, "the token is still required over TLS")

	// A client that offers at most TLS 1.1 is refused by the server's alert.
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{RootCAs: cert.pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	if err == nil {
		_ = conn.Close()
	}
	var remote *net.OpError
	require.ErrorAs(t, err, &remote, "a TLS 1.1 handshake is refused")
	require.Equal(t, "remote error", remote.Op, "refused by the server, not the client: %v", err)

	// Cleartext HTTP to the HTTPS port gets no page: net/http answers 400.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/healthz")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the TLS port: %s", b)
		require.NotEqual(t, "ok", string(b))
	}

	s.stop(t)
	require.NotContains(t, s.stderr.String(), "cleartext")
}

// A cleartext listener off loopback logs a warning naming the risk and the
// remedies; -insecure-listen, TLS or a loopback address silence it. The
// server is stopped before its stderr is read, so the log is complete.
func TestServerWarnsOfCleartextOffLoopback(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	cert := newTestCert(t)
	for _, c := range []struct {
		name string
		args []string
		warn bool
	}{
		{"all interfaces in cleartext", []string{"-listen", "0.0.0.0:0", "-token", testToken}, true},
		{"all interfaces behind a TLS proxy", []string{"-listen", "0.0.0.0:0", "-token", testToken, "-insecure-listen"}, false},
		{"all interfaces with TLS", []string{"-listen", "0.0.0.0:0", "-token", testToken, "-tls-cert", cert.cert, "-tls-key", cert.key}, false},
		{"loopback address", []string{"-listen", "127.0.0.1:0"}, false},
		{"localhost", []string{"-listen", "localhost:0", "-token", testToken}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, bin, append([]string{"-db", filepath.Join(t.TempDir(), "xtimer.db")}, c.args...)...)
			s.stop(t)
			log := s.stderr.String()
			if !c.warn {
				require.NotContains(t, log, "cleartext")
				return
			}
			var line string
			for _, l := range strings.Split(log, "\n") {
				if strings.Contains(l, "cleartext") {
					line = l
				}
			}
			for _, w := range []string{"level=WARN", "-token credential", "console sessions", "-tls-cert", "-tls-key", "-insecure-listen", "TLS proxy", `listen=0.0.0.0:0`} {
				require.Contains(t, line, w, log)
			}
		})
	}
}

func TestCleartextOffLoopbackLooksAtTheBoundAddress(t *testing.T) {
	t.Parallel()
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 8080} }
	for _, c := range []struct {
		cfg   config
		bound net.Addr
		want  bool
	}{
		{config{}, tcp("0.0.0.0"), true},
		{config{}, tcp("::"), true},
		{config{}, tcp("192.168.1.10"), true},
		{config{}, tcp("2001:db8::1"), true},
		{config{}, tcp("127.0.0.1"), false},
		{config{}, tcp("127.0.0.2"), false},
		{config{}, tcp("::1"), false},
		{config{InsecureListen: true}, tcp("0.0.0.0"), false},
		{config{TLSCert: "tls.crt", TLSKey: "tls.key"}, tcp("0.0.0.0"), false},
	} {
		require.Equal(t, c.want, c.cfg.cleartextOffLoopback(c.bound), "%+v on %s", c.cfg, c.bound)
	}
}

// The errors of tlsConfig name the flag and the file, and are usage
// errors: the process exits 2 (the files are checked end to end in
// TestServerRefusesBadFlagsWithExitCode2).
func TestTLSConfigAcceptsAPairAndNamesTheFileAtFault(t *testing.T) {
	t.Parallel()
	cert := newTestCert(t)
	cfg, err := config{TLSCert: cert.cert, TLSKey: cert.key}.tlsConfig()
	require.NoError(t, err)
	require.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
	require.Len(t, cfg.Certificates, 1)

	cfg, err = config{}.tlsConfig()
	require.NoError(t, err)
	require.Nil(t, cfg, "no TLS without the flags")

	_, err = config{TLSCert: cert.cert, TLSKey: cert.otherKey}.tlsConfig()
	require.True(t, errors.As(err, new(usageError)), "%v", err)
	require.ErrorContains(t, err, cert.otherKey)
}
