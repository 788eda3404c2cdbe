package xtimer

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The reads below show what the app has stored, across the fleet: its
// executions page by page, its tasks, its live replicas. They read the
// database, not this replica's view of it, and work before Start once the
// tables exist.

// Page sizes of Executions.
const (
	// DefaultPageLimit is the page size when ExecutionFilter.Limit is 0.
	DefaultPageLimit = 100
	// MaxPageLimit is the largest ExecutionFilter.Limit.
	MaxPageLimit = 1000
)

// ExecutionFilter selects the executions of the scheduler's app that
// Executions lists. Zero fields do not filter.
type ExecutionFilter struct {
	// Code keeps the executions of the task of this code.
	Code string
	// Status keeps the executions of this status (StatusScheduled...).
	Status Status
	// Source keeps the executions of this source (SourceSchedule...).
	Source Source
	// From and To bound the run time: From <= RunTime < To. A zero bound
	// leaves that side open; From after To is refused.
	From time.Time
	To   time.Time
	// Limit is the most executions a page holds. Defaults to
	// DefaultPageLimit (100); at most MaxPageLimit (1000).
	Limit int
	// After is the Next of the previous page, "" for the first page. Pass
	// it with the filter the previous page was read with.
	After string
}

// ExecutionPage is one page of Executions.
type ExecutionPage struct {
	// Executions are newest run time first, as the console lists them.
	Executions []Execution
	// Next is ExecutionFilter.After for the following page, "" when this
	// page is the last. It is opaque: pass it back as it is.
	Next string
}

// Executions returns one page of the app's executions that match f, newest
// run time first (the same run time: newest recorded first), times in each
// task's zone. Pages follow one another by key, not by offset: a page deep
// in the history costs what the first one does, and a walk through the
// pages sees no execution twice however many are recorded meanwhile (those
// newer than its position are on the first page of the next walk). A field
// of f out of range, or an After that is no Next, is refused with an error
// naming it.
func (s *Scheduler) Executions(ctx context.Context, f ExecutionFilter) (ExecutionPage, error) {
	sf, after, limit, err := s.executionFilter(f)
	if err != nil {
		return ExecutionPage{}, err
	}
	rows, next, err := s.store.ListExecutions(ctx, sf, after, limit)
	if err != nil {
		return ExecutionPage{}, fmt.Errorf("xtimer: list executions: %w", err)
	}
	page := ExecutionPage{Executions: make([]Execution, len(rows)), Next: next.String()}
	locs := map[string]*time.Location{}
	for i, r := range rows {
		loc, ok := locs[r.TaskCode]
		if !ok {
			loc = s.eng.Zone(r.TaskCode)
			locs[r.TaskCode] = loc
		}
		page.Executions[i] = toExecution(r, loc)
	}
	return page, nil
}

// executionFilter checks f and returns the store's filter, cursor and page
// size.
func (s *Scheduler) executionFilter(f ExecutionFilter) (store.ExecutionFilter, store.Cursor, int, error) {
	fail := func(field string, value any, reason string) (store.ExecutionFilter, store.Cursor, int, error) {
		return store.ExecutionFilter{}, store.Cursor{}, 0, fmt.Errorf("xtimer: ExecutionFilter.%s = %v: %s", field, value, reason)
	}
	statuses := []Status{StatusScheduled, StatusRunning, StatusRetrying, StatusSucceeded, StatusFailed, StatusTimedOut, StatusSkipped}
	sources := []Source{SourceSchedule, SourceManual, SourceCatchUp, SourceBackfill}
	epoch := time.UnixMilli(0)
	switch {
	case textProblem(f.Code, 128) != "":
		return fail("Code", fmt.Sprintf("%q", f.Code), textProblem(f.Code, 128))
	case f.Status != "" && !slices.Contains(statuses, f.Status):
		return fail("Status", fmt.Sprintf("%q", f.Status), "want one of "+joinQuoted(statuses))
	case f.Source != "" && !slices.Contains(sources, f.Source):
		return fail("Source", fmt.Sprintf("%q", f.Source), "want one of "+joinQuoted(sources))
	case !f.To.IsZero() && !f.To.After(epoch):
		return fail("To", f.To, "want a time after 1970-01-01 UTC, when run times start")
	case !f.From.IsZero() && !f.To.IsZero() && f.From.After(f.To):
		return fail("From", f.From, fmt.Sprintf("want a time at or before To (%s)", f.To))
	case f.Limit < 0 || f.Limit > MaxPageLimit:
		return fail("Limit", f.Limit, fmt.Sprintf("want 1-%d, or 0 for DefaultPageLimit (%d)", MaxPageLimit, DefaultPageLimit))
	}
	after, ok := store.ParseCursor(f.After)
	if !ok {
		return fail("After", fmt.Sprintf("%q", f.After), `want the Next of a previous page, or "" for the first page`)
	}
	sf := store.ExecutionFilter{App: s.opts.App, TaskCode: f.Code, Status: string(f.Status), Source: string(f.Source)}
	// Run times are whole milliseconds: RunTime >= From is RunTime >= From
	// rounded up, and RunTime < To is RunTime < To rounded up. The store
	// reads 0 as no bound, which a From before 1970 is.
	if f.From.After(epoch) {
		sf.FromMs = ceilMs(f.From)
	}
	if !f.To.IsZero() {
		sf.ToMs = ceilMs(f.To)
	}
	return sf, after, cmp.Or(f.Limit, DefaultPageLimit), nil
}

