package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Override is a console edit of a task's schedule. An empty field leaves the
// code-defined value in force. The caller validates the spec; the store
// stores what it is given.
type Override struct {
	Spec     string
	Dialect  string
	TimeZone string
}

// UpsertTask records the definition of t as the code registered it: it
// inserts the row (status active unless t.Status says paused, version 1),
// or updates only the code-defined columns of the existing row: name,
// description, owner, kind, spec, dialect, time_zone, timeout, retry,
// misfire, overlap, end_at, max_runs and http_target. Status and the
// override columns belong to operators and are never written here, so a
// redeploy does not resume a paused task. Version grows only when something
// changed. It returns the row as stored.
func (s *Store) UpsertTask(ctx context.Context, t *Task) (Task, error) {
	rows, err := s.UpsertTasks(ctx, []*Task{t}) // one implementation of the rules, for one or many
	if err != nil {
		return Task{}, err
	}
	return rows[0], nil
}

// validTask checks what the schema needs; the root package checks the rest
// (code syntax, spec, policies) before calling.
func validTask(t *Task) error {
	switch {
	case t.App == "" || len(t.App) > 64:
		return fmt.Errorf("store: task app %q: want 1 to 64 bytes", t.App)
	case t.Code == "" || len(t.Code) > 128:
		return fmt.Errorf("store: task code %q: want 1 to 128 bytes", t.Code)
	case t.Spec == "" || len(t.Spec) > 255:
		return fmt.Errorf("store: task %q spec %q: want 1 to 255 bytes", t.Code, t.Spec)
	case t.Kind != "" && t.Kind != KindFunc && t.Kind != KindHTTP:
		return fmt.Errorf("store: task %q kind %q: want %q or %q", t.Code, t.Kind, KindFunc, KindHTTP)
	case t.Status != "" && t.Status != TaskActive && t.Status != TaskPaused:
		return fmt.Errorf("store: task %q status %q: want %q or %q", t.Code, t.Status, TaskActive, TaskPaused)
	case t.MaxAttempts < 0:
		return fmt.Errorf("store: task %q max_attempts %d: want 0 (meaning 1) or more", t.Code, t.MaxAttempts)
	}
	return nil
}

// taskDef is the code-defined part of a task, with the defaults the schema
// applies to zero values, comparable with ==. Comparing a million tasks
// at Start through definition's maps (three per task) cost a replica far
// more CPU than comparing these values.
type taskDef struct {
	name string
	Definition
}

func defOf(t *Task) taskDef {
	d := taskDef{name: t.Name, Definition: Definition{
		Description: t.Description, Owner: t.Owner, Kind: t.Kind,
		Spec: t.Spec, Dialect: t.Dialect, TimeZone: t.TimeZone,
		TimeoutMs: t.TimeoutMs, MaxAttempts: t.MaxAttempts,
		BackoffBaseMs: t.BackoffBaseMs, BackoffMaxMs: t.BackoffMaxMs,
		Misfire: t.Misfire, MisfireWindowMs: t.MisfireWindowMs, Overlap: t.Overlap,
		EndAtMs: t.EndAtMs, MaxRuns: t.MaxRuns,
		JitterMs: t.JitterMs, PauseAfter: t.PauseAfter, ExcludeDays: t.ExcludeDays, Calendar: t.Calendar,
		Shards: t.Shards, Broadcast: t.Broadcast, Params: string(t.Params),
	}.withDefaults()}
	if t.HTTPTarget != nil {
		d.HTTPTarget, d.HasHTTPTarget = *t.HTTPTarget, true
	}
	return d
}

// definition returns the code-defined columns of t, with the defaults the
// schema applies to zero values (defOf), for an UPDATE.
func definition(t *Task) map[string]any {
	d := defOf(t)
	return map[string]any{
		"name": d.name, "description": d.Description, "owner": d.Owner, "kind": d.Kind,
		"spec": d.Spec, "dialect": d.Dialect, "time_zone": d.TimeZone,
		"timeout_ms": d.TimeoutMs, "max_attempts": d.MaxAttempts,
		"backoff_base_ms": d.BackoffBaseMs, "backoff_max_ms": d.BackoffMaxMs,
		"misfire": d.Misfire, "misfire_window_ms": d.MisfireWindowMs, "overlap": d.Overlap,
		"end_at_ms": d.EndAtMs, "max_runs": d.MaxRuns,
		"jitter_ms": d.JitterMs, "pause_after": d.PauseAfter, "exclude_days": d.ExcludeDays, "calendar": d.Calendar,
		"shards": d.Shards, "broadcast": d.Broadcast, "params": t.Params, "http_target": t.HTTPTarget,
	}
}

