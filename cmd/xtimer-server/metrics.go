package main

import (
	"database/sql"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xtimer-go/xtimer/admin"
)

// newRegistry returns the registry GET /metrics serves: the Go runtime,
// this process, and the database pool (go_sql_*, db="xtimer"); the
// scheduler adds its xtimer_* series through xtimer.Options.Metrics.
func newRegistry(db *sql.DB) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if db != nil {
		reg.MustRegister(collectors.NewDBStatsCollector(db, "xtimer"))
	}
	return reg
}

// metricsHandler serves reg in the Prometheus text format, behind the
// console's guard: with -token (authorize set) a request needs the same
// credential as the console, which Prometheus sends with
// authorization.credentials (a bearer token) or basic_auth (user admin);
// without it, the console's loopback rule (admin.LoopbackOnly): a proxied
// request, or one naming another Host, is refused like the console's.
//
// A principal of -tokens-file reads them when it may see app, the
// server's: the series are that app's and the process's.
func metricsHandler(reg *prometheus.Registry, authorize admin.Authorizer, app string, log *slog.Logger) http.Handler {
	h := promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), Registry: reg,
	}))
	if authorize == nil {
		authorize = admin.LoopbackOnly()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := authorize(r)
		if err == nil && !p.SeesApp(app) {
			err = admin.ErrForbidden
		}
		if err != nil {
			code := http.StatusForbidden
			if errors.Is(err, admin.ErrUnauthenticated) {
				code = http.StatusUnauthorized
				// The console's challenge (basic auth first), so a browser asks.
				var ch interface{ Challenge() string }
				if errors.As(err, &ch) {
					w.Header().Set("WWW-Authenticate", ch.Challenge())
				}
			}
			http.Error(w, http.StatusText(code), code)
			return
		}
		h.ServeHTTP(w, r)
	})
}
