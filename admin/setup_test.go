package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// fixture is a started scheduler with the console mounted on a real HTTP
// server, as a service would mount it.
type fixture struct {
	S  *xtimer.Scheduler
	DB *gorm.DB
	// Store reads and writes S's tables behind its back, as the console
	// does: with S's clock.
	Store  *store.Store
	Clock  *fakeclock.Clock // nil when the fixture runs on the system clock
	Server *httptest.Server
	// URL is the console's root: Server.URL + Options.Prefix.
	URL string
	// Ran receives the code of every handler run.
	Ran chan string
}

type fixtureOpts struct {
	db       *gorm.DB // defaults to a fresh SQLite database
	realTime bool     // system clock instead of a fake one
	admin    Options  // console options; Prefix defaults to /xtimer/
	register func(*xtimer.Scheduler, chan string)
	app      string
	// fenceLoopback leaves xtimer.Options.HTTPAllow empty, as a deployment
	// that lists nothing: callbacks to loopback are refused.
	fenceLoopback bool
}

// fakeStart is the fake clock's start: a Monday, 08:59:30 UTC.
var fakeStart = time.Date(2026, 11, 30, 8, 59, 30, 0, time.UTC)

// setup starts a scheduler with the tasks register adds (a default set when
// nil), mounts the console at its prefix on an httptest server and stops
// both when the test ends.
func setup(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{DB: o.db, Ran: make(chan string, 1000)}
	if f.DB == nil {
		f.DB = testsvc.SQLite(t)
	}
	opts := xtimer.Options{DB: f.DB, App: o.app, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), InstanceID: "replica-a", Version: "v1.2.3",
		// The fixtures' callbacks go to httptest receivers and to the
		// 127.0.0.1:9 placeholder: loopback is refused unless listed.
		HTTPAllow: []string{"127.0.0.1"}}
	if o.fenceLoopback {
		opts.HTTPAllow = nil
	}
	if opts.App == "" {
		opts.App = testsvc.App(t)
	}
	if os.Getenv("XTIMER_TEST_LOG") == "1" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if !o.realTime {
		f.Clock = fakeclock.New(fakeStart)
		opts.Clock, opts.ClockReference = f.Clock, xtimer.ClockReferenceOff
	}
	s, err := xtimer.New(opts)
	require.NoError(t, err)
	f.S = s
	f.Store = store.New(f.DB, store.WithNow(s.Options().Clock.Now))
	register := o.register
	if register == nil {
		register = registerDefaults
	}
	register(s, f.Ran)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	ao := o.admin
	if ao.Logger == nil {
		ao.Logger = opts.Logger
	}
	h, err := New(s, ao)
	require.NoError(t, err)
	prefix := ao.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	mux := http.NewServeMux()
	mux.Handle(prefix, h)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Server.Close)
	f.URL = f.Server.URL + prefix
	return f
}

// registerDefaults registers the tasks most tests look at: one every
// minute, one on weekdays at 09:00 in Paris, one that always fails, and
// one whose name is hostile HTML.
func registerDefaults(s *xtimer.Scheduler, ran chan string) {
	record := func(code string) xtimer.Handler {
		return func(ctx context.Context, run *xtimer.Run) error {
			run.Printf("ran %s\n", code)
			ran <- code
			return nil
		}
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	must(s.Register("report.minutely", "* * * * *", record("report.minutely"), xtimer.WithName("Minutely report")))
	must(s.Register("billing.reconcile", "0 9 * * 1-5", record("billing.reconcile"),
		xtimer.WithName("Reconcile payments"), xtimer.WithLocation(paris), xtimer.WithRetry(3), xtimer.WithTimeout(time.Minute)))
	must(s.Register("always.fails", "*/5 * * * *", func(ctx context.Context, run *xtimer.Run) error {
		ran <- "always.fails"
		run.Printf("about to fail\n")
		return errBoom
	}, xtimer.WithName("Always fails")))
	must(s.Register("xss.task", "0 0 1 * *", record("xss.task"), xtimer.WithName(`<script>alert(1)</script>`),
		xtimer.WithDescription(`<img src=x onerror=alert(2)>`)))
}

var errBoom = errorString("boom: the ledger did not balance")

type errorString string

func (e errorString) Error() string { return string(e) }

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// defaultCodes are the codes registerDefaults registers, sorted.
var defaultCodes = []string{"always.fails", "billing.reconcile", "report.minutely", "xss.task"}

// onEveryBackend runs test on a fixture of each SQL database, as parallel
// subtests; o.db is each backend's.
func onEveryBackend(t *testing.T, o fixtureOpts, test func(t *testing.T, f *fixture)) {
	t.Helper()
	for _, b := range testsvc.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			o := o
			o.db = b.Open(t)
			test(t, setup(t, o))
		})
	}
}

// settleTimeout bounds a wait for an execution to settle.
const settleTimeout = 15 * time.Second

// taskStatus reads a task's status straight from the database.
func taskStatus(t *testing.T, f *fixture, code string) string {
	t.Helper()
	row, err := f.Store.Task(context.Background(), f.S.App(), code)
	require.NoError(t, err)
	return row.Status
}

// runNow runs a task now through the scheduler, not the console, and
// waits until its execution has status want.
func runNow(t *testing.T, f *fixture, code, want string) int64 {
	t.Helper()
	e, err := f.S.Trigger(context.Background(), code)
	require.NoError(t, err)
	waitSettled(t, f, e.ID, want)
	return e.ID
}

// waitSettled waits until execution id has status want in the database
// (rows are written in batches, off the hot path) and returns its row.
func waitSettled(t *testing.T, f *fixture, id int64, want string) store.Execution {
	t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for {
		row, err := f.Store.Execution(context.Background(), id)
		if err == nil && row.Status == want {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %d is not %s after %s: %+v (err %v)", id, want, settleTimeout, row, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// insertExecutions writes finished executions straight into the table
// (App defaults to the fixture's); the engine leaves finished rows alone.
func insertExecutions(t *testing.T, f *fixture, rows ...store.Execution) []store.Execution {
	t.Helper()
	for i := range rows {
		if rows[i].App == "" {
			rows[i].App = f.S.App()
		}
	}
	require.NoError(t, f.DB.Create(&rows).Error)
	return rows
}
