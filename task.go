package xtimer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/store"
)

// Handler is the work of a task. It receives the fire it runs; ctx ends at
// the task's timeout or when the scheduler stops. An error, a panic or a
// timeout fails the attempt, and the task's retry policy decides what next.
type Handler func(ctx context.Context, run *Run) error

// MisfirePolicy says what happens to fires that were due while no replica
// could run them (every replica down, the database unreachable).
type MisfirePolicy string

const (
	// MisfireRunOnce runs the latest missed fire once and records the others
	// skipped (reason misfire). The default.
	MisfireRunOnce MisfirePolicy = "run_once"
	// MisfireRunAll runs every missed fire within the misfire window, oldest first.
	MisfireRunAll MisfirePolicy = "run_all"
	// MisfireSkip records every missed fire skipped and runs none.
	MisfireSkip MisfirePolicy = "skip"
)

// OverlapPolicy says what a fire does when an earlier run of the same
// task is still going (running, or waiting for a retry) somewhere in the
// fleet. Every policy is enforced across the replicas: a fire's start
// checks the task's rows in the database, not one process's memory.
type OverlapPolicy string

const (
	// OverlapAllowAll starts every fire, whatever runs. The default.
	OverlapAllowAll OverlapPolicy = "allow"
	// OverlapSkip records a fire skipped (reason overlap) while an earlier
	// run of the task is running on any replica.
	OverlapSkip OverlapPolicy = "forbid"
	// OverlapBufferOne lets one fire wait for the earlier run: it starts
	// within a second of that run's final status. A fire due while one
	// waits already is skipped (reason overlap).
	OverlapBufferOne OverlapPolicy = "buffer_one"
	// OverlapBufferAll lets every fire wait; they start one after the
	// other, in run-time order, each within a second of the previous
	// one's final status.
	OverlapBufferAll OverlapPolicy = "buffer_all"
	// OverlapCancelOther stops the earlier run: its handler's context is
	// cancelled, wherever it runs (its replica learns within a second),
	// and its execution ends failed, reason "cancelled by next fire",
	// with no retry. The new fire starts as soon as that run has ended.
	// If the handler ignores its context, it starts anyway about 5
	// seconds after the cancel (at most a heartbeat interval more), once
	// the run's replica has heart-beaten since. A run on a replica that
	// has not (frozen, cut off from the database, or killed) is waited for
	// until its execution is settled, by that replica or as lost after
	// ReplicaTimeout: a frozen process resumes its handler when it wakes.
	OverlapCancelOther OverlapPolicy = "cancel_other"

	// OverlapAllow is OverlapAllowAll, its name before the buffer
	// policies came.
	OverlapAllow = OverlapAllowAll
	// OverlapForbid is OverlapSkip, its name before the buffer policies
	// came.
	OverlapForbid = OverlapSkip
)

// Task defaults, applied before a task's own options.
const (
	// DefaultTimeout bounds one attempt of a handler.
	DefaultTimeout = 10 * time.Minute
	// DefaultBackoffBase is the wait before the first retry; it doubles per
	// attempt up to DefaultBackoffMax, spread by ±20%.
	DefaultBackoffBase = time.Second
	// DefaultBackoffMax caps the wait between retries.
	DefaultBackoffMax = 5 * time.Minute
	// DefaultMisfireWindow is how late a missed fire may still run.
	DefaultMisfireWindow = time.Hour
)

