package xtimer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/secretbox"
	"github.com/xtimer-go/xtimer/internal/store"
)

// HTTP callback tasks: scheduled work with no code in the calling service.
// An HTTPTask is created, changed, paused and deleted at runtime (Go API,
// admin API, console), stored in xtimer_tasks with kind "http", and picked
// up by every replica within a second. Every replica can run its fires: the
// handler is the built-in HTTP caller, on a pool of its own so that slow
// receivers never starve Go handlers.

// Defaults of HTTP callback tasks and of their Options.
const (
	// DefaultHTTPTimeout bounds one request of an HTTPTask.
	DefaultHTTPTimeout = 30 * time.Second
	// DefaultHTTPTaskConcurrency bounds the requests of one HTTPTask in
	// flight on one replica.
	DefaultHTTPTaskConcurrency = engine.DefaultHTTPTaskConcurrency
	// DefaultHTTPWorkers bounds the callbacks in flight on one replica.
	DefaultHTTPWorkers = 256
	// DefaultHTTPMaxBody caps the request body of an HTTPTarget.
	DefaultHTTPMaxBody = 64 << 10
)

// ErrNotHTTPTask is returned when a call for HTTP callback tasks names a
// task registered in Go code (which comes back on the next deploy).
var ErrNotHTTPTask = errors.New("xtimer: not an HTTP callback task")

// FieldError says which field of an HTTPTask is wrong, with a JSON-style
// path ("target.method", "target.headers[2].name"), so that a form can put
// the message beside the field. Nothing is stored when a call returns one.
// A spec or zone that does not parse is a FieldError ("spec", "zone")
// wrapping the *SpecError.
type FieldError struct {
	Task, Field, Value, Reason string

	err error // the cause, for errors.As (a *SpecError)
}

// Error reads like `xtimer: http task "code": target.method "FETCH": want
// one of GET, POST, PUT, PATCH, DELETE`.
func (e *FieldError) Error() string {
	return fmt.Sprintf("xtimer: http task %q: %s %q: %s", e.Task, e.Field, e.Value, e.Reason)
}

// Unwrap returns the cause, if any.
func (e *FieldError) Unwrap() error { return e.err }

// HTTP methods an HTTPTarget may use.
var httpMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// Headers an HTTP callback carries so that a receiver can dedupe and verify.
const (
	// HeaderExecution is the execution ID: the same on every attempt of a fire.
	HeaderExecution = "X-Xtimer-Execution"
	// HeaderTask is the task code.
	HeaderTask = "X-Xtimer-Task"
	// HeaderScheduledAt is the fire's planned instant, RFC 3339 in UTC with milliseconds.
	HeaderScheduledAt = "X-Xtimer-Scheduled-At"
	// HeaderAttempt is the attempt number, 1 for the first.
	HeaderAttempt = "X-Xtimer-Attempt"
	// HeaderShard and HeaderShards, sent by the calls of a sharded or
	// broadcast task only (HTTPTask.Shards, Broadcast), are the call's
	// shard (0 to shards-1) and the fire's count of shards.
	HeaderShard  = "X-Xtimer-Shard"
	HeaderShards = "X-Xtimer-Shards"
	// HeaderTimestamp is when the request was signed, Unix seconds.
	HeaderTimestamp = "X-Xtimer-Timestamp"
	// HeaderSignature is "v1=" and the hex HMAC-SHA256, keyed with the
	// task's secret, of the timestamp, a '.', and the body.
	//
	// Deprecated: verify HeaderWebhookSignature with
	// executor.VerifyWebhook. HeaderSignature and HeaderTimestamp are still
	// sent, for one more release.
	HeaderSignature = "X-Xtimer-Signature"
)

// Standard Webhooks headers (standardwebhooks.com) a signed HTTP callback
// carries, beside the X-Xtimer-* ones; executor.VerifyWebhook checks them.
// Go canonicalizes header names, so these are how net/http writes them;
// header names are case-insensitive on the wire.
const (
	// HeaderWebhookID is the fire's Run.ID ("app/code/run_ms", and
	// "/shard" for a shard): the same on every attempt, so that receivers
	// deduplicate on it.
	HeaderWebhookID = "Webhook-Id"
	// HeaderWebhookTimestamp is when the request was signed, Unix seconds:
	// the same instant as HeaderTimestamp.
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	// HeaderWebhookSignature is "v1," and the base64 HMAC-SHA256 of the
	// id, a '.', the timestamp, a '.', and the body. The key is the base64
	// decoding of what follows "whsec_" in a secret so prefixed, else the
	// secret's bytes; a "whsec_" secret that is not base64 sends no
	// Standard Webhooks headers. Receivers may get several space-separated
	// signatures; one match verifies.
	HeaderWebhookSignature = "Webhook-Signature"
)

