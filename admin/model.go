package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/store"
)

// The views below are what the console shows: the JSON API returns them as
// they are, and the pages render the same values, so the two never
// disagree. Instants are UTC in JSON (RFC 3339); pages show them in the
// zone the viewer picked (see zone.go).

// ScheduleView is a schedule and its English description.
type ScheduleView struct {
	Spec        string `json:"spec"`
	Dialect     string `json:"dialect"`
	Zone        string `json:"zone"`
	Description string `json:"description"`
}

// Task states: what is actually happening, beside the configured status.
const (
	StateScheduled   = "scheduled"    // active, has a next run and a live replica with its handler
	StateRunning     = "running"      // an execution is running now
	StatePaused      = "paused"       // paused by an operator: nothing fires
	StateNoReplica   = "no_replica"   // active, but no live replica has its handler: fires wait
	StateBadSchedule = "bad_schedule" // the stored schedule does not parse: nothing fires
	StateEnded       = "ended"        // past its end time or run limit: nothing more fires
)

// TaskView is a task as stored, with what the console adds: the schedule
// that applies, its next run, its last execution and its actual state.
type TaskView struct {
	App         string `json:"app"`
	Code        string `json:"code"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Owner       string `json:"owner"`
	Kind        string `json:"kind"`
	// Status is what an operator configured: active or paused.
	Status string `json:"status"`
	// State is what is happening: one of the State constants.
	State string `json:"state"`
	// PauseNote says why the task was last paused or resumed: an
	// operator's note, or the one pause on failure wrote.
	PauseNote string `json:"pause_note,omitempty"`
	// PauseOnFailure is how many consecutive failed fires pause the task;
	// 0 never.
	PauseOnFailure int `json:"pause_on_failure"`
	// Schedule is the schedule that applies; CodeSchedule the one the code
	// registers, which differs when Overridden (a console edit).
	Schedule      ScheduleView `json:"schedule"`
	CodeSchedule  ScheduleView `json:"code_schedule"`
	Overridden    bool         `json:"overridden"`
	ScheduleError string       `json:"schedule_error,omitempty"`

	TimeoutMs       int64      `json:"timeout_ms"`
	MaxAttempts     int        `json:"max_attempts"`
	BackoffBaseMs   int64      `json:"backoff_base_ms"`
	BackoffMaxMs    int64      `json:"backoff_max_ms"`
	Misfire         string     `json:"misfire"`
	MisfireWindowMs int64      `json:"misfire_window_ms"`
	Overlap         string     `json:"overlap"`
	EndAt           *time.Time `json:"end_at,omitempty"`
	MaxRuns         int64      `json:"max_runs"`
	JitterMs        int64      `json:"jitter_ms"`
	// Shards is how many shards each fire has (WithShards; 0 for none),
	// Broadcast whether each fire runs once on every replica.
	Shards    int  `json:"shards"`
	Broadcast bool `json:"broadcast"`
	// Exclude are the days the task's fires skip, YYYY-MM-DD in its zone,
	// and Calendar the app's calendar whose days they skip too; NextRun
	// and the next runs leave both out.
	Exclude  []string `json:"exclude"`
	Calendar string   `json:"calendar,omitempty"`
	// Params are the task's parameters (xtimer.WithParams), JSON; absent
	// when it has none. An HTTP task's are its body (HTTPTargetView).
	Params json.RawMessage `json:"params,omitempty"`
	// The options above (timeout_ms to jitter_ms, pause_on_failure and
	// params) are those that apply. OptionOverrides are the ones
	// xtimer.SetTaskOptions (PUT api/tasks/{code}/options) set, in
	// OptionsEdit's form, and CodeOptions the code's values of the same
	// fields; both absent when there are none.
	OptionOverrides json.RawMessage `json:"option_overrides,omitempty"`
	CodeOptions     json.RawMessage `json:"code_options,omitempty"`

	NextRun *time.Time `json:"next_run,omitempty"`
	// Last is the newest execution; for a sharded fire, a shard of it
	// with the fire's summary (fires.go).
	Last *ExecutionView `json:"last,omitempty"`
	// Replicas counts the live replicas that have the task's handler.
	Replicas  int       `json:"replicas"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
}