// Tasks returns every task of app, ordered by code.
func (s *Store) Tasks(ctx context.Context, app string) ([]Task, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var tasks []Task
	if err := s.db.WithContext(ctx).Where("app = ?", app).Order("code").Find(&tasks).Error; err != nil {
		return nil, fmt.Errorf("store: list tasks of app %q: %w", app, err)
	}
	return tasks, nil
}

// TaskHead is the part of a stored task that its code does not define:
// what a replica that registered the task needs of its row, besides the
// definition it registered itself.
type TaskHead struct {
	ID                   int64
	Code, Kind, Status   string
	Version              int64
	CreatedMs, UpdatedMs int64
	// The console's overrides, nil when not set (Task.SpecOverride...).
	SpecOverride, DialectOverride, TZOverride *string
	// OptionOverrides are SetTaskOptions' JSON, "" when none
	// (Task.OptionOverrides).
	OptionOverrides OverridesJSON
}

// headsQuery reads what TaskHead holds, in decodeHead's order.
const headsQuery = `SELECT id, code, kind, status, version, created_ms, updated_ms,
	spec_override, dialect_override, tz_override, option_overrides FROM xtimer_tasks WHERE app = ?`

// TaskHeads calls each with the head of every task of app, in no order,
// reading eleven columns a row instead of Task's thirty-four: a replica of a
// million tasks loads its view with it at Start. intern, when not nil,
// makes Code from the code's bytes, which are valid during the call only:
// a caller that holds the codes already (it registered them) returns its
// own string and keeps none per row. Kind and Status are the package's
// constants when they have their values. An error from each ends the
// read.
//
// On PostgreSQL through pgx it reads the rows' binary values as they come
// off the wire, without database/sql's conversions, which make a million
// rows cost a replica more CPU (bench/README.md's performance report has the
// figures).
func (s *Store) TaskHeads(ctx context.Context, app string, intern func(code []byte) string, each func(TaskHead) error) error {
	return s.taskHeads(ctx, app, headsQuery, intern, each)
}

// uniformRow is the condition of a row that is as a deferred registration
// wrote it at createdMs (WriteDeferred): a Go task, active, version 1,
// created and updated at createdMs, with no override. Every writer that
// changes a row after that bumps its version. The instant is a literal,
// an integer written here.
func uniformRow(createdMs int64) string {
	at := strconv.FormatInt(createdMs, 10)
	return "kind = '" + KindFunc + "' AND status = '" + TaskActive + "' AND version = 1 AND created_ms = " + at +
		" AND updated_ms = " + at + " AND spec_override IS NULL AND dialect_override IS NULL AND tz_override IS NULL" +
		" AND (option_overrides IS NULL OR option_overrides = '')"
}

// TaskHeadsBut is TaskHeads for a replica whose registration has
// Registration.UniformMs: it calls each with the heads of only the rows
// that are not as the deferred registration at uniformMs wrote them (the
// rows changed since, and the rows of other tasks). The caller, which
// registered those tasks, knows what each other row holds but for its ID,
// once CountTasks has counted them with the rest: a restart of a replica
// of a million tasks that nobody changed reads no head. A write between
// the two moves the task generation, which the caller checks after both.
func (s *Store) TaskHeadsBut(ctx context.Context, app string, uniformMs int64, intern func(code []byte) string, each func(TaskHead) error) error {
	if uniformMs == 0 {
		return fmt.Errorf("store: read the changed tasks of app %q: no uniform registration", app)
	}
	return s.taskHeads(ctx, app, headsQuery+" AND NOT ("+uniformRow(uniformMs)+")", intern, each)
}

// CountTasks counts the rows of app. Its condition is on the app alone,
// the second column: PostgreSQL's scan of the table does not take apart
// the rest of each row, as a condition on a later column (TaskHeadsBut's)
// makes it, and MySQL counts the entries of the (app, code) index.
func (s *Store) CountTasks(ctx context.Context, app string) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var n int64
	if err := s.db.WithContext(ctx).Model(&Task{}).Where("app = ?", app).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("store: count the tasks of app %q: %w", app, err)
	}
	return n, nil
}