// HTTPTask describes a task whose fires call an HTTP endpoint.
type HTTPTask struct {
	// Code names the task forever, like a registered task's code.
	Code        string
	Name        string
	Description string
	Owner       string
	// Spec, Dialect (DialectCron when empty) and Zone (UTC when empty) are
	// the schedule.
	Spec    string
	Dialect Dialect
	Zone    string
	Target  HTTPTarget
	// Timeout bounds one request, connection to last byte of the response.
	// Defaults to DefaultHTTPTimeout (30s); at most 1 hour.
	Timeout time.Duration
	// MaxAttempts counts the first attempt (1: no retry). Defaults to 1.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the wait between attempts, like
	// WithBackoff. Default 1s and 5m.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxConcurrent bounds the requests of this task in flight on one
	// replica; more wait in order and show as lateness. Defaults to
	// DefaultHTTPTaskConcurrency (16).
	MaxConcurrent int
	// Overlap says what a fire does while an earlier run of the task is
	// still going, as WithOverlap does for a Go task. Defaults to
	// OverlapAllowAll.
	Overlap OverlapPolicy
	// Jitter spreads each fire's start over [0, Jitter) after its nominal
	// instant, as WithJitter does for a Go task. Zero means none.
	Jitter time.Duration
	// PauseOnFailure pauses the task after this many consecutive failed
	// fires, as WithPauseOnFailure does for a Go task: 1-MaxPauseOnFailure,
	// or 0 (the default) for never.
	PauseOnFailure int
	// Shards splits each fire into this many calls, as WithShards does for
	// a Go task, each with the headers X-Xtimer-Shard and X-Xtimer-Shards:
	// 2-MaxShards, or 0 (the default) and 1 for none. Broadcast makes each
	// fire one call per live replica, as WithBroadcast does; not with
	// Shards.
	Shards    int
	Broadcast bool
	// Misfire and MisfireWindow say what happens to fires missed while no
	// replica could run them, as WithMisfire and WithMisfireWindow do for a
	// Go task. Default MisfireRunOnce and DefaultMisfireWindow (1h).
	Misfire       MisfirePolicy
	MisfireWindow time.Duration
	// EndAt stops the schedule, as WithEndAt does: no fire at or after it.
	// Zero, the default, never.
	EndAt time.Time
	// MaxRuns stops the schedule after this many scheduled fires, as
	// WithMaxRuns does (manual runs do not count). 0, the default, no cap.
	MaxRuns int64
	// Paused creates the task paused. Status afterwards is Pause/Resume's.
	Paused bool
	// Exclude are dates, YYYY-MM-DD in Zone, on which the task's fires are
	// skipped, as WithExclude says; at most MaxExcludeDays.
	Exclude []string
	// Calendar names a calendar of the app whose days the fires skip too,
	// as WithCalendar says; "" for none.
	Calendar string
}

// HTTPTarget is the request an HTTP callback task sends. It is stored as
// JSON in the task's row (xtimer_tasks.http_target). Its secrets (secret
// header values and Secret) are encrypted there with Options.SecretKeys,
// each bound to its task and field; without keys they are stored in
// plaintext, as the DSN's password is, so guard the database accordingly.
// Reads through this package (HTTPTask, the console) mask them, and logs
// never show them.
type HTTPTarget struct {
	// Method is GET, POST, PUT, PATCH or DELETE.
	Method string `json:"method"`
	// URL is absolute, http or https.
	URL string `json:"url"`
	// Headers are sent as given, in order; the X-Xtimer-* headers are
	// added after them and may not be set here.
	Headers []HTTPHeader `json:"headers,omitempty"`
	// Body is sent as is; when a Content-Type header says JSON it must be
	// valid JSON. At most Options.HTTPMaxBody bytes.
	Body string `json:"body,omitempty"`
	// SuccessCodes are the statuses that count as success; empty means any
	// 2xx.
	SuccessCodes []int `json:"success_codes,omitempty"`
	// Secret keys the HMAC signatures (HeaderWebhookSignature, and the
	// deprecated HeaderSignature): "whsec_" and a base64 key, as Standard
	// Webhooks libraries expect, or any other string, used as raw key
	// bytes. Empty means Options.HTTPSigningSecret; when both are empty,
	// requests are not signed. Write-only: reads return it masked.
	Secret string `json:"secret,omitempty"`
}

