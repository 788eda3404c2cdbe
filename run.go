package xtimer

import (
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/xtimer-go/xtimer/internal/store"
)

// Source says what created a fire.
type Source string

const (
	// SourceSchedule is a fire of the task's schedule, started on time.
	SourceSchedule Source = "schedule"
	// SourceManual is a run asked for with Trigger or the console.
	SourceManual Source = "manual"
	// SourceCatchUp is a fire missed during an outage and run late by the
	// task's misfire policy.
	SourceCatchUp Source = "catchup"
)

// Status is where an execution stands.
type Status string

// Execution statuses: scheduled → running → succeeded | failed | timed_out,
// with retrying between attempts, and skipped for fires that never ran.
const (
	StatusScheduled Status = "scheduled"
	StatusRunning   Status = "running"
	StatusRetrying  Status = "retrying"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusTimedOut  Status = "timed_out"
	StatusSkipped   Status = "skipped"
)

// Final reports whether no further attempt will change the status.
func (s Status) Final() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusTimedOut, StatusSkipped:
		return true
	}
	return false
}

// DefaultMaxOutput caps what a handler may attach to its execution row.
const DefaultMaxOutput = 64 << 10

// Run is what a handler receives: the fire it runs and a place for output.
type Run struct {
	// ID is the idempotency key of the fire, "app/code/run_time_ms": the same
	// on every attempt and every replica, never reused. Business code that
	// must not act twice (a payment, a ledger entry) stores it with its
	// effect and checks it before acting: a retry after a half-finished
	// attempt then finds its own earlier work.
	ID string
	// ExecutionID is the execution row's primary key.
	ExecutionID int64
	// Code is the task code.
	Code string
	// ScheduledAt is the fire's planned instant, in the task's zone.
	ScheduledAt time.Time
	// Attempt is 1 for the first attempt, 2 for the first retry, ...
	Attempt int
	// MaxAttempts is the task's retry budget (attempts in all).
	MaxAttempts int
	// Source says what created the fire.
	Source Source
	// Replica is the instance running this attempt.
	Replica string

	mu        sync.Mutex
	out       []byte
	max       int
	truncated bool
}

func fireID(app, code string, runTimeMs int64) string {
	return app + "/" + code + "/" + strconv.FormatInt(runTimeMs, 10)
}

// Write appends p to the output stored on the execution row, so a Run can be
// the io.Writer of a logger or a report. Output beyond the cap (64 KiB by
// default) is dropped and the stored text says so. It never fails.
func (r *Run) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	room := r.max - len(r.out)
	switch {
	case room <= 0:
		r.truncated = r.truncated || len(p) > 0
	case len(p) > room:
		r.out = append(r.out, p[:room]...)
		r.truncated = true
	default:
		r.out = append(r.out, p...)
	}
	return len(p), nil
}

// Printf appends a formatted line to the output (a newline is added when
// the format has none).
func (r *Run) Printf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if len(s) == 0 || s[len(s)-1] != '\n' {
		s += "\n"
	}
	_, _ = r.Write([]byte(s))
}

// Output returns what the handler attached so far.
func (r *Run) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.truncated && len(r.out) <= store.MaxTextBytes {
		return string(r.out)
	}
	// The marker must survive the store's own cut at MaxTextBytes, so it
	// takes its room from the output, cut at a UTF-8 boundary.
	marker := fmt.Sprintf("\n[output truncated at %d bytes]", r.max)
	keep := max(0, min(len(r.out), r.max, store.MaxTextBytes)-len(marker))
	for keep > 0 && !utf8.RuneStart(r.out[keep]) {
		keep--
	}
	return string(r.out[:keep]) + marker
}

// Execution is the record of one fire, as stored.
type Execution struct {
	ID          int64
	App         string
	Code        string
	RunTime     time.Time // the planned instant
	Status      Status
	Reason      string // why skipped or failed without an error of the handler: paused, overlap, misfire, replica lost
	Source      Source
	Attempt     int
	MaxAttempts int
	Replica     string
	StartedAt   time.Time // zero until started
	FinishedAt  time.Time // zero until finished
	Lateness    time.Duration
	Duration    time.Duration
	NextAttempt time.Time // when a retrying execution runs again
	Output      string
	Error       string
}
