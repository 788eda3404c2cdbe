package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The views the API returns (admin/model.go), with the fields shown here.
// The CLI keeps its own copies so that it builds without the engine and
// its database drivers.

type scheduleView struct {
	Spec        string `json:"spec"`
	Dialect     string `json:"dialect"`
	Zone        string `json:"zone"`
	Description string `json:"description"`
}

type taskView struct {
	Code         string         `json:"code"`
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	Owner        string         `json:"owner"`
	Kind         string         `json:"kind"`
	Status       string         `json:"status"`
	State        string         `json:"state"`
	PauseNote    string         `json:"pause_note,omitempty"`
	Schedule     scheduleView   `json:"schedule"`
	CodeSchedule scheduleView   `json:"code_schedule"`
	Overridden   bool           `json:"overridden"`
	TimeoutMs    int64          `json:"timeout_ms"`
	MaxAttempts  int            `json:"max_attempts"`
	Misfire      string         `json:"misfire"`
	Overlap      string         `json:"overlap"`
	NextRun      *time.Time     `json:"next_run"`
	Last         *executionView `json:"last"`
	Replicas     int            `json:"replicas"`
}

type executionView struct {
	ID          int64      `json:"id"`
	Task        string     `json:"task"`
	RunTime     time.Time  `json:"run_time"`
	Status      string     `json:"status"`
	Reason      string     `json:"reason"`
	Source      string     `json:"source"`
	Attempt     int        `json:"attempt"`
	MaxAttempts int        `json:"max_attempts"`
	Replica     string     `json:"replica"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	NextAttempt *time.Time `json:"next_attempt"`
	LatenessMs  int64      `json:"lateness_ms"`
	DurationMs  int64      `json:"duration_ms"`
	Output      *string    `json:"output"`
	Error       *string    `json:"error"`
	ErrorHead   string     `json:"error_head"`
	HTTPStatus  int        `json:"http_status"`
	Params      *string    `json:"params"` // a manual run's own parameters
	Note        string     `json:"note"`
}

type taskDetail struct {
	Task     taskView         `json:"task"`
	NextRuns []time.Time      `json:"next_runs"`
	Counts   map[string]int64 `json:"counts_24h"`
	Recent   []executionView  `json:"recent"`
}

type replicaView struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Version     string    `json:"version"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	Live        bool      `json:"live"`
	Handlers    []string  `json:"handlers"`
	Slots       []string  `json:"slots"`
}

type previewView struct {
	scheduleView
	Next []time.Time `json:"next"`
}

type componentHealth struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

type healthView struct {
	OK    bool            `json:"ok"`
	DB    componentHealth `json:"db"`
	Redis componentHealth `json:"redis"`
	Loop  componentHealth `json:"loop"`
}

// pageLimit is how many rows a list asks for per page.
const pageLimit = 500

