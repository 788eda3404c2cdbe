package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"reflect"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrNotFound is returned, wrapped, when the task or execution asked for
// does not exist.
var ErrNotFound = errors.New("store: not found")

// DefaultQueryTimeout bounds a call whose context has no deadline.
const DefaultQueryTimeout = 30 * time.Second

// MaxTextBytes is the most Output or Error can hold: MySQL's TEXT is 64 KiB.
// Longer values are cut at a UTF-8 boundary rather than failing the update
// that settles the run. Callers are expected to cap output well below it.
const MaxTextBytes = 65535

// insertChunk is the number of rows per INSERT statement. 500 rows of 22
// columns stay far below every driver's placeholder limit.
const insertChunk = 500

// maxTxRetries is how often a transaction is retried after a deadlock or a
// serialization failure.
const maxTxRetries = 5

// Store runs xtimer's queries on one GORM database. It is safe for
// concurrent use; it holds no state besides its options and whether it
// saw its busiest tables analyzed (analyzeFresh).
type Store struct {
	db      *gorm.DB
	now     func() time.Time
	timeout time.Duration
	// noRollups: deletions leave xtimer_rollups alone (WithRollups).
	noRollups                         bool
	analyzedExecutions, analyzedTasks atomic.Bool
	// flavor is the server behind the mysql dialect, asked once
	// (insertReturns): flavorUnknown until then.
	flavor atomic.Int32
	// log receives Migrate's warnings (search.go).
	log *slog.Logger
	// handlerChunk bounds a chunk of a replica's handler list
	// (SetReplicaHandlers): handlerChunkBytes unless WithHandlerChunkBytes.
	handlerChunk int
}

// Option changes a Store made by New.
type Option func(*Store)

// WithNow sets the clock used for created_ms, updated_ms and the like.
// Defaults to time.Now.
func WithNow(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithHandlerChunkBytes bounds the JSON of one chunk of a replica's
// handler list (SetReplicaHandlers) to n bytes instead of
// handlerChunkBytes: a test writes lists of many chunks in kilobytes
// rather than megabytes.
func WithHandlerChunkBytes(n int) Option { return func(s *Store) { s.handlerChunk = n } }

// WithLogger sets the logger of Migrate's warnings. Defaults to
// slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithQueryTimeout sets the timeout applied to calls whose context has no
// deadline. Defaults to DefaultQueryTimeout.
func WithQueryTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// New returns a Store on db. It does not touch the database; call Migrate
// to create or update the tables.
func New(db *gorm.DB, opts ...Option) *Store {
	s := &Store{db: db, now: time.Now, timeout: DefaultQueryTimeout, log: slog.Default(), handlerChunk: handlerChunkBytes}
	for _, o := range opts {
		o(s)
	}
	return s
}

// DB returns the underlying database, for tests and tools.
func (s *Store) DB() *gorm.DB { return s.db }

// Networked reports whether the database is reached over a network link
// (MySQL, MariaDB, PostgreSQL), as opposed to a SQLite file.
func (s *Store) Networked() bool { return s.db.Dialector.Name() != "sqlite" }

// Ping makes one round trip to the database on a connection of the pool.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// Migrate creates or updates the xtimer_ tables and indexes with GORM's
// AutoMigrate. Teams that apply schema by hand use schema/mysql.sql or
// schema/postgres.sql instead; both describe the same tables. Replicas
// that migrate at once take turns (migrateLocked). A database that holds
// every table and the mark of this version's schema (schemamark.go) is
// left as it is, after two reads; a complete migration writes the mark.
func (s *Store) Migrate(ctx context.Context) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	fingerprint, tables, err := schemaFingerprint(s.db)
	if err != nil {
		return err
	}
	if schemaCurrent(ctx, s.db, fingerprint, tables) {
		return nil
	}
	return s.migrateLocked(ctx, func(db *gorm.DB) error {
		complete, err := s.migrate(db)
		if err != nil || !complete {
			return err
		}
		return markSchema(db, fingerprint, s.now().UnixMilli())
	})
}

