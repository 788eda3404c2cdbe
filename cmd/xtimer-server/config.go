package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/admin"
)

// config is the server's configuration: each field has a flag and an
// environment variable, and the flag wins.
type config struct {
	DB            string        // -db, XTIMER_DB
	Redis         string        // -redis, XTIMER_REDIS
	Listen        string        // -listen, XTIMER_LISTEN
	Token         string        // -token, XTIMER_TOKEN, or read from -token-file
	TokenFile     string        // -token-file, XTIMER_TOKEN_FILE
	TokensFile    string        // -tokens-file, XTIMER_TOKENS_FILE
	App           string        // -app, XTIMER_APP
	SigningSecret string        // -signing-secret, XTIMER_SIGNING_SECRET
	Allow         []string      // -allow, XTIMER_ALLOW
	Instance      string        // -instance, XTIMER_INSTANCE
	ReadOnly      bool          // -read-only, XTIMER_READ_ONLY
	Metrics       bool          // -metrics, XTIMER_METRICS
	AlertWebhook  string        // -alert-webhook, XTIMER_ALERT_WEBHOOK
	AlertSecret   string        // -alert-secret, XTIMER_ALERT_SECRET
	ReadTimeout   time.Duration // -read-timeout, XTIMER_READ_TIMEOUT
	IdleTimeout   time.Duration // -idle-timeout, XTIMER_IDLE_TIMEOUT
	TLSCert       string        // -tls-cert, XTIMER_TLS_CERT
	TLSKey        string        // -tls-key, XTIMER_TLS_KEY
	// InsecureListen says a TLS proxy terminates in front of a cleartext,
	// non-loopback -listen: it silences the start warning, nothing else.
	InsecureListen bool // -insecure-listen, XTIMER_INSECURE_LISTEN
	// SecretKeys encrypt the tasks' secrets at rest: read from the file
	// -secret-key-file names, or from XTIMER_SECRET_KEY, which holds the
	// keys themselves (secretkeys.go).
	SecretKeyFile string
	SecretKeys    []xtimer.SecretKey
	// tokens are the principals of TokensFile.
	tokens []namedToken
}

// Defaults of config.
const (
	defaultDB     = "./xtimer.db"
	defaultListen = "127.0.0.1:8080"
	defaultApp    = "platform"
	// minTokenLen is admin.BearerToken's minimum.
	minTokenLen = admin.MinSecretBytes
)

// usageError is a bad flag or environment value: the process exits 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// parseConfig reads args, with getenv supplying the defaults the flags
// override. It returns flag.ErrHelp for -h, and otherwise a usageError
// that names the flag (or variable) and the value that is wrong.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (config, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var c config
	var allow string
	fs := flag.NewFlagSet("xtimer-server", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&c.DB, "db", env("XTIMER_DB", defaultDB), "database: mysql://user:pass@host:port/db, postgres://user:pass@host:port/db?sslmode=disable, or a SQLite file path (env XTIMER_DB)")
	fs.StringVar(&c.Redis, "redis", env("XTIMER_REDIS", ""), "Redis address host:port for the slot lock; empty: in-process lock, one instance only (env XTIMER_REDIS)")
	fs.StringVar(&c.Listen, "listen", env("XTIMER_LISTEN", defaultListen), "address of the console and /healthz; without -token it must be loopback (env XTIMER_LISTEN)")
	fs.StringVar(&c.Token, "token", env("XTIMER_TOKEN", ""), "protect the console: basic auth user admin with this password, or Authorization: Bearer <token>, as an admin; at least 16 bytes; visible in ps, prefer -token-file (env XTIMER_TOKEN)")
	fs.StringVar(&c.TokenFile, "token-file", env("XTIMER_TOKEN_FILE", ""), "file holding -token on its first line, so that it is not in the command line (env XTIMER_TOKEN_FILE)")
	fs.StringVar(&c.TokensFile, "tokens-file", env("XTIMER_TOKENS_FILE", ""), `JSON list of the console's principals: [{"name": "alice", "role": "viewer|operator|admin", "apps": ["billing"], "token_sha256": "<hex>"}] (env XTIMER_TOKENS_FILE)`)
	fs.StringVar(&c.App, "app", env("XTIMER_APP", defaultApp), "xtimer App: namespaces tasks in a shared database (env XTIMER_APP)")
	fs.StringVar(&c.SigningSecret, "signing-secret", env("XTIMER_SIGNING_SECRET", ""), "default HMAC secret that signs callbacks (X-Xtimer-Signature) of tasks without their own (env XTIMER_SIGNING_SECRET)")
	fs.StringVar(&allow, "allow", env("XTIMER_ALLOW", ""), "comma-separated callback destinations allowed: host names, *.suffix, IPs, CIDRs; empty: any but loopback, link-local and metadata; loopback only when listed, e.g. 127.0.0.1 (env XTIMER_ALLOW)")
	fs.StringVar(&c.Instance, "instance", env("XTIMER_INSTANCE", ""), "name of this instance in rows and logs; default host-pid-random (env XTIMER_INSTANCE)")
	fs.StringVar(&c.AlertWebhook, "alert-webhook", env("XTIMER_ALERT_WEBHOOK", ""), "URL that receives alerts (failed, timed out, skipped, late, silent tasks, lost instances) as signed JSON POSTs; empty: alerts are logged (env XTIMER_ALERT_WEBHOOK)")
	fs.StringVar(&c.AlertSecret, "alert-secret", env("XTIMER_ALERT_SECRET", ""), "HMAC secret that signs the alert webhook's requests (X-Xtimer-Signature) (env XTIMER_ALERT_SECRET)")
	fs.StringVar(&c.TLSCert, "tls-cert", env("XTIMER_TLS_CERT", ""), "PEM certificate (chain) file: serve HTTPS, TLS 1.2 or later; needs -tls-key; read at start, restart to rotate (env XTIMER_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "tls-key", env("XTIMER_TLS_KEY", ""), "PEM private key file of -tls-cert (env XTIMER_TLS_KEY)")
	fs.StringVar(&c.SecretKeyFile, "secret-key-file", "", "file of keys that encrypt task secrets at rest, one ID:base64-of-32-bytes a line, the first encrypting; "+
		"or the keys themselves in env "+secretKeyEnv+"; without either, secrets are stored in plaintext")
	for _, d := range []struct {
		dst       *time.Duration
		flag, env string
		def       time.Duration
		help      string
	}{
		{&c.ReadTimeout, "read-timeout", "XTIMER_READ_TIMEOUT", admin.ReadTimeout, "longest a client may take to send a whole request, body included"},
		{&c.IdleTimeout, "idle-timeout", "XTIMER_IDLE_TIMEOUT", admin.IdleTimeout, "idle keep-alive connections are closed after this"},
	} {
		def := d.def
		if v := getenv(d.env); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil {
				return config{}, usagef("%s=%q: want a duration such as 30s", d.env, v)
			}
			def = parsed
		}
		fs.DurationVar(d.dst, d.flag, def, d.help+" (env "+d.env+")")
	}
	for _, b := range []struct {
		dst       *bool
		flag, env string
		def       bool
		help      string
	}{
		{&c.ReadOnly, "read-only", "XTIMER_READ_ONLY", false, "refuse every change through the console and its API"},
		{&c.Metrics, "metrics", "XTIMER_METRICS", true, "serve Prometheus metrics at GET /metrics, behind -token when set; -metrics=false turns it off"},
		{&c.InsecureListen, "insecure-listen", "XTIMER_INSECURE_LISTEN", false, "a TLS proxy terminates in front: no warning for a cleartext -listen off loopback"},
	} {
		def := b.def
		if v := getenv(b.env); v != "" {
			parsed, err := strconv.ParseBool(v)
			if err != nil {
				return config{}, usagef("%s=%q: want true or false", b.env, v)
			}
			def = parsed
		}
		fs.BoolVar(b.dst, b.flag, def, b.help+" (env "+b.env+")")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, err
		}
		return config{}, usageError{err}
	}
	if fs.NArg() > 0 {
		return config{}, usagef("unexpected argument %q: every setting is a flag (-h lists them)", fs.Arg(0))
	}
	if err := c.readSecretKeys(getenv(secretKeyEnv)); err != nil {
		return config{}, err
	}
	for _, a := range strings.Split(allow, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.Allow = append(c.Allow, a)
		}
	}
	if c.TokenFile != "" {
		if c.Token != "" {
			return config{}, usagef("-token and -token-file are both set: give the admin token once, in the file")
		}
		token, err := readTokenFile(c.TokenFile)
		if err != nil {
			return config{}, err
		}
		c.Token = token
	}
	if c.TokensFile != "" {
		tokens, err := readTokensFile(c.TokensFile)
		if err != nil {
			return config{}, err
		}
		c.tokens = tokens
	}
	return c, c.validate()
}

