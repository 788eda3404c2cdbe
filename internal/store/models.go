package store

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// The models below are the schema. Every column and index carries an explicit
// name so that the tables do not depend on the caller's GORM NamingStrategy,
// and so that schema/mysql.sql and schema/postgres.sql can name the same
// things (schema_test.go checks that they do).
//
// Instants are BIGINT milliseconds since the Unix epoch, UTC; 0 means "not
// yet" or "none". Durations are BIGINT milliseconds.

// Task statuses.
const (
	TaskActive = "active"
	TaskPaused = "paused"
)

// Task kinds.
const (
	KindFunc = "func" // a Go handler registered in the process
	KindHTTP = "http" // an HTTP callback described by Task.HTTPTarget
)

// Execution statuses. See doc.go for the transitions between them.
const (
	StatusScheduled = "scheduled"
	StatusRunning   = "running"
	StatusRetrying  = "retrying"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
	StatusSkipped   = "skipped"
)

// Execution sources: what created the execution row.
const (
	SourceSchedule = "schedule"
	SourceManual   = "manual"
	SourceRetry    = "retry"
	SourceCatchup  = "catchup"
	// SourceBackfill: a past fire an operator asked to run (Backfill). Such
	// fires run one at a time in run-time order (BackfillState), apart from
	// the task's scheduled fires.
	SourceBackfill = "backfill"
)

// Reasons the store itself writes; the engine may write others.
const (
	ReasonPaused  = "paused"
	ReasonOverlap = "overlap"
	ReasonMisfire = "misfire"
	// ReasonRescheduled: the task's schedule changed after the fire was
	// recorded, and the new schedule has no fire at that instant.
	ReasonRescheduled = "rescheduled"
	ReasonReplicaLost = "replica lost"
	// ReasonCancelled: a later fire of a task whose overlap policy is
	// cancel_other stopped this run (RequestCancel).
	ReasonCancelled = "cancelled by next fire"
	// ReasonExcluded: the fire falls on a day its task excludes
	// (Task.ExcludeDays, or its Calendar's days), in the task's zone.
	ReasonExcluded = "excluded"
)

// Task is one row of xtimer_tasks: the definition of a task as the code
// registered it, plus the state an operator controls (status and the
// override columns), which code never overwrites.
type Task struct {
	ID          int64  `gorm:"column:id;primaryKey;autoIncrement"`
	App         string `gorm:"column:app;size:64;not null;uniqueIndex:xtimer_tasks_app_code,priority:1"`
	Code        string `gorm:"column:code;size:128;not null;uniqueIndex:xtimer_tasks_app_code,priority:2"`
	Name        string `gorm:"column:name;size:255;not null;default:''"`
	Description string `gorm:"column:description;type:text;not null"`
	Owner       string `gorm:"column:owner;size:255;not null;default:''"`
	Kind        string `gorm:"column:kind;size:16;not null;default:'func'"`
	Spec        string `gorm:"column:spec;size:255;not null"`
	Dialect     string `gorm:"column:dialect;size:16;not null;default:''"`
	TimeZone    string `gorm:"column:time_zone;size:64;not null;default:'UTC'"`
	Status      string `gorm:"column:status;size:16;not null;default:'active'"`
	TimeoutMs   int64  `gorm:"column:timeout_ms;not null;default:0"`
	// MaxAttempts counts the first attempt: 1 means no retry.
	MaxAttempts     int    `gorm:"column:max_attempts;not null;default:1"`
	BackoffBaseMs   int64  `gorm:"column:backoff_base_ms;not null;default:0"`
	BackoffMaxMs    int64  `gorm:"column:backoff_max_ms;not null;default:0"`
	Misfire         string `gorm:"column:misfire;size:16;not null;default:''"`
	MisfireWindowMs int64  `gorm:"column:misfire_window_ms;not null;default:0"`
	Overlap         string `gorm:"column:overlap;size:16;not null;default:''"`
	EndAtMs         int64  `gorm:"column:end_at_ms;not null;default:0"`
	MaxRuns         int64  `gorm:"column:max_runs;not null;default:0"`
	// JitterMs spreads each fire's start over [0, JitterMs) after its
	// nominal instant, by a hash of (app, code, instant); 0 for none.
	JitterMs int64 `gorm:"column:jitter_ms;not null;default:0"`
	// PauseAfter pauses the task after this many consecutive scheduled
	// fires ended failed or timed_out; 0 never.
	PauseAfter int `gorm:"column:pause_after;not null;default:0"`
	// Shards splits each fire into this many rows, one per shard, dealt
	// over the replicas that run the task (WithShards); 0 for none.
	Shards int `gorm:"column:shards;not null;default:0"`
	// Broadcast makes each fire one shard per live replica that runs the
	// task (WithBroadcast).
	Broadcast bool `gorm:"column:broadcast;not null;default:false"`
	// ExcludeDays are the dates (YYYY-MM-DD in the task's zone, sorted,
	// comma-separated) on which the task's fires are skipped.
	ExcludeDays string `gorm:"column:exclude_days;size:2048;not null;default:''"`
	// Calendar names a calendar of the app (xtimer_calendars) whose days
	// the task's fires skip as well; "" for none.
	Calendar string `gorm:"column:calendar;size:64;not null;default:''"`
	// Params is the JSON of WithParams, "" (NULL) for none (params.go).
	Params Params `gorm:"column:params"`
	// HTTPTarget is the JSON description of the callback of a KindHTTP task.
	HTTPTarget *string `gorm:"column:http_target;type:text"`
	// SpecOverride, DialectOverride and TZOverride are console edits; when
	// set they win over Spec, Dialect and TimeZone until ResetOverride.
	SpecOverride    *string `gorm:"column:spec_override;size:255"`
	DialectOverride *string `gorm:"column:dialect_override;size:16"`
	TZOverride      *string `gorm:"column:tz_override;size:64"`
	// OptionOverrides replace some of the code-defined options
	// (SetTaskOptions, overrides.go); "" (NULL) for none.
	OptionOverrides OverridesJSON `gorm:"column:option_overrides"`
	// PauseNote says why the task was last paused or resumed, as the
	// operator or the engine (pause on failure) wrote it.
	PauseNote string `gorm:"column:pause_note;size:1024;not null;default:''"`
	CreatedMs int64  `gorm:"column:created_ms;not null;default:0"`
	UpdatedMs int64  `gorm:"column:updated_ms;not null;default:0"`
	// Version grows by one on every change to the row; TaskVersions lets
	// every replica spot changes cheaply.
	Version int64 `gorm:"column:version;not null;default:0"`
}