// joinQuoted lists values for an error: "a", "b", "c".
func joinQuoted[T ~string](values []T) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(string(v))
	}
	return strings.Join(q, ", ")
}

// ceilMs is t in Unix milliseconds, rounded up.
func ceilMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// TaskKind says how a task runs.
type TaskKind string

const (
	// KindGo is a task registered in Go code (Register): a replica that
	// registered it runs its handler.
	KindGo TaskKind = "go"
	// KindHTTP is an HTTP callback task (CreateHTTPTask): any replica
	// calls its endpoint.
	KindHTTP TaskKind = "http"
)

// TaskFilter selects the tasks of the scheduler's app that Tasks lists.
// Zero fields do not filter.
type TaskFilter struct {
	// Kind keeps the tasks of this kind.
	Kind TaskKind
	// Paused, when set, keeps the paused tasks (true) or the active ones
	// (false).
	Paused *bool
	// Owner keeps the tasks of this owner (WithOwner), exactly.
	Owner string
	// CodePrefix keeps the tasks whose code starts with it.
	CodePrefix string
}

// Task is a task as stored: registered in Go code by some replica of the
// app, or an HTTP callback task.
type Task struct {
	// Code names the task.
	Code string
	// Name is the name shown in the console: WithName's, the code by default.
	Name string
	// Description is WithDescription's text.
	Description string
	// Owner is WithOwner's team or person.
	Owner string
	// Kind says how the task runs: KindGo or KindHTTP.
	Kind TaskKind
	// Spec, Dialect and Zone are the schedule that applies: the one
	// SetSchedule (or the console) stored when Overridden, the code's
	// otherwise.
	Spec    string
	Dialect Dialect
	Zone    string
	// Overridden reports a schedule set from outside the code, which wins
	// over the code's until ResetSchedule.
	Overridden bool
	// CodeSpec, CodeDialect and CodeZone are the schedule the code
	// registers, or the HTTP task was created or updated with.
	CodeSpec    string
	CodeDialect Dialect
	CodeZone    string
	// Paused reports a task paused by Pause, the console or
	// WithPauseOnFailure: nothing fires.
	Paused bool
	// PauseNote says why the task was last paused or resumed: the note of
	// PauseWith or ResumeWith, or the one WithPauseOnFailure wrote.
	PauseNote string
	// PauseOnFailure is WithPauseOnFailure's n (HTTPTask.PauseOnFailure);
	// 0 when failures never pause the task.
	PauseOnFailure int
	// Timeout bounds one attempt.
	Timeout time.Duration
	// MaxAttempts counts the first attempt: 1 means no retry.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the wait between attempts
	// (WithBackoff).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Misfire says what happens to fires missed during an outage, and
	// MisfireWindow how late such a fire may still run.
	Misfire       MisfirePolicy
	MisfireWindow time.Duration
	// Overlap says whether a fire may start while an earlier run of the
	// task is running.
	Overlap OverlapPolicy
	// EndAt is when the schedule ends (WithEndAt), in the task's zone;
	// zero when it never does.
	EndAt time.Time
	// MaxRuns is the most scheduled fires the task gets (WithMaxRuns); 0
	// when there is no cap.
	MaxRuns int64
	// Jitter spreads each fire's start over [0, Jitter) after its nominal
	// instant (WithJitter); 0 when the task has none.
	Jitter time.Duration
	// Exclude are the days the task's fires skip (WithExclude), sorted;
	// Calendar the app's calendar whose days they skip too (WithCalendar).
	Exclude  []string
	Calendar string
	// Params are WithParams' JSON, nil when the task has none. (An HTTP
	// task's parameters are its body, Target.Body.)
	Params json.RawMessage
	// The options above (Timeout to Jitter, PauseOnFailure and Params)
	// are those that apply: SetTaskOptions' overrides where it set them,
	// the code's otherwise. Overrides are the fields SetTaskOptions set
	// (nil where it set none), and CodeOptions the code's values of those
	// same fields (nil elsewhere), so that both can be shown side by
	// side.
	Overrides   TaskOverrides
	CodeOptions TaskOverrides
	// Replicas counts the live replicas that can run the task: those that
	// registered its handler, or every live replica for an HTTP task. While
	// it is 0 the task's fires wait.
	Replicas int
}