// ExecutionView is one execution row. Lists leave Output and Error out
// beyond their first line (OutputHead, ErrorHead); one execution has them
// whole.
type ExecutionView struct {
	ID      int64     `json:"id"`
	App     string    `json:"app"`
	Task    string    `json:"task"`
	RunTime time.Time `json:"run_time"`
	// PlannedAt is when the fire was planned to start: run_time plus the
	// task's jitter offset (run_time without jitter).
	PlannedAt   time.Time  `json:"planned_at"`
	Status      string     `json:"status"`
	Reason      string     `json:"reason,omitempty"`
	Source      string     `json:"source"`
	Attempt     int        `json:"attempt"`
	MaxAttempts int        `json:"max_attempts"`
	Replica     string     `json:"replica,omitempty"`
	RecordedAt  *time.Time `json:"recorded_at,omitempty"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	NextAttempt *time.Time `json:"next_attempt,omitempty"`
	LatenessMs  int64      `json:"lateness_ms"`
	DurationMs  int64      `json:"duration_ms"`
	Output      *string    `json:"output,omitempty"`
	Error       *string    `json:"error,omitempty"`
	ErrorHead   string     `json:"error_head,omitempty"`
	// HTTPStatus is the response status of an HTTP callback's last
	// attempt; 0 for a Go task, or when no response came.
	HTTPStatus int `json:"http_status,omitempty"`
	// Zone is the task's zone, in which pages show RunTime on hover.
	Zone string `json:"zone,omitempty"`
	// Params are the parameters a manual run was triggered with (an HTTP
	// task's body), as text: one execution has them, lists leave them
	// out; absent when the run had its task's. Note says why it was
	// triggered.
	Params *string `json:"params,omitempty"`
	Note   string  `json:"note,omitempty"`
	// Shard and Shards say which part of its fire the row is: shard Shard
	// (0 to Shards-1) of Shards; 0 and 1 for a fire that is not sharded.
	// Broadcast marks a shard of a broadcast fire, one per replica.
	Shard     int  `json:"shard"`
	Shards    int  `json:"shards"`
	Broadcast bool `json:"broadcast"`
	// Fire is the fire as a whole, on the one line a listing shows for a
	// sharded or broadcast fire (fires.go).
	Fire *FireView `json:"fire,omitempty"`
	// FireShards are every shard of the fire, in shard order, on one
	// execution of a sharded or broadcast fire.
	FireShards []ExecutionView `json:"fire_shards,omitempty"`
}

// ActionView is one operator action on a task.
type ActionView struct {
	At        time.Time `json:"at"`
	Principal string    `json:"principal"`
	Action    string    `json:"action"`
	Detail    string    `json:"detail,omitempty"`
}

// TaskDetail is everything the task page shows.
type TaskDetail struct {
	Task TaskView `json:"task"`
	// NextRuns are the next 10 fires of the schedule that applies.
	NextRuns []time.Time `json:"next_runs"`
	// Counts are the executions of the last 24 hours by status.
	Counts map[string]int64 `json:"counts_24h"`
	// Recent are the newest executions, newest first, a sharded fire
	// as one line (fires.go).
	Recent []ExecutionView `json:"recent"`
	// Days are the final executions of the last 30 UTC days by status,
	// oldest first, today included (daily.go); they outlive retention.
	Days    []DayView    `json:"days"`
	Actions []ActionView `json:"actions"`
	// HTTP is the target of an HTTP callback task of the scheduler's app,
	// secrets masked.
	HTTP *HTTPTargetView `json:"http,omitempty"`
}

// ReplicaView is one replica of the app.
type ReplicaView struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Version     string    `json:"version"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// Live: the last heartbeat is within the scheduler's ReplicaTimeout.
	Live     bool     `json:"live"`
	Self     bool     `json:"self"`
	Handlers []string `json:"handlers"`
	// Slots are the (minute:bucket) slots the replica held at its last
	// heartbeat.
	Slots []string `json:"slots"`
	// ClockOffsetMs is the replica's clock correction at its last
	// heartbeat: the database's clock minus the replica's, in
	// milliseconds (negative: the replica's clock is fast); 0 when it does
	// not measure (xtimer.Options.ClockReference off).
	ClockOffsetMs int64 `json:"clock_offset_ms"`
	// ClockSkewed: the offset is more than a second (EventClockSkew).
	ClockSkewed bool `json:"clock_skewed"`
	// ClockRefused: the offset is beyond the replica's MaxClockSkew: it
	// claims no fire until its clock is back within it.
	ClockRefused bool `json:"clock_refused"`
}