// TableName is xtimer_tasks, whatever the caller's naming strategy.
func (Task) TableName() string { return "xtimer_tasks" }

// Effective returns the schedule that applies: each override when set, the
// code-defined value otherwise.
func (t Task) Effective() (spec, dialect, timeZone string) {
	spec, dialect, timeZone = t.Spec, t.Dialect, t.TimeZone
	if t.SpecOverride != nil {
		spec = *t.SpecOverride
	}
	if t.DialectOverride != nil {
		dialect = *t.DialectOverride
	}
	if t.TZOverride != nil {
		timeZone = *t.TZOverride
	}
	return spec, dialect, timeZone
}

// AppState is one row of xtimer_apps: one row per app, the app's state that
// is not any one task's. TaskGen grows with every committed change to the
// app's tasks (every write to xtimer_tasks bumps it in its transaction,
// but a deferred registration's rows: WriteDeferred), so
// a replica notices a change anywhere in the fleet by reading one row, and
// runs TaskVersions only when TaskGen moved.
//
// RegDigest and RegGen are what the last registration (RegisterTasks)
// left: the digest of the tasks it registered, and the task generation at
// its commit. While TaskGen still equals RegGen, no task was written
// since, and a registration of the same tasks has nothing to write.
//
// RegPendingMs is set while the rows of a deferred registration
// (BeginRegistration) are still being written: their created_ms, which
// every replica of that registration gives its tasks. 0 when none is.
// RegWritten has a byte per chunk of its rows, '1' once written.
//
// RegUniformMs and RegUniformDigest are the created_ms and the digest of
// the last deferred registration, kept after its write finished: its rows
// were written alike (version 1, created and updated at RegUniformMs,
// active, no override), and those no writer has changed since still are
// (TaskHeadsBut). 0 and "" before any deferred registration.
type AppState struct {
	App              string `gorm:"column:app;size:64;primaryKey;autoIncrement:false"`
	TaskGen          int64  `gorm:"column:task_gen;not null;default:0"`
	RegDigest        string `gorm:"column:reg_digest;size:64;not null;default:''"`
	RegGen           int64  `gorm:"column:reg_gen;not null;default:0"`
	RegPendingMs     int64  `gorm:"column:reg_pending_ms;not null;default:0"`
	RegWritten       string `gorm:"column:reg_written;size:4096;not null;default:''"`
	RegUniformMs     int64  `gorm:"column:reg_uniform_ms;not null;default:0"`
	RegUniformDigest string `gorm:"column:reg_uniform_digest;size:64;not null;default:''"`
}

// TableName is xtimer_apps, whatever the caller's naming strategy.
func (AppState) TableName() string { return "xtimer_apps" }