// Tasks returns the app's stored tasks that match f, ordered by code. It
// reads every matching task, so an app of very many tasks is better read
// with a filter.
func (s *Scheduler) Tasks(ctx context.Context, f TaskFilter) ([]Task, error) {
	bad := func(field string, value any, reason string) error {
		return fmt.Errorf("xtimer: TaskFilter.%s = %v: %s", field, value, reason)
	}
	sf := store.TaskFilter{App: s.opts.App}
	switch f.Kind {
	case "":
	case KindGo:
		sf.Kind = store.KindFunc
	case KindHTTP:
		sf.Kind = store.KindHTTP
	default:
		return nil, bad("Kind", fmt.Sprintf("%q", f.Kind), `want "go" (KindGo) or "http" (KindHTTP)`)
	}
	if f.Paused != nil {
		sf.Status = store.TaskActive
		if *f.Paused {
			sf.Status = store.TaskPaused
		}
	}
	if p := textProblem(f.Owner, 255); p != "" {
		return nil, bad("Owner", fmt.Sprintf("%q", f.Owner), p)
	}
	if p := textProblem(f.CodePrefix, 128); p != "" {
		return nil, bad("CodePrefix", fmt.Sprintf("%q", f.CodePrefix), p)
	}
	// The store matches text anywhere in the code or the name, ignoring
	// case: it narrows what is read, and the prefix is checked here.
	sf.Text = f.CodePrefix

	live, err := s.store.LiveReplicas(ctx, s.opts.App, s.clock.Now().Add(-s.opts.ReplicaTimeout).UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("xtimer: list tasks: %w", err)
	}
	for i := range live {
		if !slices.IsSorted(live[i].Handlers) {
			live[i].Handlers = slices.Sorted(slices.Values(live[i].Handlers))
		}
	}
	zones := map[string]*time.Location{}
	var out []Task
	for after := ""; ; {
		rows, next, err := s.store.ListTasks(ctx, sf, after, store.MaxListLimit)
		if err != nil {
			return nil, fmt.Errorf("xtimer: list tasks: %w", err)
		}
		for _, row := range rows {
			if !strings.HasPrefix(row.Code, f.CodePrefix) || (f.Owner != "" && row.Owner != f.Owner) {
				continue
			}
			out = append(out, toTask(row, live, zones))
		}
		if next == "" {
			return out, nil
		}
		after = next
	}
}

