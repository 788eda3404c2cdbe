package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file holds the engine's side of the types the root package shows
// its users. The root keeps their public definitions and documentation
// (Options, Run, Handler, Event, HTTPTarget) and converts at the boundary;
// where a root type is an interface of basic types only (Clock, Timer,
// Lock, Locker), both packages declare the same method set, so that a
// value of the root's type is one of the engine's without a wrapper.

// Timer is the loops' timer (internal/startstop): the root's Timer is the
// same interface literal.
type Timer = startstop.Timer

// Clock is the loops' clock (internal/startstop); the root's Clock has the
// same method set.
type Clock = startstop.Clock

// Lock is one held key of a Locker: the root package's Lock, an alias of
// the same interface literal.
type Lock = interface {
	Key() string
	Refresh(ctx context.Context, ttl time.Duration) error
	Release(ctx context.Context) error
}

// Locker takes the slot locks and the sweep's lock (Options.Locker, or the
// Redis or in-process lock the root builds).
type Locker interface {
	Obtain(ctx context.Context, key string, ttl time.Duration) (Lock, error)
}

// Errors the root package exports under the same names.
var (
	ErrTaskNotFound    = errors.New("xtimer: task not found")
	ErrDuplicateTask   = errors.New("xtimer: task already registered")
	ErrNotStarted      = errors.New("xtimer: scheduler not started")
	ErrStopped         = errors.New("xtimer: scheduler stopped")
	ErrLockUnavailable = errors.New("xtimer: lock backend unavailable")
)

// Invoker runs a Go task's handler for one attempt: the root calls the
// user's Handler with a Run made of a. The engine keeps handlers as they
// were registered (Registration.Handler) and never calls them itself.
type Invoker func(ctx context.Context, handler any, a *Attempt) error

// Attempt is one attempt of a fire as the handler sees it: the root's Run
// is made of it.
type Attempt struct {
	ID          string // app/code/run time in Unix ms (and /shard for a shard): the same on every replica and attempt
	ExecutionID int64
	Code        string
	ScheduledAt time.Time
	// Shard and Shards: the row's shard of its fire; 0 and 0 unsharded.
	Shard, Shards int
	Attempt       int
	MaxAttempts   int
	Source        string
	Replica       string
	// Params are the fire's parameters: its row's (a manual run's
	// override, TriggerWith) when it has its own, else its task's
	// (WithParams) as they are now (paramsOf, fire.go); nil for none.
	Params json.RawMessage
	Out    *Output
}

// FireID names a fire across replicas and attempts.
func FireID(app, code string, runTimeMs int64) string {
	return app + "/" + code + "/" + strconv.FormatInt(runTimeMs, 10)
}

// RunID names the run of row r: its fire (FireID), and its shard when r
// is a shard of a sharded or broadcast fire.
func RunID(app string, r store.Execution) string {
	id := FireID(app, r.TaskCode, r.RunTime)
	if r.Sharded() {
		id += "/" + strconv.Itoa(r.Shard)
	}
	return id
}

// Output is the output an attempt attaches to its row, capped: what goes
// past the cap is dropped and the text ends with a marker saying so. Safe
// for concurrent use; a nil *Output drops everything. An attempt's is part
// of its attempt (fire.go), capped at Config.MaxOutput.
type Output struct {
	mu        sync.Mutex
	out       []byte
	max       int
	truncated bool
}

// Write appends p, as far as the cap allows. It never fails.
func (o *Output) Write(p []byte) (int, error) {
	if o == nil {
		return len(p), nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	room := o.max - len(o.out)
	switch {
	case room <= 0:
		o.truncated = o.truncated || len(p) > 0
	case len(p) > room:
		o.out = append(o.out, p[:room]...)
		o.truncated = true
	default:
		o.out = append(o.out, p...)
	}
	return len(p), nil
}

// Printf appends a line.
func (o *Output) Printf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if len(s) == 0 || s[len(s)-1] != '\n' {
		s += "\n"
	}
	_, _ = o.Write([]byte(s))
}

// Truncate marks the output cut short, as a response body over the cap.
func (o *Output) Truncate() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.truncated = true
	o.mu.Unlock()
}

// String returns the output, ending in a marker when it was cut short,
// and never longer than a text column holds (store.MaxTextBytes).
func (o *Output) String() string {
	if o == nil {
		return ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.truncated && len(o.out) <= store.MaxTextBytes {
		return string(o.out)
	}
	marker := fmt.Sprintf("\n[output truncated at %d bytes]", o.max)
	keep := max(0, min(len(o.out), o.max, store.MaxTextBytes)-len(marker))
	for keep > 0 && !utf8.RuneStart(o.out[keep]) {
		keep--
	}
	return string(o.out[:keep]) + marker
}

// Shared is what the tasks registered with the same options share: the
// parsed schedule and the store's definition of their code-defined
// columns. The root computes it once per set of options.
type Shared struct {
	Name  string // "" when the name is the code, so that such tasks share
	Sched cron.Schedule
	Def   *store.Definition
	EndAt time.Time
	// base is Def and Sched as the view's states of the tasks point to
	// them (taskState.base); Engine.Register fills it in.
	base taskBase
}

// registration is a task registered in this process: its code and
// handler, and options that the tasks registered alike share, so that a
// million tasks cost a million small structs, not a million copies of
// their options (bench/README.md's performance report has the memory before
// and after).
type registration struct {
	code    string
	handler any // the root's Handler, called through Config.Invoke
	opts    *Shared
	// state is the task as stored, in this replica's view; nil until its
	// row is (taskLocked). Guarded by view.mu.
	state *taskState
	// running counts the attempts of the task running here
	// (dispatcher.noteRunning).
	running atomic.Int32
}

func (r *registration) name() string {
	if r.opts.Name == "" {
		return r.code
	}
	return r.opts.Name
}

// DefaultHTTPTaskConcurrency is the root's constant of the same name: the
// requests of one HTTP task in flight on one replica when its target says
// nothing.
const DefaultHTTPTaskConcurrency = 16

// HTTPHeader is one request header of an HTTP task's target.
type HTTPHeader struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Secret bool   `json:"secret,omitempty"`
}