// Execution is one row of xtimer_executions: the record of one fire
// (App, TaskCode, RunTime), or of one shard of it (Shard), and of its
// attempts.
//
// Every fire writes its row several times, so the table has five indexes
// and no more, each serving the engine, the console, or both. B-trees are
// read backwards as cheaply as forwards, so each serves a newest-first
// listing (ListExecutions) from any cursor:
//
//   - xtimer_executions_shard (app, task_code, run_time, shard), unique:
//     one row per fire, or per shard of a sharded fire; the listing of a
//     task. (It replaced xtimer_executions_fire, the same without shard.)
//   - xtimer_executions_status (app, status, run_time): the listing of a
//     status. Its (app, status) prefix finds the live rows the engine
//     looks for, which are few (scheduled, running: ClaimFires,
//     LostExecutions, PromoteLostStarts, ReleaseFires, RunningCount).
//   - the retry index, for DueRetries: partial where the database has
//     partial indexes. The tags below cannot declare it (retryindex.go).
//   - xtimer_executions_replica_time (app, replica, run_time): the listing
//     of a replica. Replica IDs are per process, so most replicas have rows
//     only in some past days, which a scan of the time index would reach
//     only after reading everything since. It leaves
//     out status so that a status change does not rewrite it on MySQL.
//   - xtimer_executions_time (app, run_time): the listing of an app, and
//     of a time range; source is filtered along it (rows are in run_time
//     order on disk, so a 1% source costs a few thousand adjacent rows).
//
// internal/pagingbench measures them on 10 million rows.
type Execution struct {
	ID       int64  `gorm:"column:id;primaryKey;autoIncrement"`
	App      string `gorm:"column:app;size:64;not null;uniqueIndex:xtimer_executions_shard,priority:1;index:xtimer_executions_status,priority:1;index:xtimer_executions_replica_time,priority:1;index:xtimer_executions_time,priority:1"`
	TaskCode string `gorm:"column:task_code;size:128;not null;uniqueIndex:xtimer_executions_shard,priority:2"`
	// RunTime is the fire's planned instant, Unix milliseconds UTC.
	RunTime int64 `gorm:"column:run_time;not null;uniqueIndex:xtimer_executions_shard,priority:3;index:xtimer_executions_status,priority:3;index:xtimer_executions_replica_time,priority:3;index:xtimer_executions_time,priority:2"`
	// Shard is the shard's index, 0 to Shards-1; 0 for an unsharded fire.
	Shard int `gorm:"column:shard;not null;default:0;uniqueIndex:xtimer_executions_shard,priority:4"`
	// Shards is how many shards the fire has; 0 for an unsharded fire.
	Shards int `gorm:"column:shards;not null;default:0"`
	// Broadcast marks a shard of a broadcast fire (WithBroadcast): it runs
	// on its replica or not at all, and is never handed to another.
	Broadcast bool   `gorm:"column:broadcast;not null;default:false"`
	Status    string `gorm:"column:status;size:16;not null;index:xtimer_executions_status,priority:2"`
	Reason    string `gorm:"column:reason;size:64;not null;default:''"`
	Source    string `gorm:"column:source;size:16;not null;default:'schedule'"`
	// Attempt is the number of the attempt running or last run: 0 before
	// the first start, 1 for the first attempt.
	Attempt     int    `gorm:"column:attempt;not null;default:0"`
	MaxAttempts int    `gorm:"column:max_attempts;not null;default:1"`
	Replica     string `gorm:"column:replica;size:128;not null;default:'';index:xtimer_executions_replica_time,priority:2"`
	// Claim is the nonce of the InsertFires call that created the row.
	Claim string `gorm:"column:claim;size:32;not null;default:''"`
	// ScheduledMs is when the row was recorded.
	ScheduledMs int64 `gorm:"column:scheduled_ms;not null;default:0"`
	StartedMs   int64 `gorm:"column:started_ms;not null;default:0"`
	FinishedMs  int64 `gorm:"column:finished_ms;not null;default:0"`
	// LatenessMs is how late the last attempt started: StartedMs minus
	// RunTime for the first attempt, minus NextAttemptMs for a retry.
	LatenessMs int64 `gorm:"column:lateness_ms;not null;default:0"`
	DurationMs int64 `gorm:"column:duration_ms;not null;default:0"`
	// HTTPStatus is the response status of the last attempt of an HTTP
	// callback task; 0 for Go handlers and for attempts that got no
	// response (connection refused, timeout).
	HTTPStatus    int    `gorm:"column:http_status;not null;default:0"`
	Output        string `gorm:"column:output;type:text;not null"`
	Error         string `gorm:"column:error;type:text;not null"`
	NextAttemptMs int64  `gorm:"column:next_attempt_ms;not null;default:0"`
	UpdatedMs     int64  `gorm:"column:updated_ms;not null;default:0"`
	// CancelMs is when a later fire asked this run to stop (overlap policy
	// cancel_other, RequestCancel); 0 when none did.
	CancelMs int64 `gorm:"column:cancel_ms;not null;default:0"`
	// PlannedMs is when the fire was planned to start: RunTime plus the
	// task's jitter offset; 0 means RunTime.
	PlannedMs int64 `gorm:"column:planned_ms;not null;default:0"`
	// Params are the parameters a manual run was triggered with (the body
	// of an HTTP task); "" (NULL) runs with the task's at each attempt.
	Params Params `gorm:"column:params"`
	// Note says why a manual run was triggered, as its caller wrote it.
	Note string `gorm:"column:note;size:1024;not null;default:''"`
}

