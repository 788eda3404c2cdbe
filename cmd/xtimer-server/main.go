// Command xtimer-server runs xtimer as a central timer service: the
// scheduler and the admin console, with no business code. Its tasks are
// HTTP callbacks created at runtime, through the console ("New callback
// task") or its JSON API (POST /xtimer/api/tasks), and every fire calls the
// task's URL with signed X-Xtimer-* headers.
//
// It is a real server command, not an example: install it with
//
//	go install github.com/xtimer-go/xtimer/cmd/xtimer-server@latest
//
// and run it under systemd (or any supervisor). Every setting is a flag with
// an environment variable; the flag wins:
//
//	-db XTIMER_DB                          mysql://…, postgres://… or a SQLite file path (default ./xtimer.db)
//	-redis XTIMER_REDIS                    Redis address; empty: in-process lock, one instance only
//	-listen XTIMER_LISTEN                  console and /healthz address (default 127.0.0.1:8080)
//	-token XTIMER_TOKEN                    console admin token: basic user admin or Bearer (visible in ps: prefer -token-file)
//	-token-file XTIMER_TOKEN_FILE          file holding -token
//	-tokens-file XTIMER_TOKENS_FILE        JSON list of named tokens with a role and apps (stored as SHA-256)
//	-app XTIMER_APP                        xtimer App (default platform)
//	-signing-secret XTIMER_SIGNING_SECRET  default HMAC secret for X-Xtimer-Signature
//	-allow XTIMER_ALLOW                    comma list of callback destinations allowed (loopback only if listed)
//	-instance XTIMER_INSTANCE              this instance's name (default host-pid-random)
//	-read-only XTIMER_READ_ONLY            refuse changes through the console
//	-metrics XTIMER_METRICS                serve Prometheus metrics at GET /metrics (default true)
//	-alert-webhook XTIMER_ALERT_WEBHOOK    URL receiving alerts as JSON POSTs (default: alerts are logged)
//	-alert-secret XTIMER_ALERT_SECRET      HMAC secret signing the alert webhook's requests
//	-tls-cert XTIMER_TLS_CERT              PEM certificate file: serve HTTPS (TLS 1.2 or later); needs -tls-key
//	-tls-key XTIMER_TLS_KEY                PEM private key file of -tls-cert
//	-insecure-listen XTIMER_INSECURE_LISTEN  a TLS proxy terminates in front: no cleartext warning
//	-secret-key-file, or XTIMER_SECRET_KEY   keys encrypting task secrets at rest (the file's path, or the keys)
//
// The keys of -secret-key-file (or XTIMER_SECRET_KEY, which holds the keys
// themselves, in the same format) are one ID:base64-of-32-bytes a line,
// the first encrypting new secrets and every one decrypting; a bad line
// fails the start (exit 2) naming it. Without keys, task secrets are
// stored in plaintext and a warning says so.
//
// Without -tls-cert, a -listen address that is not loopback logs a warning
// at start (the token and console sessions would cross the network in
// cleartext) unless -insecure-listen says a TLS proxy is in front.
//
// It serves the console at /xtimer/ (and redirects / there), GET /healthz,
// which answers 200 "ok" once the scheduler has started, and GET /metrics:
// the scheduler's xtimer_* series, the Go runtime's, the process's and the
// database pool's, behind the console's -token (Prometheus scrapes with
// authorization.credentials set to the token). SIGINT or SIGTERM
// stops it gracefully: the HTTP server first, then the scheduler, which lets
// running callbacks finish for up to 30 seconds. Bad flag values exit 2,
// other failures 1.
//
//	go run ./cmd/xtimer-server
//	xtimer-server -db 'postgres://xtimer@db:5432/xtimer' -redis 127.0.0.1:6379 -token "$TOKEN" -listen 0.0.0.0:8443 \
//		-tls-cert /etc/xtimer/tls.crt -tls-key /etc/xtimer/tls.key
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"
	_ "time/tzdata" // task zones work on hosts and images without a zone database

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/admin"
	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/backend"
)

// Timeouts of a graceful stop.
const (
	httpStopTimeout      = 10 * time.Second
	schedulerStopTimeout = 30 * time.Second
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is the whole command; it returns the exit code: 0, 1 for a failure,
// 2 for a bad flag or environment value.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		log := slog.New(slog.NewTextHandler(stderr, nil))
		err = serve(ctx, cfg, log, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "xtimer-server:", err)
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	return 0
}