// Clock says how the replica's clock is off, for the Replicas page:
// "in step", or "30.2s fast" for an offset of −30,200 ms.
func (r ReplicaView) Clock() string {
	d := time.Duration(r.ClockOffsetMs) * time.Millisecond
	switch {
	case r.ClockOffsetMs == 0:
		return "in step"
	case d < 0:
		return (-d).String() + " fast"
	}
	return d.String() + " slow"
}

// PreviewView answers the cron preview: the schedule as the form would
// save it, and its next fires.
type PreviewView struct {
	ScheduleView
	Next []time.Time `json:"next"`
}

const recentExecutions = 20

func msTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

func firstLine(s string, max int) string {
	for i, r := range s {
		if r == '\n' || i >= max {
			return s[:i] + "…"
		}
	}
	return s
}

// JitterMs is how long after its run time the fire was planned to start
// (the task's jitter), for the execution page.
func (v ExecutionView) JitterMs() int64 { return v.PlannedAt.Sub(v.RunTime).Milliseconds() }

// executionView turns a row into its view; whole includes output and error.
func executionView(r store.Execution, zone string, whole bool) ExecutionView {
	v := ExecutionView{
		ID: r.ID, App: r.App, Task: r.TaskCode, RunTime: time.UnixMilli(r.RunTime).UTC(), PlannedAt: time.UnixMilli(r.Planned()).UTC(),
		Status: r.Status, Reason: r.Reason, Source: r.Source, Attempt: r.Attempt, MaxAttempts: r.MaxAttempts,
		Replica: r.Replica, RecordedAt: msTime(r.ScheduledMs), StartedAt: msTime(r.StartedMs),
		FinishedAt: msTime(r.FinishedMs), NextAttempt: msTime(r.NextAttemptMs),
		LatenessMs: r.LatenessMs, DurationMs: r.DurationMs, ErrorHead: firstLine(r.Error, 200), HTTPStatus: r.HTTPStatus, Zone: zone,
		Note: r.Note, Shard: r.Shard, Shards: max(r.Shards, 1), Broadcast: r.Broadcast,
	}
	if whole {
		out, errText := r.Output, r.Error
		v.Output, v.Error = &out, &errText
		v.Params = paramsView(r.Params)
	}
	return v
}

// scheduleOf parses a schedule as the engine reads it, with the console's
// defaults for an empty dialect (cron) and zone (UTC), and returns its
// view; the view has no description when the schedule does not parse.
func scheduleOf(spec, dialect, zone string) (xtimer.Schedule, ScheduleView, error) {
	v := ScheduleView{Spec: spec, Dialect: cmp.Or(dialect, string(xtimer.DialectCron)), Zone: cmp.Or(zone, "UTC")}
	sched, err := store.Task{Spec: v.Spec, Dialect: v.Dialect, TimeZone: v.Zone}.Schedule()
	if err != nil {
		return nil, v, err
	}
	v.Description = sched.Describe()
	return sched, v, nil
}

