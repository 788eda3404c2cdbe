package xtimer

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"strconv"
	"strings"
	"time"
)

// This file holds the email notifier: one message per alert, through an
// SMTP server (net/smtp), upgraded with STARTTLS when the server offers it.

// DefaultEmailTimeout bounds one email's SMTP exchange when
// EmailOptions.Timeout says nothing.
const DefaultEmailTimeout = 20 * time.Second

// EmailOptions configures an EmailNotifier.
type EmailOptions struct {
	// Addr is the SMTP server, host:port (587 is mail submission with
	// STARTTLS). Required.
	Addr string
	// From is the sender, "ops@example.com" or "xtimer <ops@example.com>".
	// Required.
	From string
	// To are the recipients, each as From. At least one.
	To []string
	// Username and Password log in with AUTH PLAIN; an empty Username
	// sends without logging in. As net/smtp's PlainAuth, the password is
	// sent only over TLS (STARTTLS) or to localhost: a server elsewhere
	// that offers no STARTTLS fails every Notify.
	Username string
	Password string
	// TLSConfig configures STARTTLS, used whenever the server offers it.
	// Defaults to checking the server's certificate against the system's
	// roots for Addr's host.
	TLSConfig *tls.Config
	// Timeout bounds one email: connection, TLS and the SMTP exchange.
	// Defaults to DefaultEmailTimeout (20s).
	Timeout time.Duration
}

// EmailNotifier mails each alert: its subject names the app, kind and
// task, its plain-text body starts with the line the chat notifiers post
// and lists the event's fields.
type EmailNotifier struct {
	o    EmailOptions
	host string        // Addr's host: STARTTLS checks it, PlainAuth compares it with localhost
	from *mail.Address // parsed From
	to   []*mail.Address
}