// taskHeads is TaskHeads with query, headsQuery or headsQuery with more
// conditions.
func (s *Store) taskHeads(ctx context.Context, app, query string, intern func(code []byte) string, each func(TaskHead) error) error {
	if intern == nil {
		intern = func(code []byte) string { return string(code) }
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if s.db.Dialector.Name() == "postgres" {
		if done, err := s.pgTaskHeads(ctx, app, query, intern, each); done {
			return err
		}
	}
	rows, err := s.db.WithContext(ctx).Statement.ConnPool.QueryContext(ctx, rebind(s.db, query), app)
	if err != nil {
		return fmt.Errorf("store: read the tasks of app %q: %w", app, err)
	}
	defer rows.Close()
	var h TaskHead
	var code, kind, status sql.RawBytes
	var spec, dialect, zone, options sql.NullString
	// One list of destinations for every row, not one made per row.
	dest := []any{&h.ID, &code, &kind, &status, &h.Version, &h.CreatedMs, &h.UpdatedMs, &spec, &dialect, &zone, &options}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("store: read the tasks of app %q: %w", app, err)
		}
		h.Code, h.Kind, h.Status = intern(code), canonical(kind, KindFunc, KindHTTP), canonical(status, TaskActive, TaskPaused)
		h.SpecOverride, h.DialectOverride, h.TZOverride = nullableOf(spec), nullableOf(dialect), nullableOf(zone)
		h.OptionOverrides = OverridesJSON(options.String)
		if err := each(h); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: read the tasks of app %q: %w", app, err)
	}
	return nil
}

// pgTaskHeads is TaskHeads on a pgx connection, if the database is one;
// done is false when it is not (another driver).
func (s *Store) pgTaskHeads(ctx context.Context, app, query string, intern func([]byte) string, each func(TaskHead) error) (done bool, err error) {
	sqlDB, err := s.db.DB()
	if err != nil {
		return false, nil // not a *sql.DB underneath: the generic path
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return true, fmt.Errorf("store: read the tasks of app %q: %w", app, err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return nil
		}
		done = true
		binary := pgx.QueryResultFormats{pgx.BinaryFormatCode}
		rows, queryErr := pc.Conn().Query(ctx, rebind(s.db, query), binary, app)
		if queryErr != nil {
			return queryErr
		}
		defer rows.Close()
		var h TaskHead
		for rows.Next() {
			v := rows.RawValues()
			if len(v) != 11 {
				return fmt.Errorf("%d columns", len(v))
			}
			for _, i := range []int{0, 1, 2, 3, 4, 5, 6} {
				if v[i] == nil || (i == 0 || i >= 4) && len(v[i]) != 8 {
					return fmt.Errorf("column %d: %d bytes", i, len(v[i]))
				}
			}
			// The bits of int8 columns in PostgreSQL's binary format.
			h.ID, h.Version = int64(binaryBE(v[0])), int64(binaryBE(v[4]))          //nolint:gosec // G115: see above
			h.CreatedMs, h.UpdatedMs = int64(binaryBE(v[5])), int64(binaryBE(v[6])) //nolint:gosec // G115: see above
			h.Code, h.Kind, h.Status = intern(v[1]), canonical(v[2], KindFunc, KindHTTP), canonical(v[3], TaskActive, TaskPaused)
			h.SpecOverride, h.DialectOverride, h.TZOverride = rawNullable(v[7]), rawNullable(v[8]), rawNullable(v[9])
			h.OptionOverrides = OverridesJSON(v[10]) // NULL: nil, ""
			if eachErr := each(h); eachErr != nil {
				return errFromEach{eachErr}
			}
		}
		return rows.Err()
	})
	var fromEach errFromEach
	switch {
	case errors.As(err, &fromEach):
		return true, fromEach.err
	case err != nil:
		return true, fmt.Errorf("store: read the tasks of app %q: %w", app, err)
	}
	return done, nil
}

// errFromEach carries an error of TaskHeads' caller through conn.Raw.
type errFromEach struct{ err error }

func (e errFromEach) Error() string { return e.err.Error() }

