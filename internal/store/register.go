package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// This file is how the tasks a replica's code registers reach
// xtimer_tasks: RegisterTasks at Start (a million tasks, three replicas
// at once), UpsertTasks and UpsertTask on top of it.
//
// A registration locks the app's row of xtimer_apps first, so the
// replicas of an app register one at a time: the first to start writes
// the rows, the others wait for its commit and then find nothing to do.
// Before that lock, three replicas inserting the same million rows at once
// waited on one another's unique-key entries, each inserting and reading
// back every row through GORM: two minutes for a million tasks.
//
// The app's row also keeps a digest of the last registration's tasks
// (every code and definition) and the task generation it left. A replica
// that registers the same tasks while the generation has not moved since
// (no task was written by anyone) needs no row at all: the rows are as
// that registration left them. Any other registration reads the app's
// rows and writes what differs. Bulk statements are plain SQL, not GORM:
// reflection over a million rows cost more than the database did.

// Definition is the part of a task's code-defined columns that tasks
// share: everything but the code and the name (which defaults to the
// code). It is comparable, so that a caller registering a million tasks
// with a handful of option sets passes a handful of Definitions, and the
// store inserts each set with one statement per chunk of codes. Zero
// values take the schema's defaults (kind func, time zone UTC, one
// attempt), as in Task.
type Definition struct {
	Description, Owner, Kind, Spec, Dialect, TimeZone string
	TimeoutMs                                         int64
	MaxAttempts                                       int
	BackoffBaseMs, BackoffMaxMs                       int64
	Misfire                                           string
	MisfireWindowMs                                   int64
	Overlap                                           string
	EndAtMs, MaxRuns                                  int64
	JitterMs                                          int64
	PauseAfter                                        int
	// Shards is how many shards each fire has (0: none); Broadcast makes
	// each fire one shard per live replica that runs the task.
	Shards                int
	Broadcast             bool
	ExcludeDays, Calendar string
	// Params is the JSON of WithParams; "" for none (a NULL column).
	Params string
	// HTTPTarget is the JSON description of a KindHTTP task's callback;
	// HasHTTPTarget tells an empty one from none (a NULL column).
	HTTPTarget    string
	HasHTTPTarget bool
}

// withDefaults applies the schema's defaults for zero values.
func (d Definition) withDefaults() Definition {
	if d.Kind == "" {
		d.Kind = KindFunc
	}
	if d.TimeZone == "" {
		d.TimeZone = "UTC"
	}
	if d.MaxAttempts == 0 {
		d.MaxAttempts = 1
	}
	return d
}

// TaskDef is one task as code registers it, for RegisterTasks. Def may
// be shared by any number of TaskDefs.
type TaskDef struct {
	Code string
	// Name is shown in the console; the root package defaults it to Code.
	Name string
	Def  *Definition
	// Paused inserts a new row paused instead of active. An existing row
	// keeps the status an operator gave it.
	Paused bool
}

// taskDef is the stored form of d, defaults applied.
func (d TaskDef) taskDef() taskDef {
	return taskDef{name: d.Name, Definition: d.Def.withDefaults()}
}

// Definition is the part of t's code-defined columns that tasks share,
// with the schema's defaults applied.
func (t Task) Definition() Definition { return defOf(&t).Definition }

// Head is t's TaskHead.
func (t Task) Head() TaskHead {
	return TaskHead{ID: t.ID, Code: t.Code, Kind: t.Kind, Status: t.Status, Version: t.Version, CreatedMs: t.CreatedMs,
		UpdatedMs: t.UpdatedMs, SpecOverride: t.SpecOverride, DialectOverride: t.DialectOverride, TZOverride: t.TZOverride,
		OptionOverrides: t.OptionOverrides}
}

// TaskFrom is the row of a task registered as d whose row has head h:
// what Tasks would read for it while the row holds d's definition.
// Head's Code is ignored for d's.
func TaskFrom(app string, d TaskDef, h TaskHead) Task {
	def := d.Def.withDefaults()
	t := Task{
		ID: h.ID, App: app, Code: d.Code, Name: d.Name, Description: def.Description, Owner: def.Owner,
		Kind: def.Kind, Spec: def.Spec, Dialect: def.Dialect, TimeZone: def.TimeZone, Status: h.Status,
		TimeoutMs: def.TimeoutMs, MaxAttempts: def.MaxAttempts, BackoffBaseMs: def.BackoffBaseMs, BackoffMaxMs: def.BackoffMaxMs,
		Misfire: def.Misfire, MisfireWindowMs: def.MisfireWindowMs, Overlap: def.Overlap, EndAtMs: def.EndAtMs, MaxRuns: def.MaxRuns,
		JitterMs: def.JitterMs, PauseAfter: def.PauseAfter, ExcludeDays: def.ExcludeDays, Calendar: def.Calendar,
		Shards: def.Shards, Broadcast: def.Broadcast,
		Params: Params(def.Params), SpecOverride: h.SpecOverride, DialectOverride: h.DialectOverride, TZOverride: h.TZOverride,
		OptionOverrides: h.OptionOverrides,
		CreatedMs:       h.CreatedMs, UpdatedMs: h.UpdatedMs, Version: h.Version,
	}
	if def.HasHTTPTarget {
		target := def.HTTPTarget
		t.HTTPTarget = &target
	}
	return t
}