// migrate is Migrate's work, on db: one transaction on PostgreSQL, one
// connection on MySQL/MariaDB (migrateLocked). It reports whether the
// migration is complete: not when a step was left for a later Migrate
// (the trigram indexes, without the extension pg_trgm: migrateSearch),
// which then runs in full again.
func (s *Store) migrate(db *gorm.DB) (bool, error) {
	if err := db.AutoMigrate(models()...); err != nil {
		return false, fmt.Errorf("store: migrate: %w", err)
	}
	if err := createRetryIndex(db); err != nil {
		return false, err
	}
	// AutoMigrate never drops an index; these were replaced by better ones,
	// which exist by now.
	for _, old := range retiredIndexes(db.Dialector.Name()) {
		if db.Migrator().HasIndex(old.model, old.name) {
			if err := db.Migrator().DropIndex(old.model, old.name); err != nil {
				return false, fmt.Errorf("store: migrate: drop retired index %s: %w", old.name, err)
			}
		}
	}
	complete, err := s.migrateSearch(db)
	if err != nil {
		return false, err
	}
	if db.Dialector.Name() == "postgres" {
		if err := leaveRoomForStarts(db); err != nil {
			return false, err
		}
	}
	return complete, nil
}

// executionsFillFactor is the fill factor of xtimer_executions on
// PostgreSQL: new pages are filled half, and the start claim (StartFires,
// which changes no indexed column) writes each row's new version beside
// the old one, a HOT update that touches none of the table's six indexes.
// On full pages every claimed row is copied to another page and gets a new
// entry in every index, so StartFires is slower the fuller the pages: of
// the fill factors tried (100, 70, 50), 50 made it fastest. The start
// claim is the one write between a fire's run time and its handler
// (fire.go); the table's later writes change the status, which no fill
// factor makes HOT.
// The price is a heap up to twice as large, of rows that retention deletes.
// (InnoDB has no fill factor: its rows are updated in place.)
const executionsFillFactor = 50

// leaveRoomForStarts sets executionsFillFactor on xtimer_executions unless
// a fill factor is set already: a DBA's choice stands. It applies to pages
// written from then on.
func leaveRoomForStarts(db *gorm.DB) error {
	var opts string
	err := db.Raw(`SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class
		WHERE oid = 'xtimer_executions'::regclass`).Scan(&opts).Error
	if err != nil {
		return fmt.Errorf("store: migrate: read options of xtimer_executions: %w", err)
	}
	if strings.Contains(opts, "fillfactor=") {
		return nil
	}
	if err := db.Exec(fmt.Sprintf("ALTER TABLE xtimer_executions SET (fillfactor = %d)", executionsFillFactor)).Error; err != nil {
		return fmt.Errorf("store: migrate: set fillfactor of xtimer_executions: %w", err)
	}
	return nil
}

// retiredIndex is an index of model's table that Migrate drops.
type retiredIndex struct {
	model any
	name  string
}

// retiredIndexes lists indexes earlier versions created and Migrate drops
// on dialect.
func retiredIndexes(dialect string) []retiredIndex {
	retired := []retiredIndex{
		// (app, replica, status): replaced by xtimer_executions_replica_time,
		// which serves the console's replica filter in time order.
		{&Execution{}, "xtimer_executions_replica"},
		// (app, task_code, run_time), unique: replaced by
		// xtimer_executions_shard, the same with the shard, which is
		// created first so that the table is never without a unique key.
		{&Execution{}, "xtimer_executions_fire"},
		// lower(name) of every task: replaced by xtimer_tasks_own_name_trgm,
		// of the names that are not the task's code (search.go).
		{&Task{}, "xtimer_tasks_name_trgm"},
	}
	if name, _ := retryIndex(dialect); name != retryIndexFull {
		// (app, status, next_attempt_ms): replaced by the partial
		// xtimer_executions_retrying where the database has partial
		// indexes (retryindex.go); MySQL keeps it.
		retired = append(retired, retiredIndex{&Execution{}, retryIndexFull})
	}
	return retired
}