// validate checks what the libraries would otherwise refuse late or with
// a panic (admin.BearerToken's token length), and the server's own rule:
// no console for other hosts without a token.
func (c config) validate() error {
	if c.DB == "" {
		return usagef("-db %q: want mysql://..., postgres://... or a SQLite file path", c.DB)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"read-timeout", c.ReadTimeout}, {"idle-timeout", c.IdleTimeout}} {
		if d.v <= 0 || d.v > 10*time.Minute {
			return usagef("-%s %s: want more than 0 and at most 10m", d.flag, d.v)
		}
	}
	if c.Token != "" && len(c.Token) < minTokenLen {
		// The value is a secret: say how long it is, not what it is.
		flag := "-token"
		if c.TokenFile != "" {
			flag = fmt.Sprintf("-token-file %q", c.TokenFile)
		}
		return usagef("%s: %d bytes, want at least %d (e.g. openssl rand -hex 24)", flag, len(c.Token), minTokenLen)
	}
	if c.AlertSecret != "" && c.AlertWebhook == "" {
		return usagef("-alert-secret is set without -alert-webhook: it signs the webhook's requests")
	}
	if c.AlertWebhook != "" {
		if _, err := c.notifier(nil); err != nil {
			return usagef("-alert-webhook: %w", err)
		}
	}
	if c.TLSCert != "" && c.TLSKey == "" {
		return usagef("-tls-cert %q is set without -tls-key: HTTPS needs both, the certificate and its private key", c.TLSCert)
	}
	if c.TLSKey != "" && c.TLSCert == "" {
		return usagef("-tls-key %q is set without -tls-cert: HTTPS needs both, the certificate and its private key", c.TLSKey)
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return usagef("-listen %q: want host:port, e.g. %s: %v", c.Listen, defaultListen, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return usagef("-listen %q: port %q: want 0-65535", c.Listen, port)
	}
	if c.Token == "" && len(c.tokens) == 0 && !isLoopback(host) {
		return usagef("-listen %q is not a loopback address: without -token, -token-file or -tokens-file the console serves only this host; set one to listen on other addresses", c.Listen)
	}
	return nil
}

// notifier returns the alerts' notifier: the webhook of -alert-webhook,
// or a log notifier on log.
func (c config) notifier(log *slog.Logger) (xtimer.Notifier, error) {
	if c.AlertWebhook == "" {
		return xtimer.NewLogNotifier(log), nil
	}
	return xtimer.NewWebhookNotifier(xtimer.WebhookOptions{URL: c.AlertWebhook, Secret: c.AlertSecret})
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