// describe is a schedule's view, described when it parses.
func describe(spec, dialect, zone string) ScheduleView {
	_, v, _ := scheduleOf(spec, dialect, zone)
	return v
}

// nextFires lists up to n fires of sched after now, in UTC, stopping
// before endMs (Unix milliseconds; 0 for no end).
func nextFires(sched xtimer.Schedule, now time.Time, n int, endMs int64) []time.Time {
	var endAt time.Time
	if endMs != 0 {
		endAt = time.UnixMilli(endMs)
	}
	out := xtimer.NextFires(sched, now, n, endAt)
	for i := range out {
		out[i] = out[i].UTC()
	}
	return out
}

// taskView builds the view of one stored task; live are the live replicas
// of its app and last its newest execution, if any.
func (c *console) taskView(t store.Task, live []store.Replica, last *store.Execution, now time.Time, cals calendarDays) TaskView {
	overrides, code := optionsView(t)
	if eff, err := t.WithOptionOverrides(); err == nil {
		t = eff
	}
	spec, dialect, zone := t.Effective()
	v := TaskView{
		App: t.App, Code: t.Code, Name: t.Name, Description: t.Description, Owner: t.Owner, Kind: t.Kind,
		Status: t.Status, Schedule: describe(spec, dialect, zone), CodeSchedule: describe(t.Spec, t.Dialect, t.TimeZone),
		Overridden: t.SpecOverride != nil || t.DialectOverride != nil || t.TZOverride != nil,
		TimeoutMs:  t.TimeoutMs, MaxAttempts: t.MaxAttempts, BackoffBaseMs: t.BackoffBaseMs, BackoffMaxMs: t.BackoffMaxMs,
		Misfire: t.Misfire, MisfireWindowMs: t.MisfireWindowMs, Overlap: t.Overlap, EndAt: msTime(t.EndAtMs),
		MaxRuns: t.MaxRuns, JitterMs: t.JitterMs, Shards: t.Shards, Broadcast: t.Broadcast,
		CreatedAt: time.UnixMilli(t.CreatedMs).UTC(), UpdatedAt: time.UnixMilli(t.UpdatedMs).UTC(),
		Version: t.Version, PauseNote: t.PauseNote, PauseOnFailure: t.PauseAfter, Exclude: excludeDays(t), Calendar: t.Calendar,
	}
	if t.Params != "" {
		v.Params = json.RawMessage(t.Params)
	}
	v.OptionOverrides, v.CodeOptions = overrides, code
	for _, r := range live {
		if t.Kind == store.KindHTTP || slices.Contains(r.Handlers, t.Code) {
			v.Replicas++
		}
	}
	if last != nil {
		lv := executionView(*last, zone, false)
		v.Last = &lv
	}
	sched, err := t.Schedule()
	if err != nil {
		v.ScheduleError = err.Error()
	} else if next := nextFires(cals.excluding(t, sched), now, 1, t.EndAtMs); len(next) == 1 {
		v.NextRun = &next[0]
	}
	switch {
	case last != nil && last.Status == store.StatusRunning:
		v.State = StateRunning
	case t.Status == store.TaskPaused:
		v.State = StatePaused
	case v.ScheduleError != "":
		v.State = StateBadSchedule
	case v.NextRun == nil:
		v.State = StateEnded
	case v.Replicas == 0:
		v.State = StateNoReplica
	default:
		v.State = StateScheduled
	}
	return v
}

// liveReplicas returns the replicas of app alive within the scheduler's
// ReplicaTimeout.
func (c *console) liveReplicas(ctx context.Context, app string, now time.Time) ([]store.Replica, error) {
	return c.st.LiveReplicas(ctx, app, now.Add(-c.sopts.ReplicaTimeout).UnixMilli())
}