// HTTPHeader is one request header. A Secret header's value is write-only:
// reads return it masked, and logs never show it.
type HTTPHeader struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Secret bool   `json:"secret,omitempty"`
}

// Masked is what reads return in place of a secret value.
const Masked = "••••••"

// httpSpec is what Task.HTTPTarget holds for a task of kind http: the
// target, secrets included (encrypted with Options.SecretKeys, else in
// plaintext; reads through this package mask them), and the task's
// concurrency bound, which has no column of its own.
type httpSpec struct {
	HTTPTarget
	MaxConcurrent int `json:"max_concurrent"`
}

// decodeHTTPSpec reads the stored target of an HTTP task
// (engine.DecodeHTTPSpec) as the root's types.
func decodeHTTPSpec(row store.Task) (*httpSpec, error) {
	sp, err := engine.DecodeHTTPSpec(row)
	if err != nil {
		return nil, err
	}
	headers := make([]HTTPHeader, len(sp.Headers))
	for i, h := range sp.Headers {
		headers[i] = HTTPHeader(h)
	}
	return &httpSpec{HTTPTarget: HTTPTarget{Method: sp.Method, URL: sp.URL, Headers: headers, Body: sp.Body,
		SuccessCodes: sp.SuccessCodes, Secret: sp.Secret}, MaxConcurrent: sp.MaxConcurrent}, nil
}

// CreateHTTPTask stores a new HTTP callback task; every replica adopts it
// within a second and runs its fires. Empty fields take their defaults; a
// wrong one fails with a *FieldError naming it, and nothing is stored. A
// code any task of the app has already, Go or HTTP, fails with
// ErrDuplicateTask.
func (s *Scheduler) CreateHTTPTask(ctx context.Context, t HTTPTask) error {
	row, err := s.httpTaskRow(ctx, t, nil)
	if err != nil {
		return err
	}
	if s.eng.Registered(t.Code) {
		return fmt.Errorf("%w: %q", ErrDuplicateTask, t.Code)
	}
	stored, err := s.store.CreateTask(ctx, row)
	switch {
	case errors.Is(err, store.ErrExists):
		return fmt.Errorf("%w: %q", ErrDuplicateTask, t.Code)
	case err != nil:
		return fmt.Errorf("xtimer: create http task %q: %w", t.Code, err)
	}
	s.eng.Adopt(stored)
	s.log.Info("http task created", "task", t.Code, "method", t.Target.Method, "url", redactedURL(t.Target.URL), "spec", t.Spec)
	return nil
}

// UpdateHTTPTask replaces the definition of an HTTP callback task, on
// every replica within a second, from then on (fires already recorded that
// the new schedule lacks are skipped, reason rescheduled). Its status
// (paused or not) stays, and the schedule it sets replaces any console
// override. Secrets are write-only: a secret header whose value is "" or
// Masked keeps the value stored under the same name, and so does a
// Target.Secret that is "" or Masked (to remove the secret, delete and
// create the task again). Errors as CreateHTTPTask; an unknown code is
// ErrTaskNotFound, a Go task's code ErrNotHTTPTask.
func (s *Scheduler) UpdateHTTPTask(ctx context.Context, t HTTPTask) error {
	for try := 0; ; try++ {
		cur, err := s.storedHTTPTask(ctx, t.Code)
		if err != nil {
			return err
		}
		row, err := s.httpTaskRow(ctx, t, &cur)
		if err != nil {
			return err
		}
		stored, err := s.store.ReplaceTask(ctx, row, cur.Version)
		switch {
		case errors.Is(err, store.ErrStale) && try < maxChangeTries:
			continue // changed in between (a pause, another edit): merge again
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("%w: %q", ErrTaskNotFound, t.Code)
		case err != nil:
			return fmt.Errorf("xtimer: update http task %q: %w", t.Code, err)
		}
		s.eng.Adopt(stored)
		s.log.Info("http task updated", "task", t.Code, "method", t.Target.Method, "url", redactedURL(t.Target.URL), "spec", t.Spec)
		return nil
	}
}