// validCode reports whether s may be a task code (or an App): 1-128
// lower-case letters, digits and . _ : - starting with a letter or digit,
// the regular expression ^[a-z0-9][a-z0-9._:-]{0,127}$. A code names rows
// and Redis keys, appears in URLs of the console, and must stay readable
// in logs. Lower case only: MySQL's default collation compares without
// case, PostgreSQL's with it, and a code must mean one task on both. (A
// loop, not the regular expression: the expression was a visible share of
// registering a million tasks; bench/README.md's performance report has the
// figures.)
func validCode(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == ':' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// TaskOption configures one task at Register.
type TaskOption func(*taskConfig) error

// taskConfig is a task as registered in code: defaults first, then
// options. Register keeps of it a registration, whose options tasks
// registered alike share.
type taskConfig struct {
	code    string
	handler Handler
	taskOpts
}

// taskOpts is what the options of a task set: comparable, so that the
// tasks registered with the same options share one copy (regOpts).
type taskOpts struct {
	spec          string
	timeout       time.Duration
	maxAttempts   int
	backoff       executor.Backoff
	misfire       MisfirePolicy
	misfireWindow time.Duration
	overlap       OverlapPolicy
	loc           *time.Location
	locSet        bool // WithLocation was given
	dialect       Dialect
	name          string
	description   string
	owner         string
	endAt         time.Time
	maxRuns       int64
	jitter        time.Duration // WithJitter
	pauseAfter    int           // WithPauseOnFailure
	excludeDays   string        // WithExclude: sorted YYYY-MM-DD, comma-separated
	calendar      string        // WithCalendar
	params        string        // WithParams: JSON; a string, so that taskOpts stays comparable
	shards        int           // WithShards: 0 for none
	broadcast     bool          // WithBroadcast
}

func newTaskConfig(code, spec string, h Handler) taskConfig {
	return taskConfig{code: code, handler: h, taskOpts: taskOpts{
		spec:          spec,
		timeout:       DefaultTimeout,
		maxAttempts:   1,
		backoff:       executor.Backoff{Base: DefaultBackoffBase, Max: DefaultBackoffMax, Jitter: 0.2},
		misfire:       MisfireRunOnce,
		misfireWindow: DefaultMisfireWindow,
		overlap:       OverlapAllow,
		loc:           time.UTC,
		dialect:       DialectCron,
		name:          code,
	}}
}

// regOpts are the options of one or more tasks registered alike, with
// what they imply, computed once and shared by the engine's registrations
// (engine.Shared): a million tasks cost a million small structs, not a
// million copies of their options (bench/README.md's performance report
// has the memory before and after).
type regOpts struct {
	engine.Shared
}

// regKey identifies a regOpts: the options, with name "" when it is the
// code (nameIsCode), so that such tasks share.
type regKey struct {
	taskOpts
	nameIsCode bool
}

// definition is the store's form of the code-defined columns these
// options give a task but its code and name (store.TaskDef has those).
func (c *taskOpts) definition() store.Definition {
	d := store.Definition{
		Description: c.description, Owner: c.owner, Kind: store.KindFunc, Spec: c.spec,
		Dialect: string(c.dialect), TimeZone: c.loc.String(),
		TimeoutMs: c.timeout.Milliseconds(), MaxAttempts: c.maxAttempts,
		BackoffBaseMs: c.backoff.Base.Milliseconds(), BackoffMaxMs: c.backoff.Max.Milliseconds(),
		Misfire: string(c.misfire), MisfireWindowMs: c.misfireWindow.Milliseconds(), Overlap: string(c.overlap),
		MaxRuns: c.maxRuns, JitterMs: c.jitter.Milliseconds(), PauseAfter: c.pauseAfter,
		ExcludeDays: c.excludeDays, Calendar: c.calendar, Params: c.params,
		Shards: c.shards, Broadcast: c.broadcast,
	}
	if !c.endAt.IsZero() {
		d.EndAtMs = c.endAt.UnixMilli()
	}
	return d
}

// taskOptionError is a TaskOption refusing its argument. It reads
// `WithRetry(0): attempts must be 1-100 (1 means no retry)`, with no
// "xtimer:" of its own: Register returns it inside a taskError, which
// names the task.
type taskOptionError struct {
	option string // "WithRetry"
	value  string // the argument as the message shows it
	reason string
}

func optionError(option string, value any, reason string) error {
	return &taskOptionError{option: option, value: fmt.Sprint(value), reason: reason}
}

func (e *taskOptionError) Error() string {
	return fmt.Sprintf("%s(%s): %s", e.option, e.value, e.reason)
}

// taskError names the task an error of Register is about, keeping one
// "xtimer:" prefix and the cause for errors.As: a *taskOptionError, or
// the *SpecError of the task's spec.
type taskError struct {
	code string
	err  error
}

func (e *taskError) Error() string {
	var spec *SpecError
	if errors.As(e.err, &spec) {
		return fmt.Sprintf("xtimer: task %q: %s", e.code, spec.Detail())
	}
	return fmt.Sprintf("xtimer: task %q: %v", e.code, e.err)
}

func (e *taskError) Unwrap() error { return e.err }

// checkText refuses free text the databases cannot all store as given:
// invalid UTF-8 and NUL bytes (PostgreSQL refuses both), and text longer
// than max bytes.
func checkText(option, value string, max int) error {
	if reason := textProblem(value, max); reason != "" {
		shown := fmt.Sprintf("%q", value)
		if len(value) > max {
			shown = fmt.Sprintf("%d bytes", len(value))
		}
		return optionError(option, shown, reason)
	}
	return nil
}

// textProblem is checkText's reason, "" when value is fine.
func textProblem(value string, max int) string {
	switch {
	case !utf8.ValidString(value):
		return "not valid UTF-8"
	case strings.ContainsRune(value, 0):
		return "contains a NUL byte"
	case len(value) > max:
		return fmt.Sprintf("at most %d bytes", max)
	}
	return ""
}

// WithTimeout bounds one attempt. At the deadline the handler's context is
// cancelled and the attempt is recorded timed_out, even if the handler
// ignores its context (its late result is logged and dropped). Default
// DefaultTimeout.
func WithTimeout(d time.Duration) TaskOption {
	return func(c *taskConfig) error {
		if d <= 0 {
			return optionError("WithTimeout", d, "timeout must be positive")
		}
		c.timeout = d
		return nil
	}
}

// WithRetry sets how many attempts a fire gets in all: WithRetry(3) is the
// first attempt and up to two retries. Default 1 (no retry).
func WithRetry(maxAttempts int) TaskOption {
	return func(c *taskConfig) error {
		if maxAttempts < 1 || maxAttempts > 100 {
			return optionError("WithRetry", maxAttempts, "attempts must be 1-100 (1 means no retry)")
		}
		c.maxAttempts = maxAttempts
		return nil
	}
}

// WithBackoff sets the wait before a retry: base after the first failed
// attempt, doubling per attempt up to max, spread by ±20% so that tasks
// failing together do not retry together. Default DefaultBackoffBase and
// DefaultBackoffMax.
func WithBackoff(base, max time.Duration) TaskOption {
	return func(c *taskConfig) error {
		switch {
		case base <= 0:
			return optionError("WithBackoff", base, "base must be positive")
		case max < base:
			return optionError("WithBackoff", max, fmt.Sprintf("max must be at least base %s", base))
		}
		c.backoff.Base, c.backoff.Max = base, max
		return nil
	}
}

// WithMisfire sets what happens to fires missed during an outage. Default
// MisfireRunOnce.
func WithMisfire(p MisfirePolicy) TaskOption {
	return func(c *taskConfig) error {
		switch p {
		case MisfireRunOnce, MisfireRunAll, MisfireSkip:
			c.misfire = p
			return nil
		}
		return optionError("WithMisfire", fmt.Sprintf("%q", p), `want MisfireRunOnce, MisfireRunAll or MisfireSkip`)
	}
}

// WithMisfireWindow sets how late a missed fire may still run; older ones
// are recorded skipped (reason misfire). Default DefaultMisfireWindow.
func WithMisfireWindow(d time.Duration) TaskOption {
	return func(c *taskConfig) error {
		if d <= 0 {
			return optionError("WithMisfireWindow", d, "window must be positive")
		}
		c.misfireWindow = d
		return nil
	}
}

// WithOverlap sets what a fire does while an earlier run of the task is
// still going anywhere in the fleet: start anyway, be skipped, or wait
// (OverlapPolicy). Default OverlapAllowAll.
func WithOverlap(p OverlapPolicy) TaskOption {
	return func(c *taskConfig) error {
		switch p {
		case OverlapAllowAll, OverlapSkip, OverlapBufferOne, OverlapBufferAll, OverlapCancelOther:
			c.overlap = p
			return nil
		}
		return optionError("WithOverlap", fmt.Sprintf("%q", p), `want OverlapAllowAll, OverlapSkip, OverlapBufferOne, OverlapBufferAll or OverlapCancelOther`)
	}
}

// WithLocation sets the time zone of the spec. Default UTC, never the
// machine's local zone. A CRON_TZ= prefix in the spec that names another
// zone is a contradiction and fails Register.
func WithLocation(loc *time.Location) TaskOption {
	return func(c *taskConfig) error {
		switch {
		case loc == nil:
			return optionError("WithLocation", nil, "location is nil")
		case loc == time.Local:
			return optionError("WithLocation", "Local", localZoneReason)
		}
		c.loc, c.locSet = loc, true
		return nil
	}
}

// WithQuartz reads the spec in the Quartz dialect (see Quartz).
func WithQuartz() TaskOption {
	return func(c *taskConfig) error {
		c.dialect = DialectQuartz
		return nil
	}
}

// WithName sets the human name shown in the console. Default the code.
func WithName(name string) TaskOption {
	return func(c *taskConfig) error {
		if name == "" || len(name) > 255 {
			return optionError("WithName", fmt.Sprintf("%q", name), "name must be 1-255 bytes")
		}
		if err := checkText("WithName", name, 255); err != nil {
			return err
		}
		c.name = name
		return nil
	}
}

// WithDescription sets the description shown in the console: valid UTF-8,
// no NUL byte, at most 16 KiB.
func WithDescription(text string) TaskOption {
	return func(c *taskConfig) error {
		if err := checkText("WithDescription", text, 16<<10); err != nil {
			return err
		}
		c.description = text
		return nil
	}
}

// WithOwner names who to ask about the task (a team, a person): valid
// UTF-8, no NUL byte, at most 255 bytes.
func WithOwner(owner string) TaskOption {
	return func(c *taskConfig) error {
		if err := checkText("WithOwner", owner, 255); err != nil {
			return err
		}
		c.owner = owner
		return nil
	}
}

// WithEndAt stops the schedule: no fire at or after t.
func WithEndAt(t time.Time) TaskOption {
	return func(c *taskConfig) error {
		if t.IsZero() {
			return optionError("WithEndAt", "zero time", "end must be a real instant")
		}
		c.endAt = t
		return nil
	}
}

// WithMaxRuns stops the schedule after n scheduled fires (manual runs do not count).
func WithMaxRuns(n int64) TaskOption {
	return func(c *taskConfig) error {
		if n < 1 {
			return optionError("WithMaxRuns", n, "runs must be at least 1")
		}
		c.maxRuns = n
		return nil
	}
}

// validate checks what no single option can: the code, the handler, and
// the spec read with the options' dialect and zone. known, when not nil,
// are options validated before that equal c's but for the code and the
// name: their spec is not read again (a million Registers of one spec).
// now is where the check of WithJitter starts reading the schedule.
func (c *taskConfig) validate(known *regOpts, now time.Time) (Schedule, error) {
	if !validCode(c.code) {
		return nil, fmt.Errorf("xtimer: task code %q: want 1-128 characters of lower-case letters, digits and . _ : - starting with a letter or digit", c.code)
	}
	if c.handler == nil {
		return nil, fmt.Errorf("xtimer: task %q: handler is nil", c.code)
	}
	if known != nil {
		return known.Sched, nil
	}
	sched, err := ParseSchedule(c.spec, WithDialect(c.dialect), In(c.loc))
	if err != nil {
		return nil, &taskError{c.code, err}
	}
	if c.locSet && sched.Location().String() != c.loc.String() {
		return nil, fmt.Errorf("xtimer: task %q: spec %q names zone %s but WithLocation says %s", c.code, c.spec, sched.Location(), c.loc)
	}
	if reason := jitterTooLong(sched, c.jitter, now); reason != "" {
		return nil, &taskError{c.code, optionError("WithJitter", c.jitter, reason)}
	}
	return sched, nil
}