// RegisterTasks records the definitions of an app's tasks as its code
// registers them, with UpsertTask's rules for each: a missing task is
// inserted (version 1, active unless Paused); an existing one gets only
// its code-defined columns written, and its version bumped, when they
// differ; status and the override columns are never written; a code
// taken by a task of another kind fails the call with ErrExists. defs
// may come in any order, each code once; the call sorts them (in place)
// only when it has rows to read.
//
// It is one transaction behind the app's lock (see the top of this
// file), so an error means nothing was written. It returns the app's task
// generation as of its commit (TaskGen): a reader that finds the same
// generation later knows that the rows of defs still hold these
// definitions.
func (s *Store) RegisterTasks(ctx context.Context, app string, defs []TaskDef) (int64, error) {
	reg, err := s.register(ctx, app, defs, regFull, 0)
	return reg.Gen, err
}

// ReregisterTasks is RegisterTasks without the digest's shortcut: it
// reads the app's rows and writes what differs even when the last
// registration named the same tasks. A replica calls it when it finds a
// task it registered missing from the table (a row deleted by hand, which
// no task generation records).
func (s *Store) ReregisterTasks(ctx context.Context, app string, defs []TaskDef) (int64, error) {
	reg, err := s.register(ctx, app, defs, regForce, 0)
	return reg.Gen, err
}

// How register treats the app's digest.
type regMode int

const (
	// regFull: defs are every task the caller's code registers; they
	// skip the rows when the digest matches, and leave theirs.
	regFull regMode = iota
	// regForce: regFull without the skip.
	regForce
	// regPartial: some tasks (a Register after Start, UpsertTasks);
	// never skipped, and the digest of the full set stays: if this wrote
	// nothing, the rows are still as the full registration left them; if
	// it wrote, the generation moved past the digest's. A deferred
	// registration still being written stays so.
	regPartial
	// regDefer: regFull that may leave the rows to be written later
	// (BeginRegistration, register_deferred.go).
	regDefer
)

// register is RegisterTasks in mode; with regDefer, a registration of
// deferFrom tasks or more into an app without tasks is deferred.
func (s *Store) register(ctx context.Context, app string, defs []TaskDef, mode regMode, deferFrom int) (Registration, error) {
	if len(app) == 0 || len(app) > 64 {
		return Registration{}, fmt.Errorf("store: register tasks: app %q: want 1 to 64 bytes", app)
	}
	for i := range defs {
		if err := validDef(defs[i]); err != nil {
			return Registration{}, err
		}
	}
	digest := ""
	if mode != regPartial {
		digest = digestOf(defs)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var reg Registration
	var err error
	// A plain INSERT refuses a code that a CreateTask running beside this
	// call inserted after its read (CreateTask does not take the app's
	// lock): the next try reads the row, and refuses it or keeps it.
	for try := 0; try < 3; try++ {
		err = s.rowTx(ctx, func(tx *gorm.DB) error {
			var txErr error
			reg, txErr = s.registerTx(ctx, tx, app, defs, digest, mode, deferFrom)
			return txErr
		})
		if err == nil || !duplicateKey(err) {
			break
		}
	}
	if err != nil {
		return Registration{}, err
	}
	return reg, nil
}

// validDef checks what the schema needs of one TaskDef.
func validDef(d TaskDef) error {
	switch {
	case d.Def == nil:
		return fmt.Errorf("store: task %q: definition is nil", d.Code)
	case d.Code == "" || len(d.Code) > 128:
		return fmt.Errorf("store: task code %q: want 1 to 128 bytes", d.Code)
	case len(d.Name) > 255:
		return fmt.Errorf("store: task %q name of %d bytes: want at most 255", d.Code, len(d.Name))
	case d.Def.Spec == "" || len(d.Def.Spec) > 255:
		return fmt.Errorf("store: task %q spec %q: want 1 to 255 bytes", d.Code, d.Def.Spec)
	case d.Def.Kind != "" && d.Def.Kind != KindFunc && d.Def.Kind != KindHTTP:
		return fmt.Errorf("store: task %q kind %q: want %q or %q", d.Code, d.Def.Kind, KindFunc, KindHTTP)
	case d.Def.MaxAttempts < 0:
		return fmt.Errorf("store: task %q max_attempts %d: want 0 (meaning 1) or more", d.Code, d.Def.MaxAttempts)
	}
	return nil
}

// digestOf digests the codes, names and definitions (defaults applied) of
// defs, whatever their order, so that a replica that finds its digest
// stored need not sort a million tasks: each task's SHA-256 is added into
// a 256-bit sum (four 64-bit lanes, wrapping), a multiset hash. Paused is
// left out: it matters only for rows not yet inserted, and the digest is
// compared only when every row exists. A set with a code twice never gets
// its digest stored (sortDefs refuses it first), so two sets that differ
// that way do not meet here.
//
// The sum is split over the CPUs for a large registration: a replica
// restarting with a million tasks hashes them while the others idle.
func digestOf(defs []TaskDef) string {
	parts := 1
	if len(defs) >= digestSplitFrom {
		parts = min(runtime.GOMAXPROCS(0), 4)
	}
	sums := make([][4]uint64, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { sums[p] = digestSum(defs[p*len(defs)/parts : (p+1)*len(defs)/parts]) })
	}
	wg.Wait()
	var sum [4]uint64
	for _, part := range sums {
		for i := range sum {
			sum[i] += part[i]
		}
	}
	var out [32]byte
	for i, lane := range sum {
		binary.BigEndian.PutUint64(out[8*i:], lane)
	}
	return hex.EncodeToString(out[:])
}