// unregistered reports, as an ErrTaskRegistered, a replica that
// registers the Go task code: this one, or a live one by its heartbeat's
// list of handlers.
func (s *Scheduler) unregistered(ctx context.Context, code string) error {
	if s.eng.Registered(code) {
		return fmt.Errorf("%w: %q by this replica, %s", ErrTaskRegistered, code, s.opts.InstanceID)
	}
	live, err := s.store.LiveReplicas(ctx, s.opts.App, s.clock.Now().Add(-s.opts.ReplicaTimeout).UnixMilli())
	if err != nil {
		return fmt.Errorf("xtimer: delete task %q: read the live replicas: %w", code, err)
	}
	for _, r := range live {
		if slices.Contains(r.Handlers, code) {
			return fmt.Errorf("%w: %q by replica %s", ErrTaskRegistered, code, r.ID)
		}
	}
	return nil
}

// maxChangeTries bounds UpdateHTTPTask's read-merge-write loop.
const maxChangeTries = 5

// ErrTaskRegistered is DeleteTask's answer for a Go task that a live
// replica still registers: it would come back with that replica's next
// start, and its handler runs its fires meanwhile. It is an
// ErrNotHTTPTask, as that answer was before orphaned Go tasks could be
// deleted.
var ErrTaskRegistered = fmt.Errorf("%w: registered in Go code by a live replica", ErrNotHTTPTask)

// DeleteTask deletes a task on every replica within a second: an HTTP
// callback task, or a Go task that no live replica registers any more
// (removed from the code; the console shows it no_replica). Its fires not
// started yet are recorded skipped (reason "task deleted"); attempts
// running finish; its history stays. A Go task that this replica, or a
// replica whose heartbeat is younger than ReplicaTimeout, registers is
// ErrTaskRegistered. An unknown code is ErrTaskNotFound.
//
// A replica that registers the task while it is deleted (between its
// registration and its first heartbeat, a few milliseconds of its Start)
// loses the task until it starts again.
func (s *Scheduler) DeleteTask(ctx context.Context, code string) error {
	row, err := s.store.Task(ctx, s.opts.App, code)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %q", ErrTaskNotFound, code)
	case err != nil:
		return fmt.Errorf("xtimer: delete task %q: %w", code, err)
	}
	if row.Kind != store.KindHTTP {
		if err := s.unregistered(ctx, code); err != nil {
			return err
		}
	}
	if err := s.store.DeleteTask(ctx, s.opts.App, code, row.Kind, engine.ReasonDeleted); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %q", ErrTaskNotFound, code)
		}
		return fmt.Errorf("xtimer: delete task %q: %w", code, err)
	}
	s.eng.Drop(code)
	s.log.Info("task deleted", "task", code, "kind", row.Kind)
	return nil
}

// HTTPTask returns an HTTP callback task as stored, secrets replaced by
// Masked, and its Paused field telling its status.
func (s *Scheduler) HTTPTask(ctx context.Context, code string) (HTTPTask, error) {
	row, err := s.storedHTTPTask(ctx, code)
	if err != nil {
		return HTTPTask{}, err
	}
	sp, err := decodeHTTPSpec(row)
	if err != nil {
		return HTTPTask{}, err
	}
	t := HTTPTask{
		Code: row.Code, Name: row.Name, Description: row.Description, Owner: row.Owner,
		Spec: row.Spec, Dialect: Dialect(row.Dialect), Zone: row.TimeZone, Target: sp.HTTPTarget,
		Timeout: time.Duration(row.TimeoutMs) * time.Millisecond, MaxAttempts: row.MaxAttempts,
		BackoffBase: time.Duration(row.BackoffBaseMs) * time.Millisecond, BackoffMax: time.Duration(row.BackoffMaxMs) * time.Millisecond,
		MaxConcurrent: sp.MaxConcurrent, Overlap: OverlapPolicy(cmp.Or(row.Overlap, string(OverlapAllowAll))),
		Jitter: time.Duration(row.JitterMs) * time.Millisecond, PauseOnFailure: row.PauseAfter, Paused: row.Status == store.TaskPaused,
		Shards: row.Shards, Broadcast: row.Broadcast,
		Exclude: store.SplitDays(row.ExcludeDays), Calendar: row.Calendar,
		Misfire: MisfirePolicy(cmp.Or(row.Misfire, string(MisfireRunOnce))), MaxRuns: row.MaxRuns,
		MisfireWindow: time.Duration(cmp.Or(row.MisfireWindowMs, DefaultMisfireWindow.Milliseconds())) * time.Millisecond,
	}
	if row.EndAtMs != 0 {
		t.EndAt = time.UnixMilli(row.EndAtMs).UTC()
	}
	if row.SpecOverride != nil || row.DialectOverride != nil || row.TZOverride != nil {
		// A console edit of the schedule is the task's schedule now.
		spec, dialect, zone := row.Effective()
		t.Spec, t.Dialect, t.Zone = spec, Dialect(dialect), zone
	}
	t.Target.Headers = slices.Clone(t.Target.Headers)
	for i := range t.Target.Headers {
		if t.Target.Headers[i].Secret {
			t.Target.Headers[i].Value = Masked
		}
	}
	if t.Target.Secret != "" {
		t.Target.Secret = Masked
	}
	return t, nil
}