// NewEmailNotifier checks o and returns the notifier, or an error naming
// the bad field. It does not connect: a server that is down fails Notify.
func NewEmailNotifier(o EmailOptions) (*EmailNotifier, error) {
	bad := func(field string, value any, reason string) error {
		return fmt.Errorf("xtimer: EmailOptions.%s = %v: %s", field, value, reason)
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
		return nil, bad("Addr", fmt.Sprintf("%q", o.Addr), "want host:port, such as smtp.example.com:587")
	}
	n := &EmailNotifier{o: o, host: host}
	if n.from, err = mail.ParseAddress(o.From); err != nil {
		return nil, bad("From", fmt.Sprintf("%q", o.From), "want an address such as ops@example.com")
	}
	if len(o.To) == 0 {
		return nil, bad("To", "[]", "want at least one recipient")
	}
	for i, s := range o.To {
		a, err := mail.ParseAddress(s)
		if err != nil {
			return nil, bad(fmt.Sprintf("To[%d]", i), fmt.Sprintf("%q", s), "want an address such as oncall@example.com")
		}
		n.to = append(n.to, a)
	}
	switch {
	case o.Username == "" && o.Password != "":
		return nil, bad("Password", "***", "set without Username")
	case strings.ContainsAny(o.Username, "\x00\r\n"):
		return nil, bad("Username", fmt.Sprintf("%q", o.Username), "want no NUL or line break")
	case o.Timeout < 0:
		return nil, bad("Timeout", o.Timeout, "want 0 (default) or more")
	}
	if n.o.Timeout == 0 {
		n.o.Timeout = DefaultEmailTimeout
	}
	if o.TLSConfig == nil {
		n.o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	n.o.TLSConfig = n.o.TLSConfig.Clone()
	if n.o.TLSConfig.ServerName == "" {
		n.o.TLSConfig.ServerName = host
	}
	n.o.To = append([]string(nil), o.To...)
	return n, nil
}

// Notify mails e to every recipient. An error (the server unreachable or
// refusing a command) makes the alert be tried again (Notifier).
func (n *EmailNotifier) Notify(ctx context.Context, e Event) error {
	if n == nil || n.from == nil {
		return errNoNotifier
	}
	if err := n.send(ctx, n.message(e, time.Now())); err != nil {
		return fmt.Errorf("xtimer: email: alert %s via %s: %w", e.ID, n.o.Addr, err)
	}
	return nil
}

func (n *EmailNotifier) send(ctx context.Context, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, n.o.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", n.o.Addr)
	if err != nil {
		return err
	}
	// net/smtp has no context: the connection's deadline ends a stuck exchange.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c, err := smtp.NewClient(conn, n.host)
	if err != nil {
		_ = conn.Close()
		return err
	}
	defer func() { _ = c.Close() }()
	return n.exchange(c, msg)
}

// exchange says msg to the server: STARTTLS when offered, AUTH when
// configured, then the envelope and the data.
func (n *EmailNotifier) exchange(c *smtp.Client, msg []byte) error {
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(n.o.TLSConfig); err != nil {
			return fmt.Errorf("starttls: %w", err)
		}
	}
	if n.o.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return errors.New("the server offers no AUTH")
		}
		// PlainAuth refuses, before sending anything, a connection neither
		// TLS nor to localhost.
		if err := c.Auth(smtp.PlainAuth("", n.o.Username, n.o.Password, n.host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	if err := c.Mail(n.from.Address); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	for _, a := range n.to {
		if err := c.Rcpt(a.Address); err != nil {
			return fmt.Errorf("rcpt to %s: %w", a.Address, err)
		}
	}
	w, err := c.Data()
	if err == nil {
		_, err = w.Write(msg)
		err = errors.Join(err, w.Close())
	}
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return c.Quit()
}

// emailSubjectMax bounds the subject, which names the task and the owner.
const emailSubjectMax = 200

// message is the mail of e: headers, then a quoted-printable UTF-8 text
// body, with CRLF line ends. Its Message-ID is made of the alert's ID, so
// an alert sent again is the same message to mail clients.
func (n *EmailNotifier) message(e Event, now time.Time) []byte {
	subject := fmt.Sprintf("[%s] %s", oneLine(e.App), e.Kind)
	if e.Task != "" {
		subject += " " + oneLine(e.Task)
	}
	if e.Owner != "" {
		subject += " (" + oneLine(e.Owner) + ")"
	}
	subject = strings.ToValidUTF8(subject, "\uFFFD")
	if len(subject) > emailSubjectMax {
		subject = strings.ToValidUTF8(subject[:emailSubjectMax], "") + "..."
	}
	to := make([]string, len(n.to))
	for i, a := range n.to {
		to[i] = a.String()
	}
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", n.from.String())
	header("To", strings.Join(to, ", "))
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Date", now.Format(time.RFC1123Z))
	if isToken(e.ID) {
		domain := n.from.Address[strings.LastIndexByte(n.from.Address, '@')+1:]
		header("Message-ID", "<xtimer-alert-"+e.ID+"@"+domain+">")
		header("X-Xtimer-Alert", e.ID)
	}
	if isToken(string(e.Kind)) {
		header("X-Xtimer-Event", string(e.Kind))
	}
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(emailBody(e))) // it ends lines with CRLF
	_ = qp.Close()
	return b.Bytes()
}

// isToken reports whether s is safe in a header as it is: not empty,
// letters, digits, '-', '_' and '.' only (an alert ID is hex, "-digest"
// for a digest; a kind is "execution.timed_out").
func isToken(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return s != ""
}

// emailBody is the alert's line, then its fields, one a line.
func emailBody(e Event) string {
	var b strings.Builder
	b.WriteString(alertLine(e) + "\n\n")
	field := func(name, value string) {
		if value != "" {
			b.WriteString(name + ": " + oneLine(value) + "\n")
		}
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	field("Kind", string(e.Kind))
	field("App", e.App)
	field("Task", e.Task)
	field("Owner", e.Owner)
	field("Replica", e.Replica)
	field("At", at(e.At))
	if e.ExecutionID != 0 {
		field("Execution", strconv.FormatInt(e.ExecutionID, 10))
	}
	field("Scheduled at", at(e.ScheduledAt))
	if e.Attempt != 0 {
		field("Attempt", strconv.Itoa(e.Attempt))
	}
	field("Reason", e.Reason)
	field("Error", e.Error)
	if e.Lateness != 0 {
		field("Lateness", e.Lateness.String())
	}
	if e.Missed != 0 {
		field("Missed", strconv.Itoa(e.Missed))
	}
	if e.Suppressed != 0 {
		field("Suppressed", strconv.FormatInt(e.Suppressed, 10))
	}
	field("Since", at(e.Since))
	field("Alert", e.ID)
	return b.String()
}