// TableName is xtimer_executions, whatever the caller's naming strategy.
func (Execution) TableName() string { return "xtimer_executions" }

// Planned is when the fire was planned to start, Unix milliseconds UTC:
// PlannedMs, or RunTime when the row has none (no jitter).
func (e Execution) Planned() int64 {
	if e.PlannedMs > 0 {
		return e.PlannedMs
	}
	return e.RunTime
}

// Sharded reports whether the row is a shard of a sharded or broadcast
// fire, whose shards are dealt over the replicas (not a slot's to take
// over whole).
func (e Execution) Sharded() bool { return e.Shards > 0 || e.Broadcast }

// Slot is one row of xtimer_slots: a (minute, bucket) whose fires were all
// recorded. Minute is a Unix minute number (Unix seconds / 60), not
// milliseconds; see MinuteOf.
type Slot struct {
	App    string `gorm:"column:app;size:64;primaryKey;autoIncrement:false"`
	Minute int64  `gorm:"column:minute;primaryKey;autoIncrement:false"`
	Bucket int    `gorm:"column:bucket;primaryKey;autoIncrement:false"`
	Done   bool   `gorm:"column:done;not null;default:false"`
	Owner  string `gorm:"column:owner;size:128;not null;default:''"`
	DoneMs int64  `gorm:"column:done_ms;not null;default:0"`
}

// TableName is xtimer_slots, whatever the caller's naming strategy.
func (Slot) TableName() string { return "xtimer_slots" }

// MinuteOf returns the Unix minute number of an instant in Unix
// milliseconds, the unit of Slot.Minute.
func MinuteOf(ms int64) int64 {
	m := ms / 60000
	if ms < 0 && ms%60000 != 0 {
		m-- // floor, not truncation, before 1970
	}
	return m
}

// Replica is one row of xtimer_replicas: a process running a scheduler,
// kept alive by Heartbeat.
type Replica struct {
	App         string `gorm:"column:app;size:64;primaryKey;autoIncrement:false;index:xtimer_replicas_heartbeat,priority:1"`
	ID          string `gorm:"column:id;size:128;primaryKey;autoIncrement:false"`
	Host        string `gorm:"column:host;size:255;not null;default:''"`
	PID         int    `gorm:"column:pid;not null;default:0"`
	Version     string `gorm:"column:version;size:64;not null;default:''"`
	StartedMs   int64  `gorm:"column:started_ms;not null;default:0"`
	HeartbeatMs int64  `gorm:"column:heartbeat_ms;not null;default:0;index:xtimer_replicas_heartbeat,priority:2"`
	// Handlers are the task codes registered in the process. A replica
	// writes them at its first heartbeat and when they change, not on
	// every heartbeat. A list too big for one statement (HandlerChunks) is
	// not in this column: the readers (LiveReplicas, ReplicaHandlers) fill
	// it from its chunks.
	Handlers Codes `gorm:"column:handlers"`
	// HandlerChunks is the number of rows of xtimer_handler_chunks that
	// hold the replica's handler list (SetReplicaHandlers), 0 when the
	// list is in the handlers column.
	HandlerChunks int `gorm:"column:handler_chunks;not null;default:0"`
	// Slots are the slots ("minute:bucket") the replica owns now, as of
	// its last heartbeat; the console shows them.
	Slots []string `gorm:"column:slots;type:text;serializer:json"`
	// ClockOffsetMs is the replica's correction of its clock as of its
	// last heartbeat: the database's clock minus its own, in milliseconds
	// (positive: the replica's clock is slow). 0 for a replica that does
	// not measure it (Options.ClockReference off).
	ClockOffsetMs int64 `gorm:"column:clock_offset_ms;not null;default:0"`
	// ClockRefused: the offset is beyond the replica's Options.MaxClockSkew,
	// and it claims nothing (internal/engine/clockref.go). The other
	// replicas leave it out of the lists they share slots and shards by.
	ClockRefused bool `gorm:"column:clock_refused;not null;default:false"`
}