var commands = map[string]command{
	"tasks": {
		flags: func(fs *flag.FlagSet, c *call) {
			c.flag(fs, "status", "", "active or paused")
			c.flag(fs, "q", "", "text in the code, name, description or owner")
		},
		run: func(ctx context.Context, c *call) error {
			q := url.Values{"limit": {strconv.Itoa(pageLimit)}}
			setIf(q, "status", c.str("status"))
			setIf(q, "q", c.str("q"))
			var all []taskView
			for {
				var page []taskView
				next, err := c.get(ctx, "tasks", q, &page)
				if err != nil {
					return err
				}
				all = append(all, page...)
				if next == "" {
					break
				}
				q.Set("after", next)
			}
			if c.output == "json" {
				return c.json(all)
			}
			t := c.table("CODE", "KIND", "STATUS", "STATE", "SCHEDULE", "ZONE", "NEXT RUN", "LAST")
			for _, v := range all {
				last := "-"
				if v.Last != nil {
					last = v.Last.Status + " " + c.time(&v.Last.RunTime)
				}
				t.row(v.Code, v.Kind, v.Status, v.State, v.Schedule.Spec, v.Schedule.Zone, c.time(v.NextRun), last)
			}
			return t.flush()
		},
	},
	"task": {
		args: []string{"CODE"},
		run: func(ctx context.Context, c *call) error {
			var d taskDetail
			if _, err := c.get(ctx, "tasks/"+url.PathEscape(c.args[0]), nil, &d); err != nil {
				return err
			}
			if c.output == "json" {
				return c.json(d)
			}
			v := d.Task
			schedule := v.Schedule.Spec + " (" + v.Schedule.Dialect + ", " + v.Schedule.Zone + "): " + v.Schedule.Description
			if v.Overridden {
				schedule += "; set by an operator over the code's " + v.CodeSchedule.Spec
			}
			t := c.table("", "")
			t.row("Code", v.Code)
			t.row("Name", v.Name)
			t.row("Owner", dash(v.Owner))
			t.row("Kind", v.Kind)
			t.row("Status", v.Status+" ("+v.State+")")
			t.row("Schedule", schedule)
			t.row("Timeout", (time.Duration(v.TimeoutMs) * time.Millisecond).String())
			t.row("Attempts", strconv.Itoa(v.MaxAttempts))
			t.row("Misfire", v.Misfire)
			t.row("Overlap", v.Overlap)
			t.row("Replicas", strconv.Itoa(v.Replicas))
			var next []string
			for i := range d.NextRuns {
				if i == 5 {
					break
				}
				next = append(next, c.time(&d.NextRuns[i]))
			}
			t.row("Next runs", dash(strings.Join(next, ", ")))
			if err := t.flush(); err != nil {
				return err
			}
			if len(d.Recent) > 0 {
				fmt.Fprintln(c.stdout)
				return c.executionsTable(d.Recent)
			}
			return nil
		},
	},
	"executions": {
		flags: func(fs *flag.FlagSet, c *call) {
			c.flag(fs, "task", "", "the task's code")
			c.flag(fs, "status", "", "scheduled, running, retrying, succeeded, failed, timed_out or skipped")
			c.flag(fs, "since", time.Duration(0), "only those run within this long, such as 1h or 30m")
			c.flag(fs, "follow", false, "keep printing executions as they are recorded or change")
			c.flag(fs, "limit", 50, "how many to list (the newest)")
		},
		run: func(ctx context.Context, c *call) error {
			q := url.Values{}
			setIf(q, "task", c.str("task"))
			setIf(q, "status", c.str("status"))
			since := c.flags("since").(*time.Duration)
			if *since < 0 {
				return usageError(fmt.Sprintf("-since %s: want a positive duration such as 1h", *since))
			}
			if *since > 0 {
				q.Set("from", strconv.FormatInt(time.Now().Add(-*since).UnixMilli(), 10))
			}
			limit := *c.flags("limit").(*int)
			if limit < 1 || limit > 1000 {
				return usageError(fmt.Sprintf("-limit %d: want 1 to 1000", limit))
			}
			q.Set("limit", strconv.Itoa(limit))
			var rows []executionView
			if err := c.getRows(ctx, q, &rows); err != nil {
				return err
			}
			if !*c.flags("follow").(*bool) {
				return c.executionsTable(rows)
			}
			return c.follow(ctx, q, rows)
		},
	},
	"execution": {
		args: []string{"ID"},
		run: func(ctx context.Context, c *call) error {
			id, err := strconv.ParseInt(c.args[0], 10, 64)
			if err != nil || id <= 0 {
				return usageError(fmt.Sprintf("ID %q: want an execution's number, such as 1042", c.args[0]))
			}
			var e executionView
			if _, err := c.get(ctx, "executions/"+c.args[0], nil, &e); err != nil {
				return err
			}
			if c.output == "json" {
				return c.json(e)
			}
			status := e.Status
			if e.Reason != "" {
				status += " (" + e.Reason + ")"
			}
			t := c.table("", "")
			t.row("Execution", strconv.FormatInt(e.ID, 10))
			t.row("Task", e.Task)
			t.row("Run time", c.time(&e.RunTime))
			t.row("Status", status)
			t.row("Source", e.Source)
			if e.Note != "" {
				t.row("Note", e.Note)
			}
			t.row("Attempt", fmt.Sprintf("%d of %d", e.Attempt, e.MaxAttempts))
			t.row("Replica", dash(e.Replica))
			t.row("Started", c.time(e.StartedAt))
			t.row("Finished", c.time(e.FinishedAt))
			if e.NextAttempt != nil {
				t.row("Next attempt", c.time(e.NextAttempt))
			}
			t.row("Lateness", (time.Duration(e.LatenessMs) * time.Millisecond).String())
			t.row("Duration", (time.Duration(e.DurationMs) * time.Millisecond).String())
			if e.HTTPStatus != 0 {
				t.row("HTTP status", strconv.Itoa(e.HTTPStatus))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if e.Error != nil && *e.Error != "" {
				fmt.Fprintf(c.stdout, "\nError:\n%s\n", strings.TrimRight(*e.Error, "\n"))
			}
			if e.Params != nil {
				fmt.Fprintf(c.stdout, "\nParameters:\n%s\n", strings.TrimRight(*e.Params, "\n"))
			}
			if e.Output != nil && *e.Output != "" {
				fmt.Fprintf(c.stdout, "\nOutput:\n%s\n", strings.TrimRight(*e.Output, "\n"))
			}
			return nil
		},
	},
	"pause":    action("pause", "paused"),
	"resume":   action("resume", "resumed"),
	"backfill": backfillCommand,
	"trigger": {
		args: []string{"CODE"},
		flags: func(fs *flag.FlagSet, c *call) {
			c.flag(fs, "params", "", "the run's own parameters: JSON for a Go task, the body of an HTTP task (default the task's)")
			c.flag(fs, "note", "", "why, stored on the execution and in the task's history (at most 1024 bytes)")
		},
		run: func(ctx context.Context, c *call) error {
			body := map[string]string{} // the params go as text (admin.TriggerBody)
			if p := c.str("params"); p != "" {
				body["params"] = p
			}
			if note := c.str("note"); note != "" {
				body["note"] = note
			}
			var e executionView
			if err := c.send(ctx, http.MethodPost, "tasks/"+url.PathEscape(c.args[0])+"/trigger", body, &e); err != nil {
				return err
			}
			if c.output == "json" {
				return c.json(e)
			}
			fmt.Fprintf(c.stdout, "triggered %s: execution %d at %s\n", e.Task, e.ID, c.time(&e.RunTime))
			return nil
		},
	},
	"retry": {
		args: []string{"ID"},
		run: func(ctx context.Context, c *call) error {
			id, err := strconv.ParseInt(c.args[0], 10, 64)
			if err != nil || id <= 0 {
				return usageError(fmt.Sprintf("ID %q: want an execution's number, such as 1042", c.args[0]))
			}
			var e executionView
			if err := c.send(ctx, http.MethodPost, "executions/"+c.args[0]+"/retry", nil, &e); err != nil {
				return err
			}
			if c.output == "json" {
				return c.json(e)
			}
			fmt.Fprintf(c.stdout, "retrying execution %d of %s: attempt %d of %d\n", e.ID, e.Task, e.Attempt+1, e.MaxAttempts)
			return nil
		},
	},
	"schedule": {
		args: []string{"CODE", "SPEC"},
		flags: func(fs *flag.FlagSet, c *call) {
			c.flag(fs, "quartz", false, "read SPEC as a Quartz expression")
		},
		run: func(ctx context.Context, c *call) error {
			body := map[string]string{"spec": c.args[1], "dialect": c.dialect(), "zone": cmp.Or(c.zoneName, "UTC")}
			var d taskDetail
			if err := c.send(ctx, http.MethodPut, "tasks/"+url.PathEscape(c.args[0])+"/schedule", body, &d); err != nil {
				return err
			}
			if c.output == "json" {
				return c.json(d)
			}
			s := d.Task.Schedule
			fmt.Fprintf(c.stdout, "%s now runs %s (%s, %s): %s\n", d.Task.Code, s.Spec, s.Dialect, s.Zone, s.Description)
			return nil
		},
	},
	"preview": {
		args: []string{"SPEC"},
		flags: func(fs *flag.FlagSet, c *call) {
			c.flag(fs, "quartz", false, "read SPEC as a Quartz expression")
			c.flag(fs, "n", 5, "how many fires")
		},
		run: func(ctx context.Context, c *call) error {
			q := url.Values{"spec": {c.args[0]}, "dialect": {c.dialect()}, "n": {strconv.Itoa(*c.flags("n").(*int))}}
			setIf(q, "tz", c.zoneName)
			var p previewView
			if _, err := c.get(ctx, "preview", q, &p); err != nil {
				return err
			}
			if c.output == "json" {
				return c.json(p)
			}
			fmt.Fprintf(c.stdout, "%s (%s, %s): %s\n", p.Spec, p.Dialect, p.Zone, p.Description)
			for i := range p.Next {
				fmt.Fprintln(c.stdout, c.time(&p.Next[i]))
			}
			return nil
		},
	},
	"replicas": {
		run: func(ctx context.Context, c *call) error {
			var rs []replicaView
			if _, err := c.get(ctx, "replicas", nil, &rs); err != nil {
				return err
			}
			if c.output == "json" {
				return c.json(rs)
			}
			t := c.table("ID", "HOST", "PID", "VERSION", "LIVE", "STARTED", "HEARTBEAT", "HANDLERS", "SLOTS")
			for _, r := range rs {
				t.row(r.ID, r.Host, strconv.Itoa(r.PID), dash(r.Version), strconv.FormatBool(r.Live),
					c.time(&r.StartedAt), c.time(&r.HeartbeatAt), strconv.Itoa(len(r.Handlers)), strconv.Itoa(len(r.Slots)))
			}
			return t.flush()
		},
	},
	"health": {
		run: func(ctx context.Context, c *call) error {
			var h healthView
			// 503 carries the same body as 200: read it either way.
			_, err := c.get(ctx, "health", nil, &h)
			if err != nil && !hasStatus(err, http.StatusServiceUnavailable) {
				return err
			}
			if c.output == "json" {
				if jerr := c.json(h); jerr != nil {
					return jerr
				}
			} else {
				t := c.table("COMPONENT", "OK", "DETAIL")
				t.row("db", strconv.FormatBool(h.DB.OK), dash(h.DB.Detail))
				t.row("redis", strconv.FormatBool(h.Redis.OK), dash(h.Redis.Detail))
				t.row("loop", strconv.FormatBool(h.Loop.OK), dash(h.Loop.Detail))
				if ferr := t.flush(); ferr != nil {
					return ferr
				}
			}
			if !h.OK {
				return fmt.Errorf("not healthy")
			}
			return nil
		},
	},
}

// action is a command that POSTs to tasks/CODE/<verb> and says what it did.
func action(verb, done string) command {
	return command{
		args: []string{"CODE"},
		flags: func(fs *flag.FlagSet, c *call) {
			c.flag(fs, "note", "", "why, stored with the task and in its history (at most 1024 bytes)")
		},
		run: func(ctx context.Context, c *call) error {
			var body any // nil sends {}
			if note := c.str("note"); note != "" {
				body = map[string]string{"note": note}
			}
			var d taskDetail
			if err := c.send(ctx, http.MethodPost, "tasks/"+url.PathEscape(c.args[0])+"/"+verb, body, &d); err != nil {
				return err
			}
			if c.output == "json" {
				return c.json(d)
			}
			if d.Task.PauseNote != "" {
				fmt.Fprintf(c.stdout, "%s %s: %s\n", done, d.Task.Code, d.Task.PauseNote)
				return nil
			}
			fmt.Fprintf(c.stdout, "%s %s\n", done, d.Task.Code)
			return nil
		},
	}
}

// follow prints rows (the newest, oldest first), then every poll the
// executions recorded since and those whose status changed, until ctx
// ends.
func (c *call) follow(ctx context.Context, q url.Values, rows []executionView) error {
	seen := map[int64]string{} // id → status printed
	var t *table
	if c.output == "table" {
		t = c.table("ID", "TASK", "RUN TIME", "STATUS", "SOURCE", "ATTEMPT", "REPLICA", "LATENESS", "DURATION")
	}
	show := func(rows []executionView) error {
		for i := len(rows) - 1; i >= 0; i-- { // oldest first, as a log reads
			e := rows[i]
			if seen[e.ID] == e.Status {
				continue
			}
			seen[e.ID] = e.Status
			if t == nil {
				b, err := json.Marshal(e)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.stdout, "%s\n", b)
				continue
			}
			c.executionRow(t, e)
		}
		if t != nil {
			return t.flush()
		}
		return nil
	}
	if err := show(rows); err != nil {
		return err
	}
	tick := time.NewTicker(c.pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // interrupted: following ends here, not in an error
		case <-tick.C:
		}
		if err := c.getRows(ctx, q, &rows); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := show(rows); err != nil {
			return err
		}
	}
}