// taskViews returns one page of tasks matching f, with their views.
func (c *console) taskViews(ctx context.Context, f store.TaskFilter, after string, limit int) ([]TaskView, string, error) {
	tasks, next, err := c.st.ListTasks(ctx, f, after, limit)
	if err != nil {
		return nil, "", err
	}
	now := c.now()
	live, err := c.liveReplicas(ctx, f.App, now)
	if err != nil {
		return nil, "", err
	}
	codes := make([]string, len(tasks))
	for i, t := range tasks {
		codes[i] = t.Code
	}
	lasts, err := c.st.LastExecutions(ctx, f.App, codes, now.UnixMilli())
	if err != nil {
		return nil, "", err
	}
	cals, err := c.calendarDays(ctx, f.App, tasks...)
	if err != nil {
		return nil, "", err
	}
	var fires []store.FireKey
	for _, e := range lasts {
		if e.Sharded() {
			fires = append(fires, e.Fire())
		}
	}
	sums, err := c.st.FireSummaries(ctx, fires)
	if err != nil {
		return nil, "", err
	}
	out := make([]TaskView, len(tasks))
	for i, t := range tasks {
		var last *store.Execution
		if e, ok := lasts[t.Code]; ok {
			last = &e
		}
		out[i] = c.taskView(t, live, last, now, cals)
		if last != nil {
			if sum, ok := sums[last.Fire()]; ok {
				fv := fireSummaryView(sum)
				out[i].withLastFire(&fv)
			}
		}
	}
	return out, next, nil
}

// taskDetail returns the task page's content, or an error wrapping
// store.ErrNotFound.
func (c *console) taskDetail(ctx context.Context, app, code string) (TaskDetail, error) {
	t, err := c.st.Task(ctx, app, code)
	if err != nil {
		return TaskDetail{}, err
	}
	now := c.now()
	live, err := c.liveReplicas(ctx, app, now)
	if err != nil {
		return TaskDetail{}, err
	}
	recent, _, err := c.st.ListExecutions(ctx, store.ExecutionFilter{App: app, TaskCode: code, ToMs: now.UnixMilli() + 1}, store.Cursor{}, recentExecutions)
	if err != nil {
		return TaskDetail{}, err
	}
	var last *store.Execution
	if len(recent) > 0 {
		last = &recent[0]
	}
	cals, err := c.calendarDays(ctx, app, t)
	if err != nil {
		return TaskDetail{}, err
	}
	d := TaskDetail{Task: c.taskView(t, live, last, now, cals), NextRuns: []time.Time{}, Recent: []ExecutionView{}, Actions: []ActionView{}}
	if sched, schedErr := t.Schedule(); schedErr == nil {
		d.NextRuns = nextFires(cals.excluding(t, sched), now, 10, t.EndAtMs)
	}
	if d.Counts, err = c.st.StatusCounts(ctx, app, code, now.Add(-24*time.Hour).UnixMilli(), now.UnixMilli()+1); err != nil {
		return TaskDetail{}, err
	}
	if d.Days, err = c.dailyViews(ctx, app, code, now); err != nil {
		return TaskDetail{}, err
	}
	lines, err := c.executionLines(ctx, store.ExecutionFilter{App: app, TaskCode: code}, store.Cursor{}, recent, d.Task.Schedule.Zone)
	if err != nil {
		return TaskDetail{}, err
	}
	d.Recent = append(d.Recent, lines...)
	if len(lines) > 0 {
		d.Task.withLastFire(lines[0].Fire) // the line of recent[0]
	}
	actions, err := c.st.Actions(ctx, app, code, 50)
	if err != nil {
		return TaskDetail{}, err
	}
	if t.Kind == store.KindHTTP {
		ht, ok, err := c.httpTask(ctx, app, code)
		if err != nil {
			return TaskDetail{}, err
		}
		if ok {
			d.HTTP = httpTargetView(ht)
		}
	}
	for _, a := range actions {
		d.Actions = append(d.Actions, ActionView{At: time.UnixMilli(a.AtMs).UTC(), Principal: a.Principal, Action: a.Action, Detail: a.Detail})
	}
	return d, nil
}