// TableName is xtimer_replicas, whatever the caller's naming strategy.
func (Replica) TableName() string { return "xtimer_replicas" }

// HandlerChunk is one row of xtimer_handler_chunks: part Seq (from 0) of
// the handler list of a replica, whose row counts the parts
// (Replica.HandlerChunks). SetReplicaHandlers writes them.
type HandlerChunk struct {
	App     string `gorm:"column:app;size:64;primaryKey;autoIncrement:false"`
	Replica string `gorm:"column:replica;size:128;primaryKey;autoIncrement:false"`
	Seq     int    `gorm:"column:seq;primaryKey;autoIncrement:false"`
	Codes   Codes  `gorm:"column:codes;not null"`
}

// TableName is xtimer_handler_chunks, whatever the caller's naming
// strategy.
func (HandlerChunk) TableName() string { return "xtimer_handler_chunks" }

// Codes is a list of task codes stored as a JSON array. Its column is
// MEDIUMTEXT on MySQL/MariaDB, whose TEXT stops at 64 KiB (some 6,000
// codes), and TEXT elsewhere.
type Codes []string

// GormDataType is the column's generic type, for GORM's schema.
func (Codes) GormDataType() string { return "text" }

// GormDBDataType gives the column type per dialect.
func (Codes) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == "mysql" {
		return "mediumtext"
	}
	return "text"
}

// Value encodes the codes as a JSON array; nil stays NULL.
func (c Codes) Value() (driver.Value, error) {
	if c == nil {
		return nil, nil
	}
	b, err := json.Marshal([]string(c))
	return string(b), err
}

// Scan decodes a JSON array; NULL is nil.
func (c *Codes) Scan(v any) error {
	var b []byte
	switch v := v.(type) {
	case nil:
		*c = nil
		return nil
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		return fmt.Errorf("store: codes: cannot scan %T", v)
	}
	return json.Unmarshal(b, (*[]string)(c))
}

// Operator actions, as the console records them in Action.Action. Other
// values are allowed; these are the ones xtimer's console writes.
const (
	ActionPause         = "pause"
	ActionResume        = "resume"
	ActionTrigger       = "trigger"
	ActionSetSchedule   = "set_schedule"
	ActionResetSchedule = "reset_schedule"
	ActionBackfill      = "backfill"
	// ActionSetOptions and ActionResetOptions: a Go task's option
	// overrides set or reset (SetOptionOverrides); Detail is their JSON
	// before → after.
	ActionSetOptions   = "set_options"
	ActionResetOptions = "reset_options"
	// ActionSetCalendar: a calendar's days replaced (xtimer_calendars);
	// the row's TaskCode is "".
	ActionSetCalendar = "set_calendar"
	// ActionRetry: a failed or timed_out execution retried by hand
	// (RetryExecution); Detail names the execution.
	ActionRetry = "retry"
)

// Action is one row of xtimer_actions, the audit log of what operators did
// to tasks: who (Principal) did what (Action, Detail) to which task, when.
// Rows are only ever inserted.
type Action struct {
	ID       int64  `gorm:"column:id;primaryKey;autoIncrement"`
	App      string `gorm:"column:app;size:64;not null;index:xtimer_actions_task,priority:1"`
	TaskCode string `gorm:"column:task_code;size:128;not null;default:'';index:xtimer_actions_task,priority:2"`
	AtMs     int64  `gorm:"column:at_ms;not null;default:0;index:xtimer_actions_task,priority:3"`
	// Principal names the operator, as the console's authentication knows them.
	Principal string `gorm:"column:principal;size:255;not null;default:''"`
	// Action is what was done: ActionPause, ActionTrigger...
	Action string `gorm:"column:action;size:32;not null"`
	// Detail describes the change, free text or JSON (e.g. the old and the
	// new schedule); stored cut to MaxTextBytes.
	Detail string `gorm:"column:detail;type:text;not null"`
}

// TableName is xtimer_actions, whatever the caller's naming strategy.
func (Action) TableName() string { return "xtimer_actions" }

// models lists every table, in migration order.
func models() []any {
	return []any{&Task{}, &AppState{}, &Execution{}, &Slot{}, &Replica{}, &HandlerChunk{}, &Action{}, &Alert{}, &Rollup{}, &Calendar{}, &Attempt{}, &SchemaMark{}}
}