// storedHTTPTask reads the row of an HTTP task.
func (s *Scheduler) storedHTTPTask(ctx context.Context, code string) (store.Task, error) {
	row, err := s.store.Task(ctx, s.opts.App, code)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Task{}, fmt.Errorf("%w: %q", ErrTaskNotFound, code)
	case err != nil:
		return store.Task{}, fmt.Errorf("xtimer: read task %q: %w", code, err)
	case row.Kind != store.KindHTTP:
		return store.Task{}, fmt.Errorf("%w: %q is registered in Go code", ErrNotHTTPTask, code)
	}
	return row, nil
}

// httpTaskRow validates t, applies its defaults and returns its row. cur
// is the stored row for an update: write-only secrets left "" or Masked
// keep their stored values.
func (s *Scheduler) httpTaskRow(ctx context.Context, t HTTPTask, cur *store.Task) (*store.Task, error) {
	bad := func(field, value, reason string) error {
		return &FieldError{Task: t.Code, Field: field, Value: value, Reason: reason}
	}
	if !validCode(t.Code) {
		return nil, bad("code", t.Code, "want 1-128 characters of lower-case letters, digits and . _ : - starting with a letter or digit")
	}
	if t.Name == "" {
		t.Name = t.Code
	}
	for _, f := range []struct {
		field, value string
		max          int
	}{{"name", t.Name, 255}, {"description", t.Description, 16 << 10}, {"owner", t.Owner, 255}} {
		if reason := textProblem(f.value, f.max); reason != "" {
			return nil, bad(f.field, shorten(f.value), reason)
		}
	}

	// The schedule.
	if t.Dialect == "" {
		t.Dialect = DialectCron
	}
	if t.Dialect != DialectCron && t.Dialect != DialectQuartz {
		return nil, bad("dialect", string(t.Dialect), `want "cron" or "quartz"`)
	}
	if t.Zone == "" {
		t.Zone = "UTC"
	}
	opts := []ScheduleOption{WithDialect(t.Dialect)}
	if t.Zone != "UTC" {
		loc, err := loadZone(t.Zone)
		if err != nil {
			return nil, &FieldError{Task: t.Code, Field: "zone", Value: t.Zone, Reason: specReason(err), err: err}
		}
		opts = append(opts, In(loc))
	}
	if len(t.Spec) > 255 {
		return nil, bad("spec", shorten(t.Spec), "longer than 255 bytes")
	}
	sched, specErr := ParseSchedule(t.Spec, opts...)
	if specErr != nil {
		return nil, &FieldError{Task: t.Code, Field: "spec", Value: t.Spec, Reason: specReason(specErr), err: specErr}
	}

	// The request.
	var old *httpSpec
	if cur != nil {
		var err error
		if old, err = decodeHTTPSpec(*cur); err != nil {
			old = &httpSpec{} // unreadable: nothing to keep
		}
	}
	tg := t.Target
	tg.Method = strings.ToUpper(tg.Method)
	if !slices.Contains(httpMethods, tg.Method) {
		return nil, bad("target.method", t.Target.Method, "want one of "+strings.Join(httpMethods, ", "))
	}
	if tg.URL == "" {
		return nil, bad("target.url", "", "required: an absolute http:// or https:// URL")
	}
	if err := s.caller.CheckURL(ctx, tg.URL); err != nil {
		reason := err.Error()
		var urlErr *executor.URLError
		if errors.As(err, &urlErr) {
			reason = urlErr.Reason // the field error names the URL already
		}
		return nil, &FieldError{Task: t.Code, Field: "target.url", Value: redactedURL(tg.URL), Reason: reason, err: err}
	}
	// A stored secret goes only where it went: an edit that changes the
	// method, scheme, host or port would send the kept secret headers and
	// the signing secret to a receiver of the editor's choosing (and its
	// echo into the execution's output), so such an edit keeps none of
	// them: the secrets it does not send again are cleared.
	moved := old != nil && !sameDestination(old.Method, old.URL, tg.Method, tg.URL)
	tg.Headers = slices.Clone(tg.Headers)
	kept := make([]bool, len(tg.Headers)) // the value is the stored one, as stored (maybe encrypted)
	var cleared []string
	jsonBody := false
	for i, h := range tg.Headers {
		at := fmt.Sprintf("target.headers[%d]", i)
		shown := h.Value
		if h.Secret {
			shown = Masked
		}
		switch {
		case !validHeaderName(h.Name):
			return nil, bad(at+".name", h.Name, "want a header name: letters, digits and !#$%&'*+-.^_`|~, no space, colon or line break")
		case strings.HasPrefix(strings.ToLower(h.Name), "x-xtimer-"):
			return nil, bad(at+".name", h.Name, "X-Xtimer-* headers are set by xtimer on every call")
		case strings.EqualFold(h.Name, HeaderWebhookID), strings.EqualFold(h.Name, HeaderWebhookTimestamp), strings.EqualFold(h.Name, HeaderWebhookSignature):
			return nil, bad(at+".name", h.Name, "webhook-* signature headers are set by xtimer on signed calls")
		case strings.EqualFold(h.Name, "Host"), strings.EqualFold(h.Name, "Content-Length"):
			return nil, bad(at+".name", h.Name, "set from the URL and the body; may not be given")
		case strings.ContainsAny(h.Value, "\r\n\x00"):
			return nil, bad(at+".value", shorten(shown), "contains a line break or a NUL byte")
		case !utf8.ValidString(h.Value):
			return nil, bad(at+".value", shorten(shown), "not valid UTF-8")
		case len(h.Value) > 8<<10:
			return nil, bad(at+".value", shorten(shown), "longer than 8 KiB")
		case h.Secret && secretbox.IsSealed(h.Value):
			return nil, bad(at+".value", shown, fmt.Sprintf("starts with %q, the prefix of encrypted values", secretbox.Prefix))
		}
		if h.Secret && (h.Value == "" || h.Value == Masked) && moved {
			cleared = append(cleared, h.Name)
			continue
		}
		if h.Secret && (h.Value == "" || h.Value == Masked) {
			stored := ""
			if old != nil {
				for _, o := range old.Headers {
					if o.Secret && strings.EqualFold(o.Name, h.Name) {
						stored = o.Value
						break
					}
				}
			}
			if stored == "" {
				return nil, bad(at+".value", shown, "a secret header needs its value (there is no stored one to keep)")
			}
			tg.Headers[i].Value, kept[i] = stored, true
		}
		if strings.EqualFold(h.Name, "Content-Type") && strings.Contains(strings.ToLower(h.Value), "json") {
			jsonBody = true
		}
	}
	if cleared != nil {
		n := 0
		for i, h := range tg.Headers {
			if !(h.Secret && (h.Value == "" || h.Value == Masked)) {
				tg.Headers[n], kept[n] = h, kept[i]
				n++
			}
		}
		tg.Headers, kept = tg.Headers[:n], kept[:n]
	}
	switch {
	case len(tg.Body) > s.opts.HTTPMaxBody:
		return nil, bad("target.body", fmt.Sprintf("%d bytes", len(tg.Body)), fmt.Sprintf("at most %d bytes (Options.HTTPMaxBody)", s.opts.HTTPMaxBody))
	case !utf8.ValidString(tg.Body) || strings.ContainsRune(tg.Body, 0):
		return nil, bad("target.body", shorten(tg.Body), "not valid UTF-8 text (or contains a NUL byte)")
	case jsonBody && tg.Body != "" && !json.Valid([]byte(tg.Body)):
		var v any
		err := json.Unmarshal([]byte(tg.Body), &v)
		return nil, bad("target.body", shorten(tg.Body), fmt.Sprintf("Content-Type says JSON but the body is not: %v", err))
	}
	for i, c := range tg.SuccessCodes {
		if c < 100 || c > 599 {
			return nil, bad(fmt.Sprintf("target.success_codes[%d]", i), fmt.Sprint(c), "want an HTTP status 100-599")
		}
	}
	keptSecret := false
	switch {
	case moved && (tg.Secret == Masked || tg.Secret == ""):
		if old.Secret != "" {
			cleared = append(cleared, "target.secret")
		}
		tg.Secret = ""
	case tg.Secret == Masked || tg.Secret == "" && cur != nil:
		if old == nil || old.Secret == "" {
			if tg.Secret == Masked {
				return nil, bad("target.secret", Masked, "no stored secret to keep: give the secret itself, or leave it empty")
			}
		} else {
			tg.Secret, keptSecret = old.Secret, true
		}
	case !utf8.ValidString(tg.Secret) || strings.ContainsRune(tg.Secret, 0) || len(tg.Secret) > 1024:
		return nil, bad("target.secret", Masked, "want at most 1024 bytes of UTF-8 text without NUL")
	case secretbox.IsSealed(tg.Secret):
		return nil, bad("target.secret", Masked, fmt.Sprintf("starts with %q, the prefix of encrypted values", secretbox.Prefix))
	}
	if err := s.sealSecrets(t.Code, &tg, kept, keptSecret); err != nil {
		return nil, err
	}

	if cleared != nil {
		s.log.Info("http task's stored secrets cleared: its method or destination changed", "task", t.Code,
			"cleared", cleared, "url", redactedURL(tg.URL))
	}

	// The policy.
	switch {
	case t.Timeout == 0:
		t.Timeout = DefaultHTTPTimeout
	case t.Timeout < time.Millisecond || t.Timeout > time.Hour:
		return nil, bad("timeout", t.Timeout.String(), "want 1ms-1h")
	}
	switch {
	case t.MaxAttempts == 0:
		t.MaxAttempts = 1
	case t.MaxAttempts < 1 || t.MaxAttempts > 100:
		return nil, bad("max_attempts", fmt.Sprint(t.MaxAttempts), "want 1-100 (1 means no retry)")
	}
	if t.BackoffBase == 0 {
		t.BackoffBase = DefaultBackoffBase
	}
	if t.BackoffMax == 0 {
		t.BackoffMax = max(DefaultBackoffMax, t.BackoffBase)
	}
	switch {
	case t.BackoffBase < time.Millisecond:
		return nil, bad("backoff_base", t.BackoffBase.String(), "want at least 1ms")
	case t.BackoffMax < t.BackoffBase:
		return nil, bad("backoff_max", t.BackoffMax.String(), fmt.Sprintf("want at least backoff_base %s", t.BackoffBase))
	}
	switch {
	case t.MaxConcurrent == 0:
		t.MaxConcurrent = DefaultHTTPTaskConcurrency
	case t.MaxConcurrent < 1 || t.MaxConcurrent > 1000:
		return nil, bad("max_concurrent", fmt.Sprint(t.MaxConcurrent), "want 1-1000")
	}

	switch t.Overlap {
	case "":
		t.Overlap = OverlapAllowAll
	case OverlapAllowAll, OverlapSkip, OverlapBufferOne, OverlapBufferAll, OverlapCancelOther:
	default:
		return nil, bad("overlap", string(t.Overlap), "want allow, forbid, buffer_one, buffer_all or cancel_other")
	}
	switch t.Misfire {
	case "":
		t.Misfire = MisfireRunOnce
	case MisfireRunOnce, MisfireRunAll, MisfireSkip:
	default:
		return nil, bad("misfire", string(t.Misfire), "want run_once, run_all or skip")
	}
	switch {
	case t.MisfireWindow == 0:
		t.MisfireWindow = DefaultMisfireWindow
	case t.MisfireWindow < time.Second || t.MisfireWindow%time.Millisecond != 0:
		return nil, bad("misfire_window", t.MisfireWindow.String(), "want at least 1s, in whole milliseconds")
	}
	if t.MaxRuns < 0 {
		return nil, bad("max_runs", fmt.Sprint(t.MaxRuns), "want 1 or more, or 0 for no cap")
	}
	var endAtMs int64
	if !t.EndAt.IsZero() {
		if endAtMs = t.EndAt.UnixMilli(); endAtMs <= 0 {
			return nil, bad("end_at", t.EndAt.Format(time.RFC3339), "want an instant after 1970")
		}
	}
	if t.PauseOnFailure < 0 || t.PauseOnFailure > MaxPauseOnFailure {
		return nil, bad("pause_on_failure", fmt.Sprint(t.PauseOnFailure), fmt.Sprintf("want 1-%d consecutive failures, or 0 for never", MaxPauseOnFailure))
	}
	shards := t.Shards
	switch {
	case shards < 0 || shards > MaxShards:
		return nil, bad("shards", fmt.Sprint(t.Shards), fmt.Sprintf("want 2-%d shards, or 0 for none", MaxShards))
	case shards > 1 && t.Broadcast:
		return nil, bad("shards", fmt.Sprint(t.Shards), "a broadcast task has one shard per replica: set shards or broadcast, not both")
	case shards == 1:
		shards = 0
	}

	if t.Jitter != 0 {
		reason := jitterProblem(t.Jitter)
		if reason == "" {
			reason = jitterTooLong(sched, t.Jitter, s.clock.Now())
		}
		if reason != "" {
			return nil, bad("jitter", t.Jitter.String(), reason)
		}
	}

	exclude, err := checkHTTPExclusions(t)
	if err != nil {
		return nil, err
	}
	target, err := json.Marshal(httpSpec{HTTPTarget: tg, MaxConcurrent: t.MaxConcurrent})
	if err != nil {
		return nil, fmt.Errorf("xtimer: http task %q: encode target: %w", t.Code, err)
	}
	js := string(target)
	row := &store.Task{
		App: s.opts.App, Code: t.Code, Name: t.Name, Description: t.Description, Owner: t.Owner,
		Kind: store.KindHTTP, Spec: t.Spec, Dialect: string(t.Dialect), TimeZone: t.Zone,
		TimeoutMs: t.Timeout.Milliseconds(), MaxAttempts: t.MaxAttempts,
		BackoffBaseMs: t.BackoffBase.Milliseconds(), BackoffMaxMs: t.BackoffMax.Milliseconds(),
		Misfire: string(t.Misfire), MisfireWindowMs: t.MisfireWindow.Milliseconds(), Overlap: string(t.Overlap),
		EndAtMs: endAtMs, MaxRuns: t.MaxRuns,
		JitterMs: t.Jitter.Milliseconds(), PauseAfter: t.PauseOnFailure, HTTPTarget: &js,
		Shards: shards, Broadcast: t.Broadcast,
		ExcludeDays: exclude, Calendar: t.Calendar,
	}
	if t.Paused {
		row.Status = store.TaskPaused
	}
	return row, nil
}