func binaryBE(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// rawNullable is a nullable text column's raw value as a *string.
func rawNullable(b []byte) *string {
	if b == nil {
		return nil
	}
	v := string(b)
	return &v
}

// canonical returns the one of values equal to b, or b as a new string.
func canonical(b []byte, values ...string) string {
	for _, v := range values {
		if string(b) == v {
			return v
		}
	}
	return string(b)
}

func nullableOf(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}

// TasksByCode returns the tasks of app with the given codes that exist,
// in no order.
func (s *Store) TasksByCode(ctx context.Context, app string, codes []string) ([]Task, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []Task
	for from := 0; from < len(codes); from += insertChunk {
		var found []Task
		err := s.db.WithContext(ctx).Where("app = ? AND code IN ?", app, codes[from:min(from+insertChunk, len(codes))]).Find(&found).Error
		if err != nil {
			return nil, fmt.Errorf("store: read %d tasks of app %q: %w", len(codes), app, err)
		}
		out = append(out, found...)
	}
	return out, nil
}

// Task returns one task, or an error wrapping ErrNotFound.
func (s *Store) Task(ctx context.Context, app, code string) (Task, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	return readTask(s.db.WithContext(ctx), app, code)
}

// readTask is Task on db, which may be a transaction.
func readTask(db *gorm.DB, app, code string) (Task, error) {
	var t Task
	found, err := takeOne(db.Where("app = ? AND code = ?", app, code), &t)
	if err != nil {
		return Task{}, fmt.Errorf("store: read task %q: %w", code, err)
	}
	if !found {
		return Task{}, notFound("task %q of app %q", code, app)
	}
	return t, nil
}

// TaskGen returns the generation of app's tasks (AppState.TaskGen): 0 for
// an app none of whose tasks was ever written, and more after every
// committed change to them. Replicas read it every second and run
// TaskVersions only when it moved.
func (s *Store) TaskGen(ctx context.Context, app string) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var gen []int64
	err := s.db.WithContext(ctx).Model(&AppState{}).Where("app = ?", app).Limit(1).Pluck("task_gen", &gen).Error
	if err != nil {
		return 0, fmt.Errorf("store: read task generation of app %q: %w", app, err)
	}
	if len(gen) == 0 {
		return 0, nil
	}
	return gen[0], nil
}

// bumpTaskGen adds one to app's task generation, creating its row at 1,
// in one statement. Every write to xtimer_tasks calls it in the write's
// transaction, last: the app's row serializes the app's writers, so the
// transaction holds its lock only from the bump to the commit, and
// writers, which all lock their task rows before the app's row, do not
// wait on each other in a cycle. (Two first bumps of an app on MySQL may
// still deadlock on the new key; s.tx retries them.)
func bumpTaskGen(tx *gorm.DB, app string) error {
	// The table-qualified column is the row's current value on every
	// backend: MySQL's ON DUPLICATE KEY UPDATE, PostgreSQL's and SQLite's
	// ON CONFLICT DO UPDATE.
	err := tx.Model(&AppState{}).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "app"}},
		DoUpdates: clause.Assignments(map[string]any{"task_gen": gorm.Expr("xtimer_apps.task_gen + 1")}),
	}).Create(map[string]any{"app": app, "task_gen": 1}).Error
	if err != nil {
		return fmt.Errorf("store: bump task generation of app %q: %w", app, err)
	}
	return nil
}

// TaskVersions returns the version of every task of app, by code: the
// query that tells which tasks changed. It reads every task of the app, so
// replicas run it only when TaskGen moved, to spot the pauses, resumes and
// overrides made anywhere in the fleet.
func (s *Store) TaskVersions(ctx context.Context, app string) (map[string]int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var rows []struct {
		Code    string
		Version int64
	}
	err := s.db.WithContext(ctx).Model(&Task{}).Select("code", "version").Where("app = ?", app).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: read task versions of app %q: %w", app, err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Code] = r.Version
	}
	return out, nil
}

// TaskSums sums up the tasks of an app: how many, and the sums of their
// creation instants (CreatedTerm of each created_ms) and of their
// versions. A task inserted, deleted (or deleted and inserted again,
// later), or changed by any writer that bumps its version, as every
// writer of this package does, changes them. The creation instants stand
// for the rows' IDs, which a replica running a deferred registration
// does not know (register_deferred.go).
type TaskSums struct {
	Count, Created, Versions int64
}

// CreatedTerm is a task's created_ms as TaskSums adds it up: its low 32
// bits, so that the sum of two billion of them stays within an int64.
func CreatedTerm(createdMs int64) int64 { return createdMs & (1<<32 - 1) }