// HTTPSpec is what Task.HTTPTarget holds for a task of kind http: the
// target, secrets included (encrypted with Config.SecretKeys, else in
// plaintext: secrets.go; reads through the root package mask them), and
// the task's concurrency bound, which has no column of its own. Its JSON
// is the stored form; the root's HTTPTarget has the same fields. The
// view holds it as stored: secrets are decrypted per request (httprun.go).
type HTTPSpec struct {
	Method        string       `json:"method"`
	URL           string       `json:"url"`
	Headers       []HTTPHeader `json:"headers,omitempty"`
	Body          string       `json:"body,omitempty"`
	SuccessCodes  []int        `json:"success_codes,omitempty"`
	Secret        string       `json:"secret,omitempty"`
	MaxConcurrent int          `json:"max_concurrent"`
}

// DecodeHTTPSpec reads the stored target of an HTTP task.
func DecodeHTTPSpec(row store.Task) (*HTTPSpec, error) {
	if row.HTTPTarget == nil {
		return nil, fmt.Errorf("xtimer: http task %q: no target stored", row.Code)
	}
	var sp HTTPSpec
	if err := json.Unmarshal([]byte(*row.HTTPTarget), &sp); err != nil {
		return nil, fmt.Errorf("xtimer: http task %q: stored target: %w", row.Code, err)
	}
	if sp.MaxConcurrent < 1 {
		sp.MaxConcurrent = DefaultHTTPTaskConcurrency
	}
	return &sp, nil
}

// EventKind names what an alert is about; the root's EventKind is an alias
// of it, and the root documents the kinds (notify.go).
type EventKind string

// The kinds the alerter raises, with the root's values.
const (
	EventFailed          EventKind = "execution.failed"
	EventTimedOut        EventKind = "execution.timed_out"
	EventSkipped         EventKind = "execution.skipped"
	EventLate            EventKind = "task.late"
	EventSilent          EventKind = "task.silent"
	EventReplicaLost     EventKind = "replica.lost"
	EventFallbackEntered EventKind = "redis.fallback_entered"
	EventFallbackLeft    EventKind = "redis.fallback_left"
	EventTaskPaused      EventKind = "task.paused"
	EventCalendarMissing EventKind = "calendar.missing"
	// EventSecretUndecryptable is the root's: an HTTP task's secrets do
	// not decrypt on the replica that was to run its fire (secrets.go).
	EventSecretUndecryptable EventKind = "task.secret_undecryptable" //nolint:gosec // G101: an event kind, not a credential
	EventClockSkew           EventKind = "replica.clock_skew"
)

// Event is one alert, field for field the root's Event (notify.go
// documents the fields), which converts from it. Its JSON is what the
// alerts table holds while the alert waits to be sent.
type Event struct {
	ID          string        `json:"id"`
	Kind        EventKind     `json:"kind"`
	App         string        `json:"app"`
	Task        string        `json:"task,omitempty"`
	Owner       string        `json:"owner,omitempty"`
	Replica     string        `json:"replica"`
	At          time.Time     `json:"at"`
	ExecutionID int64         `json:"execution_id,omitempty"`
	ScheduledAt time.Time     `json:"scheduled_at,omitzero"`
	Attempt     int           `json:"attempt,omitempty"`
	Reason      string        `json:"reason,omitempty"`
	Error       string        `json:"error,omitempty"`
	Lateness    time.Duration `json:"lateness_ns,omitempty"`
	Missed      int           `json:"missed,omitempty"`
	ClockOffset time.Duration `json:"clock_offset_ns,omitempty"`
	Suppressed  int64         `json:"suppressed"`
	Since       time.Time     `json:"since,omitzero"`
	Digest      bool          `json:"digest,omitempty"`
	Message     string        `json:"message"`
}

// Notify sends one alert (Options.Notifier, converted by the root).
type Notify func(ctx context.Context, e Event) error

// The stored values of the root's MisfirePolicy and OverlapPolicy
// (task.go documents them).
const (
	MisfireRunOnce     = "run_once"
	MisfireRunAll      = "run_all"
	MisfireSkip        = "skip"
	OverlapAllow       = "allow"
	OverlapForbid      = "forbid"
	OverlapBufferOne   = "buffer_one"
	OverlapBufferAll   = "buffer_all"
	OverlapCancelOther = "cancel_other"
)

// DefaultMisfireWindow is the root's constant of the same name: how late
// a missed fire may still run when its task's row says nothing.
const DefaultMisfireWindow = time.Hour

// ErrLockHeld is the root's ErrLockHeld: another holder has the key.
var ErrLockHeld = errors.New("xtimer: lock held by another owner")

// SystemClock is the clock of the operating system; the root's
// SystemClock returns it. The dispatcher starts fires a little early
// (startEarly) only on this clock, corrected (RefClock) or not.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer as a Timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

// AfterFunc is time.AfterFunc (executor.AfterFuncClock).
func (SystemClock) AfterFunc(d time.Duration, f func()) executor.Stopper { return time.AfterFunc(d, f) }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time        { return t.t.C }
func (t systemTimer) Stop() bool                 { return t.t.Stop() }
func (t systemTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
