package xtimer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"io"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// smtpServer is a minimal SMTP server on a real socket: EHLO, STARTTLS
// (when it has a certificate), AUTH PLAIN, MAIL, RCPT, DATA and QUIT,
// keeping what each session said.
type smtpServer struct {
	ln         net.Listener
	tls        *tls.Config // nil: STARTTLS not offered
	rejectRcpt string      // a recipient answered 550
	wg         sync.WaitGroup

	mu       sync.Mutex
	sessions []*smtpSession
}

type smtpSession struct {
	verbs     []string // the commands, in order
	auth      string   // AUTH PLAIN's decoded response
	tlsAtAuth bool
	from      string
	to        []string
	data      []byte
}

func newSMTPServer(t *testing.T, addr string, tlsConfig *tls.Config) *smtpServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s := &smtpServer{ln: ln, tls: tlsConfig}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(conn)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

// session returns what the only session said.
func (s *smtpServer) session(t *testing.T) smtpSession {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.sessions, 1)
	return *s.sessions[0]
}

func (s *smtpServer) serve(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a client that hangs ends the session, not the test run
	sess := &smtpSession{}
	s.mu.Lock()
	s.sessions = append(s.sessions, sess)
	s.mu.Unlock()
	tp := textproto.NewConn(conn)
	secure := false
	_ = tp.PrintfLine("220 test.local ESMTP")
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		verb = strings.ToUpper(verb)
		s.mu.Lock()
		sess.verbs = append(sess.verbs, verb)
		s.mu.Unlock()
		switch verb {
		case "EHLO":
			_ = tp.PrintfLine("250-test.local")
			if s.tls != nil && !secure {
				_ = tp.PrintfLine("250-STARTTLS")
			}
			_ = tp.PrintfLine("250 AUTH PLAIN")
		case "STARTTLS":
			_ = tp.PrintfLine("220 2.0.0 ready")
			tc := tls.Server(conn, s.tls)
			if tc.Handshake() != nil {
				return
			}
			conn, tp, secure = tc, textproto.NewConn(tc), true
		case "AUTH":
			_, resp, _ := strings.Cut(arg, " ")
			dec, _ := base64.StdEncoding.DecodeString(resp)
			s.mu.Lock()
			sess.auth, sess.tlsAtAuth = string(dec), secure
			s.mu.Unlock()
			_ = tp.PrintfLine("235 2.7.0 accepted")
		case "MAIL":
			s.mu.Lock()
			sess.from = arg
			s.mu.Unlock()
			_ = tp.PrintfLine("250 2.1.0 ok")
		case "RCPT":
			if s.rejectRcpt != "" && strings.Contains(arg, s.rejectRcpt) {
				_ = tp.PrintfLine("550 5.1.1 no such user")
				continue
			}
			s.mu.Lock()
			sess.to = append(sess.to, arg)
			s.mu.Unlock()
			_ = tp.PrintfLine("250 2.1.5 ok")
		case "DATA":
			_ = tp.PrintfLine("354 go ahead")
			data, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			s.mu.Lock()
			sess.data = data
			s.mu.Unlock()
			_ = tp.PrintfLine("250 2.0.0 queued")
		case "QUIT":
			_ = tp.PrintfLine("221 2.0.0 bye")
			return
		default:
			_ = tp.PrintfLine("502 5.5.2 unknown command")
		}
	}
}

// selfSigned returns a server TLS config with a certificate made here for
// 127.0.0.1, and the pool that trusts it.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "xtimer test smtp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, pool
}

// readMail parses a message as a mail client does, body decoded.
func readMail(t *testing.T, data []byte) (*mail.Message, string) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, "quoted-printable", m.Header.Get("Content-Transfer-Encoding"))
	body, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	require.NoError(t, err)
	return m, string(body)
}

func TestEmailNotifierMailsOverSTARTTLSWithAuth(t *testing.T) {
	t.Parallel()
	serverTLS, roots := selfSigned(t)
	srv := newSMTPServer(t, "127.0.0.1:0", serverTLS)
	n, err := NewEmailNotifier(EmailOptions{Addr: srv.ln.Addr().String(), From: "xtimer <xtimer@example.com>",
		To: []string{"oncall@example.com", "Ledger Team <ledger@example.com>"}, Username: "alerts", Password: "hunter2",
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), ownedEvent()))

	s := srv.session(t)
	require.Equal(t, []string{"EHLO", "STARTTLS", "EHLO", "AUTH", "MAIL", "RCPT", "RCPT", "DATA", "QUIT"}, s.verbs)
	require.True(t, s.tlsAtAuth, "credentials only over TLS")
	require.Equal(t, "\x00alerts\x00hunter2", s.auth)
	require.Equal(t, "FROM:<xtimer@example.com>", s.from)
	require.Equal(t, []string{"TO:<oncall@example.com>", "TO:<ledger@example.com>"}, s.to)

	m, body := readMail(t, s.data)
	require.Equal(t, `"xtimer" <xtimer@example.com>`, m.Header.Get("From"))
	require.Equal(t, `<oncall@example.com>, "Ledger Team" <ledger@example.com>`, m.Header.Get("To"))
	require.Equal(t, "[billing] execution.failed close-day (team-ledger)", m.Header.Get("Subject"))
	require.Equal(t, "<xtimer-alert-a1b2@example.com>", m.Header.Get("Message-Id"), "the same alert sent again is the same message")
	require.Equal(t, "a1b2", m.Header.Get("X-Xtimer-Alert"))
	require.Equal(t, "execution.failed", m.Header.Get("X-Xtimer-Event"))
	require.Equal(t, "text/plain; charset=utf-8", m.Header.Get("Content-Type"))
	_, err = m.Header.Date()
	require.NoError(t, err)
	// textproto's dot reader gives the lines with LF ends.
	require.Equal(t, ownedLine+"\n\n"+strings.Join([]string{
		"Kind: execution.failed", "App: billing", "Task: close-day", "Owner: team-ledger", "Replica: node-1",
		"At: 2026-11-30T03:00:01Z", "Execution: 42", "Scheduled at: 2026-11-30T03:00:00Z", "Attempt: 3",
		`Error: ledger <locked> & "busy"`, "Suppressed: 4", "Alert: a1b2",
	}, "\n")+"\n", body)
}