// TaskSums returns the sums of app's tasks, computed by the database: the
// check of a replica's view of the tasks that costs it one row, where
// TaskVersions costs it a row per task.
func (s *Store) TaskSums(ctx context.Context, app string) (TaskSums, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	sum := "COALESCE(SUM(%s), 0)"
	switch s.db.Dialector.Name() {
	case "postgres": // SUM of bigint is numeric there
		sum = "CAST(COALESCE(SUM(%s), 0) AS BIGINT)"
	case "mysql": // and DECIMAL here
		sum = "CAST(COALESCE(SUM(%s), 0) AS SIGNED)"
	}
	var out TaskSums
	err := s.db.WithContext(ctx).Raw("SELECT COUNT(*) AS count, "+fmt.Sprintf(sum, "created_ms % 4294967296")+" AS created, "+fmt.Sprintf(sum, "version")+
		" AS versions FROM xtimer_tasks WHERE app = ?", app).Scan(&out).Error
	if err != nil {
		return TaskSums{}, fmt.Errorf("store: sum the tasks of app %q: %w", app, err)
	}
	return out, nil
}

// SetTaskStatus sets a task active or paused, bumps its version, and bumps
// the app's task generation (TaskGen).
func (s *Store) SetTaskStatus(ctx context.Context, app, code, status string) error {
	if status != TaskActive && status != TaskPaused {
		return fmt.Errorf("store: task %q status %q: want %q or %q", code, status, TaskActive, TaskPaused)
	}
	return s.updateTask(ctx, "set status of", app, code, map[string]any{"status": status})
}

// SetOverride stores a console edit of a task's schedule; it wins over the
// code-defined values until ResetOverride. It bumps the version and the
// app's task generation (TaskGen).
func (s *Store) SetOverride(ctx context.Context, app, code string, o Override) error {
	if o == (Override{}) {
		return fmt.Errorf("store: override of task %q: every field is empty; use ResetOverride", code)
	}
	if len(o.Spec) > 255 || len(o.Dialect) > 16 || len(o.TimeZone) > 64 {
		return fmt.Errorf("store: override of task %q: spec %q, dialect %q or time zone %q too long", code, o.Spec, o.Dialect, o.TimeZone)
	}
	return s.updateTask(ctx, "override", app, code, map[string]any{
		"spec_override":    nullable(o.Spec),
		"dialect_override": nullable(o.Dialect),
		"tz_override":      nullable(o.TimeZone),
	})
}

// ResetOverride drops a task's console edits, so the code-defined schedule
// applies again. It bumps the version and the app's task generation
// (TaskGen).
func (s *Store) ResetOverride(ctx context.Context, app, code string) error {
	return s.updateTask(ctx, "reset override of", app, code, map[string]any{
		"spec_override": nil, "dialect_override": nil, "tz_override": nil,
	})
}

// updateTask applies set to one task, bumping version, updated_ms and the
// app's task generation.
func (s *Store) updateTask(ctx context.Context, what, app, code string, set map[string]any) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	set["version"] = gorm.Expr("version + 1")
	set["updated_ms"] = s.nowMs()
	return s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Task{}).Where("app = ? AND code = ?", app, code).Updates(set)
		if res.Error != nil {
			return fmt.Errorf("store: %s task %q: %w", what, code, res.Error)
		}
		if res.RowsAffected == 0 {
			return notFound("%s task %q of app %q", what, code, app)
		}
		return bumpTaskGen(tx, app)
	})
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Errors of the calls that create, replace and delete tasks at runtime.
var (
	// ErrExists: a task with that code exists already in the app.
	ErrExists = errors.New("store: task exists")
	// ErrStale: the row changed since it was read; read it again.
	ErrStale = errors.New("store: task changed since read")
)