// sealSecrets encrypts tg's secrets for storing (Options.SecretKeys;
// internal/engine/secrets.go): the new ones, and the kept ones stored in
// plaintext. A kept value stored encrypted stays as it is: its ciphertext
// is bound to the task and the header's name, which it keeps, and Start
// encrypts it again when its key is no longer the first.
func (s *Scheduler) sealSecrets(code string, tg *HTTPTarget, kept []bool, keptSecret bool) error {
	seal := func(field string, v *string, wasKept bool) error {
		if *v == "" || wasKept && secretbox.IsSealed(*v) {
			return nil
		}
		sealed, err := s.eng.SealSecret(code, field, *v)
		*v = sealed
		return err
	}
	for i := range tg.Headers {
		if h := &tg.Headers[i]; h.Secret {
			if err := seal(engine.HeaderSecretField(h.Name), &h.Value, kept[i]); err != nil {
				return err
			}
		}
	}
	return seal(engine.SigningSecretField, &tg.Secret, keptSecret)
}

// SameDestination reports whether o sends to the same place as t: the
// same method and origin (scheme, host and port, the scheme's default port
// when none is given). An update that changes the destination keeps no
// stored secret it does not send again (UpdateHTTPTask).
func (t HTTPTarget) SameDestination(o HTTPTarget) bool {
	return sameDestination(t.Method, t.URL, o.Method, o.URL)
}

// sameDestination reports whether two requests go to the same place:
// the same method and the same origin (scheme, host and port, the
// scheme's default port when none is given).
func sameDestination(method1, url1, method2, url2 string) bool {
	if !strings.EqualFold(method1, method2) {
		return false
	}
	a, errA := url.Parse(url1)
	b, errB := url.Parse(url2)
	if errA != nil || errB != nil {
		return false
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// specReason is the reason of a *SpecError, or the whole error.
func specReason(err error) string {
	var se *SpecError
	switch {
	case !errors.As(err, &se):
		return err.Error()
	case se.Field != "" && se.Field != "time zone":
		return fmt.Sprintf("%s field %q: %s", se.Field, se.Value, se.Reason)
	}
	return se.Reason
}

// shorten keeps a value quoted in an error readable.
func shorten(v string) string {
	if len(v) <= 64 {
		return v
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + "…"
}

// redactedURL hides a URL's password and query (they may hold tokens)
// for logs and errors.
func redactedURL(raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i] + "?…"
	}
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}