// ctx applies the default timeout to a context without a deadline.
func (s *Store) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || s.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// nowMs is the store's clock in Unix milliseconds.
func (s *Store) nowMs() int64 { return s.now().UnixMilli() }

// tx runs fn in a transaction under ctx, again from the start when the
// database reports a deadlock or a serialization failure. fn must be
// idempotent up to its commit.
func (s *Store) tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.txWith(ctx, nil, fn)
}

// readCommitted asks MySQL and MariaDB for READ COMMITTED.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// rowTx is tx for the fire path's writes (claims, starts, results,
// take-overs) and a replica's handler list: each names the rows it
// changes by key or by a condition rechecked in the row, and reads back
// only what it wrote, so it needs
// no protection from phantoms. On MySQL and MariaDB it runs at READ
// COMMITTED: at their default, REPEATABLE READ, an UPDATE locks every
// index entry it scans, and the gap before it, until commit, matching or
// not, so a take-over of a dead replica's slot and the starts of the
// fires next to it in the index deadlocked one another (again and again
// in a failover run, and the take-over came late). PostgreSQL is at READ
// COMMITTED by default; SQLite has one writer.
func (s *Store) rowTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if s.db.Dialector.Name() != "mysql" {
		return s.tx(ctx, fn)
	}
	return s.txWith(ctx, readCommitted, fn)
}

// abandonAfter is how long PostgreSQL lets a transaction of this package
// sit idle, its client silent, before it ends the session
// (idle_in_transaction_session_timeout, set for that transaction only).
// A replica cut off from the database in the middle of a transaction
// leaves it open on the server, with its row locks, until the cut ends:
// the other replicas' take-over of its slots waited behind those locks
// for the whole 10 s of a chaos cut. No transaction of this package waits
// on its client for anything but its own next statement.
const abandonAfter = 2 * time.Second

// abandonSQL sets abandonAfter for the transaction it runs in (a
// set_config local to it, as SET LOCAL).
var abandonSQL = fmt.Sprintf("SELECT set_config('idle_in_transaction_session_timeout', '%d', true)", abandonAfter.Milliseconds())

// customPlansSQL is abandonSQL that also has PostgreSQL plan each
// statement of the transaction for its own values rather than once for
// any (customPlanTx): one round trip for both.
var customPlansSQL = abandonSQL + ", set_config('plan_cache_mode', 'force_custom_plan', true)"

// customPlanTx is rowTx for a transaction whose statements PostgreSQL is
// to plan for their own values: a statement run five times otherwise
// gets a plan cached for its parameters, which knows nothing of their
// values (TakeOverFires).
func (s *Store) customPlanTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if s.db.Dialector.Name() != "postgres" {
		return s.rowTx(ctx, fn)
	}
	return s.txSetUp(ctx, nil, customPlansSQL, fn)
}

func (s *Store) txWith(ctx context.Context, opts *sql.TxOptions, fn func(tx *gorm.DB) error) error {
	return s.txSetUp(ctx, opts, abandonSQL, fn)
}

// txSetUp is txWith, with setup run first in each try of the
// transaction on PostgreSQL.
func (s *Store) txSetUp(ctx context.Context, opts *sql.TxOptions, setup string, fn func(tx *gorm.DB) error) error {
	if s.db.Dialector.Name() == "postgres" {
		inner := fn
		fn = func(tx *gorm.DB) error {
			if err := tx.Exec(setup).Error; err != nil {
				return err
			}
			return inner(tx)
		}
	}
	var err error
	for try := 0; try < maxTxRetries; try++ {
		err = s.db.WithContext(ctx).Transaction(fn, opts) // nil: the connection's default
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		// Back off a little, jittered: two transactions that deadlocked and
		// retry at once tend to deadlock again (seen on MariaDB while
		// retention deletes in batches beside the engine's updates).
		wait := time.Duration(mrand.Int64N(int64(5*time.Millisecond) << try)) //nolint:gosec // G404: jitter, not a secret
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
	return err
}

// retryable reports whether err is a conflict that a retry of the whole
// transaction resolves.
func retryable(err error) bool {
	var my *gomysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1213 || my.Number == 1205 // deadlock, lock wait timeout
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "40P01" || pg.Code == "40001" // deadlock, serialization failure
	}
	code, _, ok := sqliteCodes(err)
	return ok && code&0xff == sqliteBusy // "database is locked", and its extended codes
}