// CreateTask inserts a task that code does not register (kind http):
// version 1, active unless t.Status says paused, no overrides. A task of
// the same app and code, of any kind, fails it with an error wrapping
// ErrExists, and nothing is written. It bumps the app's task generation
// (TaskGen). It returns the row as stored.
func (s *Store) CreateTask(ctx context.Context, t *Task) (Task, error) {
	if err := validTask(t); err != nil {
		return Task{}, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	now := s.nowMs()
	row := *t
	row.ID, row.Version, row.CreatedMs, row.UpdatedMs = 0, 1, now, now
	row.SpecOverride, row.DialectOverride, row.TZOverride, row.OptionOverrides = nil, nil, nil, ""
	if row.Status != TaskPaused {
		row.Status = TaskActive
	}
	def := defOf(&row) // the schema's defaults for zero values
	row.Kind, row.TimeZone, row.MaxAttempts = def.Kind, def.TimeZone, def.MaxAttempts
	var stored Task
	err := s.tx(ctx, func(tx *gorm.DB) error {
		// A plain INSERT: the unique key (app, code) refuses a taken code on
		// every backend, where ON CONFLICT's affected-row counts differ. Its
		// failure ends the transaction (PostgreSQL accepts no statement
		// after it), so nothing else runs before it.
		ins := row // Create writes the ID back; a retry starts from row
		if err := tx.Create(&ins).Error; err != nil {
			if duplicateKey(err) {
				return fmt.Errorf("store: create task %q of app %q: %w", t.Code, t.App, ErrExists)
			}
			return fmt.Errorf("store: create task %q: %w", t.Code, err)
		}
		var err error
		stored, err = readBumped(tx, t.App, t.Code)
		return err
	})
	if err != nil {
		return Task{}, err
	}
	return stored, nil
}

// readBumped reads the row of a task just written in tx and bumps the
// app's task generation.
func readBumped(tx *gorm.DB, app, code string) (Task, error) {
	t, err := readTask(tx, app, code)
	if err != nil {
		return Task{}, err
	}
	return t, bumpTaskGen(tx, app)
}

// duplicateKey reports whether err is a unique key violation.
func duplicateKey(err error) bool {
	var my *gomysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1062
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "23505"
	}
	if _, extended, ok := sqliteCodes(err); ok {
		return extended == sqliteConstraintUnique || extended == sqliteConstraintPrimaryKey
	}
	return errors.Is(err, gorm.ErrDuplicatedKey) // a DB opened with gorm.Config.TranslateError
}

// ReplaceTask writes t's definition (the columns UpsertTask writes) over
// the row of its app and code, clears the schedule and option overrides
// (the new definition sets them itself), bumps the version and the app's
// task generation (TaskGen). It keeps the status. It is conditional on the
// row still being of t's kind at version: a row changed since the caller
// read it fails with ErrStale, a missing one with ErrNotFound. It returns
// the row as stored.
func (s *Store) ReplaceTask(ctx context.Context, t *Task, version int64) (Task, error) {
	if err := validTask(t); err != nil {
		return Task{}, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	set := definition(t)
	set["spec_override"], set["dialect_override"], set["tz_override"], set["option_overrides"] = nil, nil, nil, nil
	set["version"] = version + 1
	set["updated_ms"] = s.nowMs()
	var stored Task
	err := s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Task{}).
			Where("app = ? AND code = ? AND kind = ? AND version = ?", t.App, t.Code, set["kind"], version).Updates(set)
		if res.Error != nil {
			return fmt.Errorf("store: replace task %q: %w", t.Code, res.Error)
		}
		if res.RowsAffected == 0 {
			if _, err := readTask(tx, t.App, t.Code); err != nil {
				return err
			}
			return fmt.Errorf("store: replace task %q of app %q at version %d: %w", t.Code, t.App, version, ErrStale)
		}
		var err error
		stored, err = readBumped(tx, t.App, t.Code)
		return err
	})
	if err != nil {
		return Task{}, err
	}
	return stored, nil
}

// DeleteTask deletes the task of app and code if it is of kind kind, and
// in the same transaction settles its fires that have not started
// (scheduled and not claimed, or waiting to retry) as skipped with reason.
// Execution rows stay: history outlives the task. A missing task, or one
// of another kind, fails it with an error wrapping ErrNotFound. A deletion
// bumps the app's task generation (TaskGen).
func (s *Store) DeleteTask(ctx context.Context, app, code, kind, reason string) error {
	if reason == "" || len(reason) > 64 {
		return fmt.Errorf("store: delete task %q: reason %q: want 1 to 64 bytes", code, reason)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	return s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Where("app = ? AND code = ? AND kind = ?", app, code, kind).Delete(&Task{})
		if res.Error != nil {
			return fmt.Errorf("store: delete task %q: %w", code, res.Error)
		}
		if res.RowsAffected == 0 {
			return notFound("delete task %q of kind %s of app %q", code, kind, app)
		}
		now := s.nowMs()
		res = tx.Model(&Execution{}).
			Where("app = ? AND task_code = ? AND (status = ? AND started_ms = 0 OR status = ?)", app, code, StatusScheduled, StatusRetrying).
			UpdateColumns(map[string]any{"status": StatusSkipped, "reason": reason, "finished_ms": now, "next_attempt_ms": 0, "updated_ms": now})
		if res.Error != nil {
			return fmt.Errorf("store: skip the fires of deleted task %q: %w", code, res.Error)
		}
		return bumpTaskGen(tx, app)
	})
}