// digestSplitFrom is how many tasks digestOf hashes on one CPU at most.
const digestSplitFrom = 100_000

// digestSum is the four lanes of digestOf's sum over defs.
func digestSum(defs []TaskDef) [4]uint64 {
	perDef := map[*Definition][sha256.Size]byte{} // a million tasks, a few definitions
	var sum [4]uint64
	var buf []byte
	for _, d := range defs {
		dsum, ok := perDef[d.Def]
		if !ok {
			buf = encodeDefinition(buf[:0], d.Def.withDefaults())
			dsum = sha256.Sum256(buf)
			perDef[d.Def] = dsum
		}
		buf = appendField(buf[:0], d.Code)
		buf = appendField(buf, d.Name)
		buf = append(buf, dsum[:]...)
		h := sha256.Sum256(buf)
		for i := range sum {
			sum[i] += binary.BigEndian.Uint64(h[8*i:])
		}
	}
	return sum
}

// sortDefs sorts defs by code and refuses a code given twice.
func sortDefs(defs []TaskDef) error {
	if !slices.IsSortedFunc(defs, compareDefs) {
		slices.SortFunc(defs, compareDefs)
	}
	for i := 1; i < len(defs); i++ {
		if defs[i].Code == defs[i-1].Code {
			return fmt.Errorf("store: register tasks: code %q given twice", defs[i].Code)
		}
	}
	return nil
}

func compareDefs(a, b TaskDef) int { return strings.Compare(a.Code, b.Code) }

// encodeDefinition appends every field of d, length-prefixed, so that no
// two definitions encode alike.
func encodeDefinition(buf []byte, d Definition) []byte {
	for _, f := range []string{d.Description, d.Owner, d.Kind, d.Spec, d.Dialect, d.TimeZone, d.Misfire, d.Overlap, d.HTTPTarget, d.ExcludeDays, d.Calendar, d.Params} {
		buf = appendField(buf, f)
	}
	for _, n := range []int64{d.TimeoutMs, int64(d.MaxAttempts), d.BackoffBaseMs, d.BackoffMaxMs, d.MisfireWindowMs, d.EndAtMs, d.MaxRuns, d.JitterMs, int64(d.PauseAfter), int64(d.Shards)} {
		buf = binary.BigEndian.AppendUint64(buf, uint64(n)) //nolint:gosec // G115: the bits of n, encoded for the digest
	}
	flags := byte(0)
	if d.HasHTTPTarget {
		flags |= 1
	}
	if d.Broadcast {
		flags |= 2
	}
	return append(buf, flags)
}

func appendField(buf []byte, s string) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(s))) //nolint:gosec // G115: a length prefix for the digest; columns are far shorter than 4 GiB
	return append(buf, s...)
}

// lockApp creates the app's row of xtimer_apps if it is missing and locks
// it until the end of tx, returning it.
func lockApp(tx *gorm.DB, app string) (AppState, error) {
	if err := tx.Clauses(onConflictDoNothing(tx, "task_gen")).Create(&AppState{App: app}).Error; err != nil {
		return AppState{}, fmt.Errorf("store: create the row of app %q: %w", app, err)
	}
	var st AppState
	// FOR UPDATE is ignored by SQLite, whose writers are serialized: the
	// INSERT above made this transaction the writer.
	if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("app = ?", app).Take(&st).Error; err != nil {
		return AppState{}, fmt.Errorf("store: lock the row of app %q: %w", app, err)
	}
	return st, nil
}

// storedDef is what registerTx needs of an existing row.
type storedDef struct {
	id  int64
	def taskDef
}