// toTask is the Task of a stored row; live are the app's live replicas,
// their handlers sorted, and zones caches the zones loaded so far.
func toTask(row store.Task, live []store.Replica, zones map[string]*time.Location) Task {
	overrides, err := row.OptionOverrides.Decode()
	if err != nil { // the engine ignores them too (internal/engine/view.go)
		overrides = store.OptionOverrides{}
	}
	code := overrides.From(row)
	row = row.WithOptions(overrides)
	spec, dialect, zone := row.Effective()
	t := Task{
		Code: row.Code, Name: row.Name, Description: row.Description, Owner: row.Owner, Kind: KindGo,
		Spec: spec, Dialect: Dialect(cmp.Or(dialect, string(DialectCron))), Zone: cmp.Or(zone, "UTC"),
		Overridden: row.SpecOverride != nil || row.DialectOverride != nil || row.TZOverride != nil,
		CodeSpec:   row.Spec, CodeDialect: Dialect(cmp.Or(row.Dialect, string(DialectCron))), CodeZone: cmp.Or(row.TimeZone, "UTC"),
		Paused:      row.Status == store.TaskPaused,
		Timeout:     time.Duration(row.TimeoutMs) * time.Millisecond,
		MaxAttempts: max(row.MaxAttempts, 1),
		BackoffBase: time.Duration(row.BackoffBaseMs) * time.Millisecond,
		BackoffMax:  time.Duration(row.BackoffMaxMs) * time.Millisecond,
		Misfire:     MisfirePolicy(cmp.Or(row.Misfire, string(MisfireRunOnce))),
		Overlap:     OverlapPolicy(cmp.Or(row.Overlap, string(OverlapAllow))),
		MaxRuns:     row.MaxRuns,
		Jitter:      time.Duration(row.JitterMs) * time.Millisecond,
		Exclude:     store.SplitDays(row.ExcludeDays),
		Calendar:    row.Calendar,
	}
	t.PauseNote, t.PauseOnFailure = row.PauseNote, row.PauseAfter
	if row.Params != "" {
		t.Params = json.RawMessage(row.Params)
	}
	t.MisfireWindow = time.Duration(row.MisfireWindowMs) * time.Millisecond
	if t.MisfireWindow <= 0 {
		t.MisfireWindow = DefaultMisfireWindow
	}
	if row.Kind == store.KindHTTP {
		t.Kind = KindHTTP
		t.Replicas = len(live)
	} else {
		for _, r := range live {
			if _, ok := slices.BinarySearch(r.Handlers, row.Code); ok {
				t.Replicas++
			}
		}
	}
	t.Overrides, t.CodeOptions = overridesOf(overrides), overridesOf(code)
	if row.EndAtMs != 0 {
		loc, ok := zones[t.Zone]
		if !ok {
			var err error
			if loc, err = loadZone(t.Zone); err != nil {
				loc = time.UTC // a zone this binary does not know: the instant is still right
			}
			zones[t.Zone] = loc
		}
		t.EndAt = time.UnixMilli(row.EndAtMs).In(loc)
	}
	return t
}

// Replica is a process running a Scheduler of the app.
type Replica struct {
	// ID is the replica's Options.InstanceID.
	ID string
	// Host and PID are the host name and process ID it runs as.
	Host string
	PID  int
	// Version is its Options.Version.
	Version string
	// StartedAt is when it started, HeartbeatAt its last heartbeat.
	StartedAt   time.Time
	HeartbeatAt time.Time
	// Handlers are the codes of the Go tasks it registered, sorted. A
	// replica stores them at its first heartbeat and when they change, so
	// a replica just started may show none yet.
	Handlers []string
	// ClockOffset is its clock's correction at its last heartbeat: the
	// database's clock minus its own (negative: its clock is fast); 0
	// when it does not measure (Options.ClockReference off).
	ClockOffset time.Duration
	// ClockRefused: the offset is beyond its Options.MaxClockSkew: it
	// claims no fire until its clock is back within it.
	ClockRefused bool
}

// Replicas returns the live replicas of the app, this one included once it
// has started, ordered by ID: those whose last heartbeat is within
// Options.ReplicaTimeout.
func (s *Scheduler) Replicas(ctx context.Context) ([]Replica, error) {
	rows, err := s.store.LiveReplicas(ctx, s.opts.App, s.clock.Now().Add(-s.opts.ReplicaTimeout).UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("xtimer: list replicas: %w", err)
	}
	out := make([]Replica, len(rows))
	for i, r := range rows {
		out[i] = Replica{
			ID: r.ID, Host: r.Host, PID: r.PID, Version: r.Version,
			StartedAt: time.UnixMilli(r.StartedMs).UTC(), HeartbeatAt: time.UnixMilli(r.HeartbeatMs).UTC(),
			Handlers:    r.Handlers,
			ClockOffset: time.Duration(r.ClockOffsetMs) * time.Millisecond, ClockRefused: r.ClockRefused,
		}
		if !slices.IsSorted(out[i].Handlers) {
			out[i].Handlers = slices.Sorted(slices.Values(r.Handlers))
		}
	}
	return out, nil
}