func TestEmailNotifierRefusesAuthOverPlainTextToAnotherHost(t *testing.T) {
	t.Parallel()
	// 127.0.0.2 is this machine, but not "localhost" to net/smtp.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("this system cannot listen on 127.0.0.2: %v", err)
	}
	_ = ln.Close()
	srv := newSMTPServer(t, "127.0.0.2:0", nil)
	n, err := NewEmailNotifier(EmailOptions{Addr: srv.ln.Addr().String(), From: "xtimer@example.com",
		To: []string{"oncall@example.com"}, Username: "alerts", Password: "hunter2"})
	require.NoError(t, err)
	err = n.Notify(context.Background(), ownedEvent())
	require.ErrorContains(t, err, "auth: unencrypted connection")
	require.NotContains(t, err.Error(), "hunter2")
	s := srv.session(t)
	require.NotContains(t, s.verbs, "AUTH", "the password never left")
	require.NotContains(t, s.verbs, "MAIL")
}

func TestEmailNotifierFailsWhenTheServerRefusesARecipient(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t, "127.0.0.1:0", nil)
	srv.rejectRcpt = "gone@example.com"
	n, err := NewEmailNotifier(EmailOptions{Addr: srv.ln.Addr().String(), From: "xtimer@example.com",
		To: []string{"oncall@example.com", "gone@example.com"}})
	require.NoError(t, err)
	err = n.Notify(context.Background(), ownedEvent())
	require.ErrorContains(t, err, "xtimer: email: alert a1b2 via "+srv.ln.Addr().String()+": rcpt to gone@example.com: 550")
	require.ErrorContains(t, err, "no such user")
	require.NotContains(t, srv.session(t).verbs, "DATA")
}

func TestEmailSubjectIsEncodedAndCannotAddHeaders(t *testing.T) {
	t.Parallel()
	n, err := NewEmailNotifier(EmailOptions{Addr: "smtp.example.com:587", From: "xtimer@example.com", To: []string{"oncall@example.com"}})
	require.NoError(t, err)
	m, body := readMail(t, n.message(Event{ID: "a1\r\nBcc: evil@example.com", Kind: EventFailed, App: "billing",
		Task: "close\r\nBcc: evil@example.com", Owner: "账务组"}, time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)))
	require.Empty(t, m.Header.Get("Bcc"))
	require.Empty(t, m.Header.Get("Message-Id"), "an ID unsafe in a header is left out")
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	require.NoError(t, err)
	require.Equal(t, "[billing] execution.failed close Bcc: evil@example.com (账务组)", subject)
	require.Contains(t, body, "Owner: 账务组\r\n")
}

func TestEmailOptionsAreValidated(t *testing.T) {
	t.Parallel()
	ok := EmailOptions{Addr: "smtp.example.com:587", From: "xtimer@example.com", To: []string{"oncall@example.com"}}
	for _, c := range []struct {
		mod  func(*EmailOptions)
		want string
	}{
		{func(o *EmailOptions) { o.Addr = "" }, `EmailOptions.Addr = "": want host:port`},
		{func(o *EmailOptions) { o.Addr = "smtp.example.com" }, `EmailOptions.Addr = "smtp.example.com": want host:port`},
		{func(o *EmailOptions) { o.Addr = "smtp.example.com:smtp" }, `EmailOptions.Addr = "smtp.example.com:smtp"`},
		{func(o *EmailOptions) { o.From = "xtimer" }, `EmailOptions.From = "xtimer": want an address`},
		{func(o *EmailOptions) { o.To = nil }, "EmailOptions.To = []: want at least one recipient"},
		{func(o *EmailOptions) { o.To = []string{"a@example.com", "b@"} }, `EmailOptions.To[1] = "b@"`},
		{func(o *EmailOptions) { o.Password = "hunter2" }, "EmailOptions.Password = ***: set without Username"},
		{func(o *EmailOptions) { o.Username = "ops\r\nRCPT TO:<x>" }, `EmailOptions.Username = "ops\r\nRCPT TO:<x>": want no NUL or line break`},
		{func(o *EmailOptions) { o.Timeout = -time.Second }, "EmailOptions.Timeout = -1s"},
	} {
		o := ok
		c.mod(&o)
		_, err := NewEmailNotifier(o)
		require.ErrorContains(t, err, c.want)
		require.NotContains(t, err.Error(), "hunter2")
	}
	var nilEmail *EmailNotifier
	require.ErrorIs(t, nilEmail.Notify(context.Background(), ownedEvent()), errNoNotifier)
	require.ErrorIs(t, (&EmailNotifier{}).Notify(context.Background(), ownedEvent()), errNoNotifier)
}