func (s *Store) registerTx(ctx context.Context, tx *gorm.DB, app string, defs []TaskDef, digest string, mode regMode, deferFrom int) (Registration, error) {
	st, err := lockApp(tx, app)
	if err != nil {
		return Registration{}, err
	}
	full := mode == regFull || mode == regDefer
	var uniformMs int64
	if full && st.RegUniformMs != 0 && st.RegUniformDigest == digest && st.RegPendingMs == 0 {
		uniformMs = st.RegUniformMs
	}
	if full && st.RegDigest == digest && st.RegGen == st.TaskGen && st.RegPendingMs == 0 {
		return Registration{Gen: st.TaskGen, UniformMs: uniformMs}, nil // every row is as the last registration left it
	}
	if mode == regDefer {
		reg, deferred, deferErr := s.deferTx(ctx, tx, app, st, len(defs), digest, deferFrom)
		if deferErr != nil || deferred {
			return reg, deferErr
		}
	}
	gen, err := s.writeDefsTx(ctx, tx, app, st, defs, digest, mode)
	return Registration{Gen: gen, UniformMs: uniformMs}, err
}

// writeDefsTx writes the rows of defs that are missing or differ, as
// registerTx decided to, the app's row locked (st).
func (s *Store) writeDefsTx(ctx context.Context, tx *gorm.DB, app string, st AppState, defs []TaskDef, digest string, mode regMode) (int64, error) {
	err := sortDefs(defs)
	if err != nil {
		return 0, err
	}
	found := make([]bool, len(defs))
	var changed []int // indexes into defs of rows whose definition differs
	var changedIDs []int64
	err = readDefs(ctx, tx, app, defs, func(i int, row storedDef) error {
		found[i] = true
		want := defs[i].taskDef()
		if row.def.Kind != want.Kind {
			// An HTTP task created at runtime has the code: code must not
			// turn it into a Go task, nor the other way round.
			return fmt.Errorf("store: upsert task %q of kind %s: a task of kind %s has the code: %w", defs[i].Code, want.Kind, row.def.Kind, ErrExists)
		}
		if row.def != want {
			changed = append(changed, i)
			changedIDs = append(changedIDs, row.id)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var missing []int
	for i, ok := range found {
		if !ok {
			missing = append(missing, i)
		}
	}
	now := s.nowMs()
	if err = insertDefs(ctx, tx, app, defs, missing, now, false); err != nil {
		return 0, err
	}
	analyzeFresh(ctx, tx, "xtimer_tasks", &s.analyzedTasks, len(missing))
	if err = updateDefs(ctx, tx, defs, changed, changedIDs, now); err != nil {
		return 0, err
	}
	gen := st.TaskGen
	set := map[string]any{}
	if len(missing) > 0 || len(changed) > 0 {
		gen++ // the bump of bumpTaskGen: the row is locked already
		set["task_gen"] = gen
	}
	if mode != regPartial {
		// Every row of defs is written now: a deferred registration still
		// being written (of other tasks, or of these) has nothing left to
		// do, and its writers see that it was superseded.
		set["reg_digest"], set["reg_gen"], set["reg_pending_ms"], set["reg_written"] = digest, gen, 0, ""
	}
	if len(set) == 0 {
		return gen, nil
	}
	err = tx.Model(&AppState{}).Where("app = ?", app).UpdateColumns(set).Error
	if err != nil {
		return 0, fmt.Errorf("store: record the registration of app %q: %w", app, err)
	}
	return gen, nil
}

// Above this many tasks, readDefs reads every row of the app once rather
// than the rows of the codes, insertChunk codes a statement.
const scanAllAbove = 4 * insertChunk

// defColumns are the columns readDefs reads, in its Scan's order.
const defColumns = "id, code, kind, name, description, owner, spec, dialect, time_zone, timeout_ms, max_attempts, " +
	"backoff_base_ms, backoff_max_ms, misfire, misfire_window_ms, overlap, end_at_ms, max_runs, jitter_ms, pause_after, " +
	"shards, broadcast, exclude_days, calendar, params, http_target"

// readDefs calls found with the index in defs and the stored definition
// of every row of defs' codes that exists.
func readDefs(ctx context.Context, tx *gorm.DB, app string, defs []TaskDef, found func(i int, row storedDef) error) error {
	pool := tx.Statement.ConnPool
	each := func(rows *sql.Rows, index func(code string) (int, bool)) error {
		defer rows.Close()
		var row storedDef
		var code string
		var target sql.NullString
		var params Params
		d := &row.def
		for rows.Next() {
			if err := rows.Scan(&row.id, &code, &d.Kind, &d.name, &d.Description, &d.Owner, &d.Spec, &d.Dialect, &d.TimeZone,
				&d.TimeoutMs, &d.MaxAttempts, &d.BackoffBaseMs, &d.BackoffMaxMs, &d.Misfire, &d.MisfireWindowMs, &d.Overlap,
				&d.EndAtMs, &d.MaxRuns, &d.JitterMs, &d.PauseAfter, &d.Shards, &d.Broadcast, &d.ExcludeDays, &d.Calendar, &params, &target); err != nil {
				return fmt.Errorf("store: read the tasks of app %q: %w", app, err)
			}
			d.HTTPTarget, d.HasHTTPTarget = target.String, target.Valid
			d.Params = string(params)
			row.def.Definition = row.def.Definition.withDefaults()
			if i, ok := index(code); ok {
				if err := found(i, row); err != nil {
					return err
				}
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("store: read the tasks of app %q: %w", app, err)
		}
		return nil
	}
	if len(defs) > scanAllAbove {
		var byCode map[string]int // built at the first row: none in a new app
		rows, err := pool.QueryContext(ctx, rebind(tx, "SELECT "+defColumns+" FROM xtimer_tasks WHERE app = ?"), app)
		if err != nil {
			return fmt.Errorf("store: read the tasks of app %q: %w", app, err)
		}
		return each(rows, func(code string) (int, bool) {
			if byCode == nil {
				byCode = make(map[string]int, len(defs))
				for i, d := range defs {
					byCode[d.Code] = i
				}
			}
			i, ok := byCode[code]
			return i, ok
		})
	}
	for from := 0; from < len(defs); from += insertChunk {
		chunk := defs[from:min(from+insertChunk, len(defs))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, app)
		for _, d := range chunk {
			args = append(args, d.Code)
		}
		q := "SELECT " + defColumns + " FROM xtimer_tasks WHERE app = ? AND code IN (" + placeholders(len(chunk)) + ")"
		rows, err := pool.QueryContext(ctx, rebind(tx, q), args...)
		if err != nil {
			return fmt.Errorf("store: read %d tasks of app %q: %w", len(chunk), app, err)
		}
		err = each(rows, func(code string) (int, bool) {
			i, ok := slices.BinarySearchFunc(chunk, code, func(d TaskDef, c string) int { return strings.Compare(d.Code, c) })
			return from + i, ok
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Rows a statement of insertDefs inserts at most: PostgreSQL's arrays and
// MySQL's and SQLite's JSON documents of 10,000 rows stay far below
// every limit on a statement's size.
const insertDefsChunk = 10_000

// insertColumns are the columns insertDefs writes, in its values' order.
const insertColumns = "app, code, name, description, owner, kind, dialect, time_zone, status, timeout_ms, max_attempts, " +
	"backoff_base_ms, backoff_max_ms, misfire, misfire_window_ms, overlap, end_at_ms, max_runs, jitter_ms, pause_after, " +
	"shards, broadcast, exclude_days, calendar, params, http_target, created_ms, updated_ms, spec, version"

// insertGroup is what the rows of one insertDefs statement share: the
// definition but its spec (one copy per such definition), the status, and
// whether each name is its code.
type insertGroup struct {
	def        *Definition // Spec ""
	paused     bool
	nameIsCode bool
}

// insertDefs inserts the rows of defs[i] for i in missing, at version 1,
// created now. The tasks that share a definition but for their spec (and
// a status, and whether their name is their code) go in one statement per
// insertDefsChunk, with the definition's values bound once and the codes,
// specs (and names) as the rows of one array: a million rows of per-row
// placeholders were most of a replica's start-up, and a statement per
// spec was most of it again for tasks that each fire at their own time.
// With skipExisting, a row whose code exists already is left as it is
// (a deferred registration's writers, register_deferred.go); else it
// fails the statement.
func insertDefs(ctx context.Context, tx *gorm.DB, app string, defs []TaskDef, missing []int, now int64, skipExisting bool) error {
	// A million tasks, a few definitions but for their specs: each
	// definition's copy without its spec is shared. Tasks of one
	// definition usually come one after the other: the last task's
	// definition is known by its pointer, and then the last copy is
	// compared, which costs less than hashing the definition. (A map by
	// pointer grew by a task each, for tasks of their own specs.)
	byValue := map[Definition]*Definition{}
	var last, lastOf *Definition // the last copy, and the definition it was made of
	order, groups := groupBy(missing, func(i int) insertGroup {
		d := defs[i]
		if d.Def != lastOf {
			v := d.Def.withDefaults()
			v.Spec = ""
			switch {
			case last != nil && *last == v:
			case byValue[v] != nil:
				last = byValue[v]
			default:
				last = new(Definition) // not &v: v would go to the heap for every task
				*last = v
				byValue[v] = last
			}
			lastOf = d.Def
		}
		return insertGroup{last, d.Paused, d.Name == d.Code}
	})
	dialect := tx.Dialector.Name()
	for gi, g := range order {
		d := g.def
		status := TaskActive
		if g.paused {
			status = TaskPaused
		}
		consts := []any{app, d.Description, d.Owner, d.Kind, d.Dialect, d.TimeZone, status,
			d.TimeoutMs, d.MaxAttempts, d.BackoffBaseMs, d.BackoffMaxMs, d.Misfire, d.MisfireWindowMs, d.Overlap,
			d.EndAtMs, d.MaxRuns, d.JitterMs, d.PauseAfter, d.Shards, d.Broadcast, d.ExcludeDays, d.Calendar, Params(d.Params), d.targetArg(), now, now}
		idx := groups[gi]
		for from := 0; from < len(idx); from += insertDefsChunk {
			chunk := idx[from:min(from+insertDefsChunk, len(idx))]
			rows := insertRows{codes: make([]string, len(chunk)), specs: make([]string, len(chunk))}
			if !g.nameIsCode {
				rows.names = make([]string, len(chunk))
			}
			sameSpec := true
			for k, i := range chunk {
				rows.codes[k], rows.specs[k] = defs[i].Code, defs[i].Def.Spec
				sameSpec = sameSpec && rows.specs[k] == rows.specs[0]
				if rows.names != nil {
					rows.names[k] = defs[i].Name
				}
			}
			if sameSpec { // tasks alike: the spec bound once, as the definition's values
				rows.spec, rows.specs = rows.specs[0], nil
			}
			q, source, err := insertDefsSQL(dialect, rows, skipExisting)
			if err != nil {
				return err
			}
			args := append(append([]any{}, consts...), source...)
			if _, err := tx.Statement.ConnPool.ExecContext(ctx, q, args...); err != nil {
				return fmt.Errorf("store: insert %d tasks from %q: %w", len(chunk), rows.codes[0], err)
			}
		}
	}
	return nil
}

// insertRows are the per-row values of one insertDefs statement: codes
// and specs (or one spec for every row, when specs is nil), and names
// unless nil (the names are the codes).
type insertRows struct {
	codes, specs, names []string
	spec                string
}

// insertDefsSQL is insertDefs' statement on one dialect, and the
// arguments that carry the rows after the definition's values. The rows
// come from PostgreSQL arrays, each sent as one literal (pgTextArray) and
// unnested, a MySQL/MariaDB JSON document
// (JSON_TABLE, MySQL 8 and MariaDB 10.6 on) or an SQLite one (json_each).
func insertDefsSQL(dialect string, rows insertRows, skipExisting bool) (string, []any, error) {
	var code, name, spec, from string
	var source []any
	if rows.specs == nil {
		source = append(source, rows.spec)
	}
	switch dialect {
	case "postgres":
		n := 26 // the definition's values are $1 to $26
		param := func() string { n++; return fmt.Sprintf("$%d::text", n) }
		if rows.specs == nil {
			spec = param()
		}
		// Each column is one text parameter holding an array literal
		// (pgTextArray), cast to text[] by the server.
		arrays, cols := []string{param() + "::text[]"}, []string{"code"}
		source = append(source, pgTextArray(rows.codes))
		if rows.specs != nil {
			arrays, cols = append(arrays, param()+"::text[]"), append(cols, "spec")
			source = append(source, pgTextArray(rows.specs))
			spec = "c.spec"
		}
		code, name = "c.code", "c.code"
		if rows.names != nil {
			arrays, cols = append(arrays, param()+"::text[]"), append(cols, "name")
			source = append(source, pgTextArray(rows.names))
			name = "c.name"
		}
		from = "unnest(" + strings.Join(arrays, ", ") + ") AS c(" + strings.Join(cols, ", ") + ")"
		return `INSERT INTO xtimer_tasks (` + insertColumns + `) SELECT $1::text, ` + code + `, ` + name + `,
			$2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::bigint, $9::bigint, $10::bigint,
			$11::bigint, $12::text, $13::bigint, $14::text, $15::bigint, $16::bigint, $17::bigint, $18::bigint, $19::bigint,
			$20::boolean, $21::text, $22::text, $23::text, $24::text, $25::bigint, $26::bigint, ` + spec + `, 1
			FROM ` + from + onConflict(dialect, skipExisting), source, nil
	case "mysql":
		code, name, spec = "c.code", "c.code", "c.spec"
		cols := `code VARCHAR(128) PATH '$[0]'`
		if rows.specs != nil {
			cols += `, spec VARCHAR(255) PATH '$[1]'`
		} else {
			spec = "?"
		}
		if rows.names != nil {
			name = "c.name"
			cols += `, name VARCHAR(255) PATH '$[2]'`
		}
		from = `JSON_TABLE(?, '$[*]' COLUMNS (` + cols + `)) AS c`
	default: // sqlite
		code, name, spec = "json_extract(c.value, '$[0]')", "json_extract(c.value, '$[0]')", "json_extract(c.value, '$[1]')"
		if rows.specs == nil {
			spec = "?"
		}
		if rows.names != nil {
			name = "json_extract(c.value, '$[2]')"
		}
		from = "json_each(?) AS c"
		if skipExisting {
			from += " WHERE true" // else SQLite reads ON CONFLICT as the join's
		}
	}
	doc, err := jsonRows(rows)
	if err != nil {
		return "", nil, err
	}
	// The placeholders bind in the statement's order: the definition's
	// values, the spec when it is one for every row, the document.
	source = append(source, doc)
	return `INSERT INTO xtimer_tasks (` + insertColumns + `) SELECT ?, ` + code + `, ` + name + `,
		?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` + spec + `, 1 FROM ` + from + onConflict(dialect, skipExisting), source, nil
}

// pgTextArray is strs as a PostgreSQL array literal, every element
// double-quoted with its backslashes and double quotes escaped, so that
// any text (empty, NULL, braces, commas, spaces) is itself. Bound as a
// Go []string, pgx boxed each element in an interface value and wrote
// the binary array format: a 10,000-row insert allocated 20,000 small
// values more, on top of the bytes.
func pgTextArray(strs []string) string {
	n := 2
	for _, s := range strs {
		n += len(s) + 3 // an escape, rare, grows the builder
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('{')
	for i, s := range strs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for {
			j := strings.IndexAny(s, `"\`)
			if j < 0 {
				break
			}
			b.WriteString(s[:j])
			b.WriteByte('\\')
			b.WriteByte(s[j])
			s = s[j+1:]
		}
		b.WriteString(s)
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// onConflict is the clause that leaves a row whose code exists as it is,
// when skip; "" otherwise.
func onConflict(dialect string, skip bool) string {
	switch {
	case !skip:
		return ""
	case dialect == "mysql":
		return " ON DUPLICATE KEY UPDATE id = xtimer_tasks.id"
	default:
		return " ON CONFLICT (app, code) DO NOTHING"
	}
}

// jsonRows is a JSON array of [code, spec] or [code, spec, name] rows;
// spec is "" in every row when rows.specs is nil (the statement binds it
// once). It is written straight into one string: a [][]string through
// json.Marshal cost a slice a row and two copies of the document, for
// each 10,000 rows of a deferred write.
func jsonRows(rows insertRows) (string, error) {
	width := 1
	switch {
	case rows.names != nil:
		width = 3
	case rows.specs != nil:
		width = 2
	}
	cell := func(i, k int) string {
		switch {
		case k == 0:
			return rows.codes[i]
		case k == 1 && rows.specs != nil:
			return rows.specs[i]
		case k == 2:
			return rows.names[i]
		}
		return ""
	}
	n := 2
	for i := range rows.codes {
		for k := range width {
			n += len(cell(i, k)) + 3
		}
		n += 3
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('[')
	for i := range rows.codes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for k := range width {
			if k > 0 {
				b.WriteByte(',')
			}
			if err := writeJSONString(&b, cell(i, k)); err != nil {
				return "", fmt.Errorf("store: encode %d codes: %w", len(rows.codes), err)
			}
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String(), nil
}

// writeJSONString writes s as a JSON string: as it is between quotes
// when it is valid UTF-8 without a quote, a backslash or a control
// character (a code, a spec, most names), else as encoding/json writes it.
func writeJSONString(b *strings.Builder, s string) error {
	plain := utf8.ValidString(s)
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] != '"' && s[i] != '\\'
	}
	if plain {
		b.WriteByte('"')
		b.WriteString(s)
		b.WriteByte('"')
		return nil
	}
	q, err := json.Marshal(s)
	if err != nil {
		return err
	}
	b.Write(q)
	return nil
}

// updateDefs writes the definitions of defs[i] for i in changed over the
// rows ids (in the same order), bumping each version and updated_ms. The
// caller holds the app's lock, which every writer of code-defined columns
// takes: no other transaction changes these columns meanwhile, and writers
// of the operator's columns (status, overrides) bump the version
// themselves, so version = version + 1 stays exact. Rows sharing a
// definition are one UPDATE per insertChunk.
func updateDefs(ctx context.Context, tx *gorm.DB, defs []TaskDef, changed []int, ids []int64, now int64) error {
	type group struct {
		def        *Definition
		nameIsCode bool
	}
	positions := make([]int, len(changed))
	for k := range changed {
		positions[k] = k
	}
	order, groups := groupBy(positions, func(k int) group { d := defs[changed[k]]; return group{d.Def, d.Name == d.Code} })
	for gi, g := range order {
		d := g.def.withDefaults()
		pos := groups[gi] // positions in changed
		for from := 0; from < len(pos); from += insertChunk {
			chunk := pos[from:min(from+insertChunk, len(pos))]
			set := "description = ?, owner = ?, kind = ?, spec = ?, dialect = ?, time_zone = ?, timeout_ms = ?, max_attempts = ?, " +
				"backoff_base_ms = ?, backoff_max_ms = ?, misfire = ?, misfire_window_ms = ?, overlap = ?, end_at_ms = ?, max_runs = ?, " +
				"jitter_ms = ?, pause_after = ?, shards = ?, broadcast = ?, exclude_days = ?, calendar = ?, params = ?, http_target = ?, version = version + 1, updated_ms = ?, name = "
			args := []any{d.Description, d.Owner, d.Kind, d.Spec, d.Dialect, d.TimeZone, d.TimeoutMs, d.MaxAttempts,
				d.BackoffBaseMs, d.BackoffMaxMs, d.Misfire, d.MisfireWindowMs, d.Overlap, d.EndAtMs, d.MaxRuns,
				d.JitterMs, d.PauseAfter, d.Shards, d.Broadcast, d.ExcludeDays, d.Calendar, Params(d.Params), d.targetArg(), now}
			if g.nameIsCode {
				set += "code"
			} else {
				set += "CASE id"
				for _, k := range chunk {
					set += " WHEN ? THEN ?"
					args = append(args, ids[k], defs[changed[k]].Name)
				}
				set += " END"
			}
			for _, k := range chunk {
				args = append(args, ids[k])
			}
			q := "UPDATE xtimer_tasks SET " + set + " WHERE id IN (" + placeholders(len(chunk)) + ")"
			res, err := tx.Statement.ConnPool.ExecContext(ctx, rebind(tx, q), args...)
			if err != nil {
				return fmt.Errorf("store: update %d task definitions: %w", len(chunk), err)
			}
			if n, err := res.RowsAffected(); err == nil && n != int64(len(chunk)) {
				return fmt.Errorf("store: update %d task definitions: %d rows changed", len(chunk), n)
			}
		}
	}
	return nil
}

// groupBy splits items by key, keeping the order in which keys first
// come: groups[i] are the items of key order[i], in their order.
// Keys come in runs (a second's fires of tasks defined alike, a
// registration's tasks of one definition): an item of the last item's key
// is put in its group without a map access, which hashed a fire row's
// whole shape, strings included, for every row (300 ns a row).
func groupBy[K comparable](items []int, key func(int) K) (order []K, groups [][]int) {
	at := map[K]int{} // key → its index in order and groups
	last := -1
	var lastKey K
	for _, it := range items {
		k := key(it)
		if last < 0 || k != lastKey {
			i, ok := at[k]
			if !ok {
				i = len(order)
				at[k] = i
				order = append(order, k)
				groups = append(groups, nil)
			}
			last, lastKey = i, k
		}
		groups[last] = append(groups[last], it)
	}
	return order, groups
}

// targetArg is d's HTTP target as a statement's argument: NULL without one.
func (d Definition) targetArg() any {
	if !d.HasHTTPTarget {
		return nil
	}
	return d.HTTPTarget
}

// placeholders is n comma-separated question marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// rebind turns the question marks of q into $1, $2... on PostgreSQL, for
// statements sent to the connection directly, past GORM. q must have no
// question mark in a literal.
func rebind(tx *gorm.DB, q string) string {
	if tx.Dialector.Name() != "postgres" {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + len(q)/4)
	n := 0
	for _, c := range []byte(q) {
		if c != '?' {
			b.WriteByte(c)
			continue
		}
		n++
		fmt.Fprintf(&b, "$%d", n)
	}
	return b.String()
}

// UpsertTasks is RegisterTasks for tasks given as rows, returning the
// stored rows in the order of tasks: for callers with a few tasks at a
// time, and tests. Every task must name the same App, and a code may
// appear once; t.Status paused inserts a new row paused.
func (s *Store) UpsertTasks(ctx context.Context, tasks []*Task) ([]Task, error) {
	if len(tasks) == 0 {
		return nil, nil
	}
	defs := make([]TaskDef, len(tasks))
	first := map[string]int{}
	for i, t := range tasks {
		if t == nil {
			return nil, fmt.Errorf("store: upsert tasks: row %d is nil", i)
		}
		if err := validTask(t); err != nil {
			return nil, err
		}
		if t.App != tasks[0].App {
			return nil, fmt.Errorf("store: upsert tasks: row %d app %q differs from row 0 app %q", i, t.App, tasks[0].App)
		}
		if j, dup := first[t.Code]; dup {
			return nil, fmt.Errorf("store: upsert tasks: row %d code %q repeats row %d", i, t.Code, j)
		}
		first[t.Code] = i
		d := defOf(t).Definition
		defs[i] = TaskDef{Code: t.Code, Name: t.Name, Def: &d, Paused: t.Status == TaskPaused}
	}
	sorted := slices.Clone(defs) // register sorts in place; defs keep the input's order
	app := tasks[0].App
	if _, err := s.register(ctx, app, sorted, regPartial, 0); err != nil {
		return nil, err
	}
	codes := make([]string, len(sorted))
	for i, d := range sorted {
		codes[i] = d.Code
	}
	rows, err := s.TasksByCode(ctx, app, codes)
	if err != nil {
		return nil, err
	}
	stored := make(map[string]Task, len(rows))
	for _, t := range rows {
		stored[t.Code] = t
	}
	out := make([]Task, len(tasks))
	for i, t := range tasks {
		row, ok := stored[t.Code]
		if !ok {
			return nil, fmt.Errorf("store: upsert task %q: row missing after insert", t.Code)
		}
		out[i] = row
	}
	return out, nil
}
