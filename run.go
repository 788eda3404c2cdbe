package xtimer

import (
	"encoding/json"
	"time"

	"github.com/xtimer-go/xtimer/internal/engine"
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
	// SourceBackfill is a past fire recorded by Backfill, run one at a
	// time in run-time order beside the task's scheduled fires.
	SourceBackfill Source = "backfill"
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
	// attempt then finds its own earlier work. A shard of a sharded or
	// broadcast task (WithShards, WithBroadcast) has its own:
	// "app/code/run_time_ms/shard".
	ID string
	// Shard and Shards say which part of the fire this run is: shard
	// Shard (0 to Shards-1) of Shards; 0 and 1 for a task that is not
	// sharded. A sharded handler does the part of the work that is its
	// own, e.g. the rows whose id modulo Shards is Shard.
	Shard, Shards int
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
	// Params are the run's parameters, JSON: those a manual run was
	// triggered with (TriggerOptions.Params), else the task's (WithParams)
	// as they are when the attempt starts; nil for none. Bind decodes them.
	Params json.RawMessage

	out *engine.Output // nil for a Run made outside a Scheduler: output is dropped
}

// Write appends p to the output stored on the execution row, so a Run can be
// the io.Writer of a logger or a report. Output beyond the cap (64 KiB by
// default) is dropped and the stored text says so. It never fails.
func (r *Run) Write(p []byte) (int, error) { return r.out.Write(p) }

// Printf appends a formatted line to the output (a newline is added when
// the format has none).
func (r *Run) Printf(format string, args ...any) { r.out.Printf(format, args...) }

// Output returns what the handler attached so far.
func (r *Run) Output() string { return r.out.String() }

// Execution is the record of one fire, as stored.
type Execution struct {
	ID          int64
	App         string
	Code        string
	RunTime     time.Time // the planned instant
	PlannedAt   time.Time // when it was planned to start: RunTime, plus its WithJitter offset; lateness counts from it
	Status      Status
	Reason      string // why skipped or failed without an error of the handler: paused, overlap, misfire, replica lost
	Source      Source
	Attempt     int
	MaxAttempts int
	Replica     string
	// Shard and Shards: the row is shard Shard (0 to Shards-1) of its
	// fire; 0 and 1 for a fire that is not sharded.
	Shard, Shards int
	// Broadcast: the row is a shard of a broadcast fire (WithBroadcast),
	// which runs on its replica or not at all.
	Broadcast   bool
	StartedAt   time.Time // zero until started
	FinishedAt  time.Time // zero until finished
	Lateness    time.Duration
	Duration    time.Duration
	NextAttempt time.Time // when a retrying execution runs again
	Output      string
	Error       string
	// Params are the parameters a manual run was triggered with
	// (TriggerOptions.Params: JSON for a Go task, the body for an HTTP
	// task); "" when the run has its task's, as they are when it starts.
	Params string
	// Note says why a manual run was triggered (TriggerOptions.Note).
	Note string
}