// executionViews returns one page of executions, a sharded fire as one
// line (fires.go); the cursor is encoded by Cursor.String. A page whose
// rows are all of fires shown on earlier pages is followed by the next
// one, up to emptyPages times, so that a fire with more shards than the
// page size rarely leaves a page blank.
func (c *console) executionViews(ctx context.Context, f store.ExecutionFilter, after store.Cursor, limit int) ([]ExecutionView, store.Cursor, error) {
	for range emptyPages {
		rows, next, err := c.st.ListExecutions(ctx, f, after, limit)
		if err != nil {
			return nil, store.Cursor{}, err
		}
		out, err := c.executionLines(ctx, f, after, rows, "")
		if err != nil || len(out) > 0 || next == (store.Cursor{}) {
			return out, next, err
		}
		after = next
	}
	return []ExecutionView{}, after, nil
}

// emptyPages bounds the pages executionViews reads for one answer.
const emptyPages = 8

// executionDetail returns one execution whole, with its task's zone.
func (c *console) executionDetail(ctx context.Context, id int64) (ExecutionView, error) {
	r, err := c.st.Execution(ctx, id)
	if err != nil {
		return ExecutionView{}, err
	}
	if !principalOf(ctx).SeesApp(r.App) {
		return ExecutionView{}, errOutOfScope(fmt.Sprintf("execution %d", id))
	}
	zone := ""
	if t, taskErr := c.st.Task(ctx, r.App, r.TaskCode); taskErr == nil {
		_, _, zone = t.Effective()
	}
	v := executionView(r, zone, true)
	if v.FireShards, v.Fire, err = c.fireShardViews(ctx, r, zone); err != nil {
		return ExecutionView{}, err
	}
	return v, nil
}

// replicaViews returns every replica row of app, live ones first.
func (c *console) replicaViews(ctx context.Context, app string) ([]ReplicaView, error) {
	now := c.now()
	rows, err := c.st.LiveReplicas(ctx, app, 0)
	if err != nil {
		return nil, err
	}
	cut := now.Add(-c.sopts.ReplicaTimeout).UnixMilli()
	out := make([]ReplicaView, 0, len(rows))
	for _, r := range rows {
		out = append(out, ReplicaView{
			ID: r.ID, Host: r.Host, PID: r.PID, Version: r.Version,
			StartedAt: time.UnixMilli(r.StartedMs).UTC(), HeartbeatAt: time.UnixMilli(r.HeartbeatMs).UTC(),
			Live: r.HeartbeatMs >= cut, Self: app == c.sopts.App && r.ID == c.sopts.InstanceID,
			Handlers: nonNil(r.Handlers), Slots: nonNil(r.Slots),
			ClockOffsetMs: r.ClockOffsetMs, ClockRefused: r.ClockRefused,
			ClockSkewed: time.Duration(max(r.ClockOffsetMs, -r.ClockOffsetMs))*time.Millisecond > engine.ClockSkewAlert,
		})
	}
	slices.SortStableFunc(out, func(a, b ReplicaView) int {
		switch {
		case a.Live == b.Live:
			return 0
		case a.Live:
			return -1
		}
		return 1
	})
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// preview parses a spec as the schedule form does and lists its next n
// fires after now.
func preview(spec, dialect, zone string, n int, now time.Time) (PreviewView, error) {
	sched, v, err := scheduleOf(spec, dialect, zone)
	if err != nil {
		return PreviewView{}, err
	}
	return PreviewView{ScheduleView: v, Next: nextFires(sched, now, n, 0)}, nil
}

// checkDialect refuses a dialect name the schedule form does not offer.
func checkDialect(d string) error {
	switch xtimer.Dialect(d) {
	case "", xtimer.DialectCron, xtimer.DialectQuartz:
		return nil
	}
	return fieldError("dialect", d, fmt.Sprintf("want %q or %q", xtimer.DialectCron, xtimer.DialectQuartz))
}