// Result codes of SQLite (https://www.sqlite.org/rescode.html).
const (
	sqliteBusy                 = 5
	sqliteConstraintPrimaryKey = 1555
	sqliteConstraintUnique     = 2067
)

// sqliteCodes returns the result code and the extended result code of the
// github.com/mattn/go-sqlite3 Error in err's chain; ok is false when there
// is none. The store does not import that package: it is cgo and compiles
// SQLite itself, which users of MySQL or PostgreSQL should not have to
// build. So, as gorm's sqlite dialector does in its Translate, it reads the
// Error's exported fields, finding it by its type's package and name.
func sqliteCodes(err error) (code, extended int, ok bool) {
	for err != nil {
		v := reflect.ValueOf(err)
		if v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if t := v.Type(); t.PkgPath() == "github.com/mattn/go-sqlite3" && t.Name() == "Error" && v.Kind() == reflect.Struct {
			c, e := v.FieldByName("Code"), v.FieldByName("ExtendedCode")
			if c.CanInt() && e.CanInt() {
				return int(c.Int()), int(e.Int()), true
			}
		}
		if many, isJoin := err.(interface{ Unwrap() []error }); isJoin {
			for _, e := range many.Unwrap() {
				if code, extended, ok := sqliteCodes(e); ok {
					return code, extended, true
				}
			}
			return 0, 0, false
		}
		err = errors.Unwrap(err)
	}
	return 0, 0, false
}

// onConflictDoNothing is INSERT ... ON CONFLICT DO NOTHING on every backend.
//
// GORM renders clause.OnConflict{DoNothing: true} on MySQL/MariaDB as
// ON DUPLICATE KEY UPDATE id = id. Writing the AUTO_INCREMENT column, even
// to itself, upsets InnoDB's auto-increment counter when multi-row inserts
// run concurrently: a later row of the batch can be given an id another
// transaction already used, "conflict" on the primary key, and vanish
// without an error (the concurrent InsertFires test lost rows in some of
// its runs). Assigning a plain column to itself instead is a true no-op.
func onConflictDoNothing(tx *gorm.DB, plainColumn string) clause.Expression {
	if tx.Dialector.Name() == "mysql" {
		col := clause.Column{Name: plainColumn}
		return clause.OnConflict{DoUpdates: []clause.Assignment{{Column: col, Value: col}}}
	}
	return clause.OnConflict{DoNothing: true}
}

// nonce returns 32 random hex digits for Execution.Claim.
func nonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store: claim nonce: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// cleanText makes s storable in a TEXT column of every backend: invalid
// UTF-8 becomes U+FFFD, NUL bytes (which PostgreSQL refuses) are dropped,
// and the result is cut to MaxTextBytes at a rune boundary.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= MaxTextBytes {
		return s
	}
	cut := MaxTextBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// takeOne reads into dest the first row q finds, and reports whether there
// was one. A row that is not there is an answer here, not an error: GORM's
// Take would return ErrRecordNotFound, which the application's GORM logger
// writes as an error line ("record not found") in the service's log each
// time, although nothing went wrong.
func takeOne(q *gorm.DB, dest any) (found bool, err error) {
	res := q.Limit(1).Find(dest)
	return res.RowsAffected > 0, res.Error
}

// notFound wraps ErrNotFound with what was looked for.
func notFound(format string, args ...any) error {
	return fmt.Errorf("store: "+format+": %w", append(args, ErrNotFound)...)
}
