package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// t0 is the fixtures' "now": 2025-03-01 09:00:00 UTC.
var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC).UnixMilli()

// bundle is what every store test gets: a migrated store on one backend,
// a unique app and a clock that moves only when told.
type bundle struct {
	ctx   context.Context
	db    *gorm.DB
	store *store.Store
	app   string
	clock *atomic.Int64 // Unix ms returned by the store's clock
}

func (b *bundle) set(ms int64) { b.clock.Store(ms) }

// eachDB runs body, in parallel, on SQLite, MySQL/MariaDB and PostgreSQL,
// each on a fresh database.
func eachDB(t *testing.T, body func(t *testing.T, b *bundle)) {
	t.Helper()
	t.Parallel()
	for _, backend := range testsvc.Backends() {
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			b := open(t, backend.Open(t))
			require.NoError(t, b.store.Migrate(b.ctx))
			body(t, b)
		})
	}
}

func open(t *testing.T, db *gorm.DB) *bundle {
	clock := new(atomic.Int64)
	clock.Store(t0)
	return &bundle{
		ctx:   context.Background(),
		db:    db,
		store: store.New(db, store.WithNow(func() time.Time { return time.UnixMilli(clock.Load()) })),
		app:   testsvc.App(t),
		clock: clock,
	}
}

// recorder is a GORM logger that keeps every statement it sees, and the
// errors it would log.
type recorder struct {
	mu   sync.Mutex
	sqls []string
	errs []error
}

func (r *recorder) LogMode(logger.LogLevel) logger.Interface      { return r }
func (r *recorder) Info(context.Context, string, ...interface{})  {}
func (r *recorder) Warn(context.Context, string, ...interface{})  {}
func (r *recorder) Error(context.Context, string, ...interface{}) {}
func (r *recorder) Trace(_ context.Context, _ time.Time, fc func() (string, int64), err error) {
	sql, _ := fc()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sqls = append(r.sqls, sql)
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

func (r *recorder) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// A lookup that finds nothing is an answer, not an error: the service's
// GORM logger (the application's, on its connection) must not log a
// "record not found" line for a task or execution that does not exist, or
// for the first alert of a task.
func TestLookupsThatFindNothingLogNoError(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rec := &recorder{}
		s := store.New(b.db.Session(&gorm.Session{Logger: rec}), store.WithNow(func() time.Time { return time.UnixMilli(b.clock.Load()) }))
		_, err := s.Task(b.ctx, b.app, "no.such.task")
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = s.Execution(b.ctx, 424242)
		require.ErrorIs(t, err, store.ErrNotFound)
		claim, err := s.RaiseAlert(b.ctx, store.AlertRaise{App: b.app, Kind: "execution.failed", Subject: "billing",
			Count: 1, Event: `{}`, AtMs: t0, WindowMs: 60_000, Replica: "r1", LeaseUntilMs: t0 + 60_000})
		require.NoError(t, err)
		require.NotNil(t, claim, "the first alert of a subject is claimed")
		require.Empty(t, rec.errors())
		require.NotEmpty(t, rec.statements(), "the recorder saw the lookups")
	})
}

func (r *recorder) statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sqls...)
}