// serve runs the scheduler and the console until ctx is done, then stops
// both.
func serve(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	// The certificate first: a bad file fails before any connection is made.
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return err
	}
	db, where, err := backend.OpenDB(cfg.DB)
	if errors.Is(err, backend.ErrBadDSN) {
		return usagef("-db %w", err)
	}
	if err != nil {
		return fmt.Errorf("-db %w", err)
	}
	if sqlDB, dbErr := db.DB(); dbErr == nil {
		defer sqlDB.Close()
	}
	rdb, err := backend.OpenRedis(ctx, cfg.Redis)
	if err != nil {
		return fmt.Errorf("-redis %w", err)
	}
	lock := "in-process lock"
	if rdb != nil {
		defer rdb.Close()
		lock = "redis " + cfg.Redis
	} else if db.Dialector.Name() != "sqlite" {
		log.Warn("no -redis: the in-process lock is correct for one instance only; every instance sharing this database needs -redis (XTIMER_REDIS)",
			"db", where)
	}

	var reg *prometheus.Registry // nil with -metrics=false
	var metrics prometheus.Registerer
	if cfg.Metrics {
		sqlDB, _ := db.DB()
		reg = newRegistry(sqlDB)
		metrics = reg
	}
	notifier, err := cfg.notifier(log)
	if err != nil {
		return usagef("-alert-webhook: %w", err)
	}
	s, err := xtimer.New(xtimer.Options{
		DB: db, Redis: rdb, App: cfg.App, InstanceID: cfg.Instance, Version: version(), Logger: log,
		HTTPAllow: cfg.Allow, HTTPSigningSecret: cfg.SigningSecret, Metrics: metrics, Notifier: notifier,
		SecretKeys: cfg.SecretKeys,
	})
	if err != nil {
		return usageError{fmt.Errorf("%s%w", flagOf(err), err)}
	}
	opts := admin.Options{Prefix: "/xtimer/", ReadOnly: cfg.ReadOnly, Logger: log, Authorize: cfg.authorizer()}
	console, err := admin.New(s, opts)
	if err != nil {
		return err
	}
	var started atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("/xtimer/", console)
	mux.Handle("GET /{$}", http.RedirectHandler("/xtimer/", http.StatusFound))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if !started.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	if reg != nil {
		mux.Handle("GET /metrics", metricsHandler(reg, opts.Authorize, cfg.App, log))
	}

	// Listen before Start, so that a taken port fails at once.
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("-listen %q: %w", cfg.Listen, err)
	}
	if cfg.cleartextOffLoopback(ln.Addr()) {
		log.Warn("cleartext HTTP on a non-loopback address: the -token credential, console sessions and task secrets cross the network readable by anyone on the path; "+
			"serve HTTPS with -tls-cert and -tls-key, or set -insecure-listen when a TLS proxy terminates in front of this address",
			"listen", cfg.Listen, "addr", ln.Addr().String())
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: min(admin.ReadHeaderTimeout, cfg.ReadTimeout), ReadTimeout: cfg.ReadTimeout,
		WriteTimeout: admin.WriteTimeout, IdleTimeout: cfg.IdleTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		TLSConfig: tlsCfg}
	served := make(chan error, 1)
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		// The pair is in srv.TLSConfig: no file names.
		go func() { served <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { served <- srv.Serve(ln) }()
	}

	if err = s.Start(ctx); err != nil {
		_ = srv.Close()
		return err
	}
	started.Store(true)
	fmt.Fprintf(stdout, "xtimer-server: console %s (app %s, %s, %s)\n", consoleURL(scheme, ln.Addr()), cfg.App, where, lock)

	select {
	case <-ctx.Done():
		log.Info("stopping: signal received")
	case err = <-served:
		log.Error("http server failed", "err", err)
	}
	httpCtx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
	defer cancel()
	_ = srv.Shutdown(httpCtx)
	stopCtx, cancel := context.WithTimeout(context.Background(), schedulerStopTimeout)
	defer cancel()
	if stopErr := s.Stop(stopCtx); stopErr != nil {
		return fmt.Errorf("stop: %w", stopErr)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("-listen %q: %w", cfg.Listen, err)
	}
	return nil
}

// consoleURL is the console's address to print: a wildcard listen
// address is shown as 127.0.0.1, where a browser on this host finds it.
func consoleURL(scheme string, addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/xtimer/"
}

// flagOf names the flag behind an xtimer.New error about an option the
// server sets from a flag, as a prefix for the message.
func flagOf(err error) string {
	var opt *xtimer.OptionsError
	if !errors.As(err, &opt) {
		return ""
	}
	var allow *executor.AllowError
	switch {
	case errors.As(err, &allow):
		return "-allow: "
	case opt.Field == "App":
		return "-app: "
	case opt.Field == "InstanceID":
		return "-instance: "
	case opt.Field == "HTTPSigningSecret":
		return "-signing-secret: "
	}
	return ""
}

// version is the module version this binary was built from ("v1.2.3"
// after go install …@v1.2.3), shown beside the instance in the console.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return ""
}