// getRows reads the newest executions whose run time has come: fires are
// recorded ahead of their run time, and a list of what happened leaves
// out what has not happened yet.
func (c *call) getRows(ctx context.Context, q url.Values, rows *[]executionView) error {
	*rows = nil
	q.Set("to", strconv.FormatInt(time.Now().UnixMilli()+1, 10))
	_, err := c.get(ctx, "executions", q, rows)
	return err
}

// executionsTable writes rows as a table, or as JSON with -o json.
func (c *call) executionsTable(rows []executionView) error {
	if c.output == "json" {
		return c.json(rows)
	}
	t := c.table("ID", "TASK", "RUN TIME", "STATUS", "SOURCE", "ATTEMPT", "REPLICA", "LATENESS", "DURATION")
	for _, e := range rows {
		c.executionRow(t, e)
	}
	return t.flush()
}

func (c *call) executionRow(t *table, e executionView) {
	status := e.Status
	if e.Reason != "" {
		status += " (" + e.Reason + ")"
	}
	lateness, duration := "-", "-"
	if e.StartedAt != nil {
		lateness = (time.Duration(e.LatenessMs) * time.Millisecond).String()
	}
	if e.FinishedAt != nil {
		duration = (time.Duration(e.DurationMs) * time.Millisecond).String()
	}
	t.row(strconv.FormatInt(e.ID, 10), e.Task, c.time(&e.RunTime), status, e.Source,
		fmt.Sprintf("%d/%d", e.Attempt, e.MaxAttempts), dash(e.Replica), lateness, duration)
}

// flag defines one of the command's own flags, kept by name.
func (c *call) flag(fs *flag.FlagSet, name string, value any, help string) {
	switch v := value.(type) {
	case string:
		c.cmdFlags[name] = fs.String(name, v, help)
	case bool:
		c.cmdFlags[name] = fs.Bool(name, v, help)
	case int:
		c.cmdFlags[name] = fs.Int(name, v, help)
	case time.Duration:
		c.cmdFlags[name] = fs.Duration(name, v, help)
	default:
		c.cmdFlags[name] = fs.String(name, fmt.Sprint(v), help)
	}
}

func (c *call) flags(name string) any { return c.cmdFlags[name] }

func (c *call) str(name string) string { return *c.cmdFlags[name].(*string) }

func (c *call) dialect() string {
	if *c.flags("quartz").(*bool) {
		return "quartz"
	}
	return "cron"
}

func setIf(q url.Values, key, value string) {
	if value != "" {
		q.Set(key, value)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
