package admin

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// DefaultPrefix is where Handler expects to be mounted when Options.Prefix
// is empty.
const DefaultPrefix = "/xtimer/"

// DefaultMaxBodyBytes bounds the body of a request to the JSON API.
const DefaultMaxBodyBytes = 64 << 10

// Options configures the console. The zero value serves a read-write
// console at DefaultPrefix to loopback clients only.
type Options struct {
	// Prefix is the path the handler is mounted under, with a leading and a
	// trailing slash: mux.Handle(o.Prefix, admin.Handler(s, o)). Defaults
	// to DefaultPrefix ("/xtimer/").
	Prefix string
	// Authorize decides who may use the console: it returns the principal
	// the request acts as, or an error (ErrUnauthenticated for a missing or
	// wrong credential, ErrForbidden for a known principal without access).
	// Nil means loopback clients only: a request from another address, or
	// one that came through a proxy (Forwarded or X-Forwarded-For), is
	// refused with 403 and told how to configure an authorizer. See
	// BasicAuth and BearerToken.
	//
	// The principal's Role says what it may do (RoleViewer, RoleOperator,
	// RoleAdmin; none is RoleAdmin, logged once) and its Apps whose tasks
	// it may see (none: every app). An authorizer of this package built
	// with a bad argument (a password shorter than MinSecretBytes) is an
	// error of New naming this option.
	Authorize Authorizer
	// ReadOnly caps every principal at RoleViewer: every state-changing
	// request (pause, resume, run now, retry, schedule edits) is refused
	// with 403 read_only, and the pages offer no action. Defaults to
	// false.
	ReadOnly bool
	// MaxBodyBytes bounds a request body. Defaults to DefaultMaxBodyBytes
	// (64 KiB).
	MaxBodyBytes int64
	// Logger receives one info line per action (principal, task, change).
	// Defaults to slog.Default().
	Logger *slog.Logger
	// TrustedOrigins are origins ("https://ops.example.com") allowed to
	// send state-changing requests besides the console's own, for a console
	// served behind a proxy on another host name. Defaults to none.
	TrustedOrigins []string
	// AllowedHosts are host names ("ops-console.internal"), without a
	// port, that a console without an authorizer answers to besides
	// localhost and the loopback addresses. Without an authorizer every
	// other Host is refused: a page on a domain an attacker points at
	// 127.0.0.1 (DNS rebinding) is same-origin for the browser and comes
	// from loopback, and only the Host header tells it apart. Defaults to
	// none.
	AllowedHosts []string
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

func (o Options) validate() error {
	switch {
	case !strings.HasPrefix(o.Prefix, "/") || !strings.HasSuffix(o.Prefix, "/"):
		return fmt.Errorf("xtimer/admin: Options.Prefix %q: want a path that starts and ends with /, such as %q", o.Prefix, DefaultPrefix)
	case strings.ContainsAny(o.Prefix, "{}?#% \t\r\n"):
		return fmt.Errorf("xtimer/admin: Options.Prefix %q: want a plain path without {}?#%% or spaces", o.Prefix)
	case o.MaxBodyBytes < 1024:
		return fmt.Errorf("xtimer/admin: Options.MaxBodyBytes %d: want at least 1024", o.MaxBodyBytes)
	}
	for _, h := range o.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/[]@?# \t\r\n") {
			return fmt.Errorf("xtimer/admin: Options.AllowedHosts %q: want a host name or IPv4 address without scheme, port or path, such as %q", h, "ops-console.internal")
		}
	}
	return nil
}

// console is the state shared by the JSON API and the pages.
type console struct {
	s      *xtimer.Scheduler
	st     *store.Store
	opts   Options
	sopts  xtimer.Options
	log    *slog.Logger
	prefix string
	// routes are the routes mounted, each with its rules (route).
	routes []mountedRoute
	// noRoleOnce logs the first principal without a role (withRole).
	noRoleOnce sync.Once
}

// New returns the console for s: the JSON API under Prefix+"api/" and the
// web pages under Prefix, or an error naming the option that is wrong.
func New(s *xtimer.Scheduler, o Options) (http.Handler, error) {
	_, h, err := newConsole(s, o)
	return h, err
}

// newConsole is New, with the console, whose routes the tests read.
func newConsole(s *xtimer.Scheduler, o Options) (*console, http.Handler, error) {
	if s == nil {
		return nil, nil, errors.New("xtimer/admin: scheduler is nil")
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, nil, err
	}
	if err := checkAuthorizer(o.Authorize); err != nil {
		return nil, nil, fmt.Errorf("xtimer/admin: Options.Authorize: %w", err)
	}
	sopts := s.Options()
	// A store of its own on the scheduler's database, with the scheduler's
	// clock and roll-up setting: besides those a Store only remembers
	// whether it saw its tables analyzed after a large insert, which the
	// console never makes.
	st := store.New(sopts.DB, store.WithNow(s.Now), store.WithRollups(!sopts.NoRollups), store.WithLogger(o.Logger))
	c := &console{s: s, st: st, opts: o, sopts: sopts, log: o.Logger, prefix: o.Prefix}
	csrf := http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := csrf.AddTrustedOrigin(origin); err != nil {
			return nil, nil, fmt.Errorf("xtimer/admin: Options.TrustedOrigins %q: %w", origin, err)
		}
	}
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errCrossOrigin)
	}))
	mux := http.NewServeMux()
	c.routeAPI(mux)
	c.routePages(mux)
	c.routeCalendars(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, c.prefix) {
			writeError(w, r, apiErrorf(http.StatusNotFound, codeNotFound,
				"path %q is outside the console's Options.Prefix %q: mount the handler at the prefix it is configured with", r.URL.Path, c.prefix))
			return
		}
		c.notFound(w, r)
	})
	return c, c.guard(csrf.Handler(mux)), nil
}

// Handler is New for use at init, where options are constants: it panics
// if they are invalid, as http.ServeMux.Handle panics on a bad pattern.
//
//	mux.Handle("/xtimer/", admin.Handler(sched, admin.Options{Authorize: admin.BearerToken(token)}))
func Handler(s *xtimer.Scheduler, o Options) http.Handler {
	h, err := New(s, o)
	if err != nil {
		panic(err)
	}
	return h
}

// now is the scheduler's clock (corrected by the database's, as the
// engine's is), so that the console and the engine agree on "next run"
// and "24 hours ago" (and tests can drive both).
func (c *console) now() time.Time { return c.s.Now() }

// path joins the prefix and a console-relative path.
func (c *console) path(rel string) string { return c.prefix + strings.TrimPrefix(rel, "/") }
