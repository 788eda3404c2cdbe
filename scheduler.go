package xtimer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/store"
)

// Defaults of Options.
const (
	DefaultApp               = "default"
	DefaultBuckets           = 16
	DefaultWorkers           = 64
	DefaultClaimAhead        = 10 * time.Second
	DefaultCatchUpHorizon    = time.Hour
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultReplicaTimeout    = 30 * time.Second
	DefaultStartTimeout      = 30 * time.Second
	DefaultMaxClockSkew      = 10 * time.Minute
)

// ClockReference says what a replica corrects its clock by
// (Options.ClockReference).
type ClockReference int

// The clock references. The zero value measures against the database.
const (
	// ClockReferenceDatabase: with each heartbeat, and at Start before
	// anything is planned, the replica reads the database's clock and
	// runs on Options.Clock plus the measured offset: it plans, claims,
	// starts and records fires, and measures lateness, in the database's
	// time, so that replicas whose clocks disagree still run each fire
	// once, on time. docs/architecture.md, "Clock reference".
	ClockReferenceDatabase ClockReference = iota
	// ClockReferenceOff runs on Options.Clock as it is: for tests that
	// move a fake clock, and for fleets that trust their NTP.
	ClockReferenceOff
)

// String returns "database" or "off".
func (r ClockReference) String() string {
	switch r {
	case ClockReferenceDatabase:
		return "database"
	case ClockReferenceOff:
		return "off"
	}
	return "ClockReference(" + strconv.Itoa(int(r)) + ")"
}

// Defaults of the retention options.
const (
	DefaultRetention         = 30 * 24 * time.Hour
	DefaultRetentionBatch    = 1000
	DefaultRetentionInterval = time.Minute
)

// Defaults of the alert options.
const (
	DefaultAlertWindow     = 10 * time.Minute
	DefaultAlertLateAfter  = 30 * time.Second
	DefaultAlertMissedRuns = 3
)

// Options configures a Scheduler. Zero fields take the documented defaults;
// out-of-range values fail New with an error naming the field.
type Options struct {
	// DB records tasks and executions: a *gorm.DB on MySQL/MariaDB,
	// PostgreSQL or SQLite. Required. Its tables are created by Start.
	DB *gorm.DB
	// Redis claims slots across replicas. Nil means the in-process lock,
	// which is correct for one process only; Start logs that it is in use.
	Redis redis.UniversalClient
	// Locker replaces the lock built from Redis (another backend, tests).
	// Defaults to NewRedisLocker(Redis), or NewLocalLocker when Redis is nil.
	Locker Locker
	// App namespaces rows and Redis keys, so several services may share one
	// database and one Redis. Defaults to DefaultApp ("default").
	App string
	// Buckets splits each minute's fires into slots that replicas claim
	// independently. Defaults to DefaultBuckets (16); 1-4096.
	Buckets int
	// InstanceID names this replica in rows and logs. Defaults to
	// host-pid-random, unique per process start.
	InstanceID string
	// Version is shown beside this replica in the console. Defaults to "".
	Version string
	// Logger receives state changes at info and the rest at debug.
	// Defaults to slog.Default().
	Logger *slog.Logger
	// Clock is the source of time. Defaults to SystemClock(). It is
	// corrected by the database's clock unless ClockReference is off.
	Clock Clock
	// ClockReference: ClockReferenceDatabase (the zero value, the default,
	// whatever Clock is) corrects Clock by its offset from the database's
	// clock, measured with each heartbeat; an offset above a second raises
	// EventClockSkew. ClockReferenceOff uses Clock as it is (tests with a
	// fake clock).
	ClockReference ClockReference
	// MaxClockSkew: a replica whose clock is further than this from the
	// database's claims no fire (no slot, no orphan fire, no retry) until
	// it is back within it; fires it started finish, and Health and the
	// console say why. Defaults to DefaultMaxClockSkew (10 minutes); at
	// least 1s. Unused with ClockReferenceOff.
	MaxClockSkew time.Duration
	// Workers bounds the handlers running at once on this replica; more
	// wait in run-time order. Defaults to DefaultWorkers (64).
	Workers int
	// ClaimAhead is how long before a minute starts its slots are claimed.
	// Their fires are recorded as time goes, 5s before each (or at the
	// claim, for those of the first seconds, when ClaimAhead is shorter).
	// Defaults to DefaultClaimAhead (10s); 1s-50s.
	ClaimAhead time.Duration
	// CatchUpHorizon is how far back Start looks for slots nobody recorded
	// (every replica was down). Defaults to DefaultCatchUpHorizon (1h).
	CatchUpHorizon time.Duration
	// HeartbeatInterval is how often this replica proves it is alive.
	// Defaults to DefaultHeartbeatInterval (5s).
	HeartbeatInterval time.Duration
	// ReplicaTimeout is how long after its last heartbeat a replica counts
	// as lost: its running executions are settled by the retry policy and
	// its recorded fires run elsewhere. Defaults to DefaultReplicaTimeout
	// (30s); at least 3 heartbeat intervals.
	ReplicaTimeout time.Duration
	// MaxOutput caps the output a handler attaches to its row, and the
	// response body of an HTTP callback stored there. Defaults to
	// DefaultMaxOutput (64 KiB).
	MaxOutput int
	// HTTPWorkers bounds the HTTP callbacks (HTTPTask) in flight on this
	// replica; more wait in run-time order, and the wait shows as lateness.
	// A pool apart from Workers, so that slow receivers never starve Go
	// handlers. Defaults to DefaultHTTPWorkers (256).
	HTTPWorkers int
	// HTTPAllow lists the destinations HTTP callbacks may call: host names,
	// "*.example.com", IPs and CIDRs (see executor.HTTPOptions.Allow).
	// Empty allows any destination but loopback and the forbidden ones
	// (link-local, cloud metadata, unspecified), which are refused even
	// when listed. Loopback (127.0.0.0/8, ::1, localhost) is called only
	// when listed: "127.0.0.1", "::1", "localhost" or a CIDR holding it.
	HTTPAllow []string
	// HTTPSigningSecret keys the signature of HTTP callbacks whose target
	// has no secret of its own, per Standard Webhooks: "whsec_" followed by
	// the key in standard base64 (the form Standard Webhooks libraries
	// generate and read), or any other string, used as the key's raw
	// bytes. Empty (the default) leaves those unsigned. It is never logged.
	HTTPSigningSecret string
	// SecretKeys encrypt the secrets of HTTP tasks at rest (secret header
	// values and HTTPTarget.Secret) with AES-256-GCM, each value bound to
	// its app, task and field and stored with its key's ID: the first key
	// encrypts, every key decrypts, and Start encrypts again under the
	// first key what is stored in plaintext or under another key
	// (ParseSecretKeys reads them from text; docs/configuration.md has
	// rotation). A replica that cannot decrypt a task's secrets refuses its
	// fires (EventSecretUndecryptable) and never sends ciphertext. Empty,
	// the default, stores secrets in plaintext, with a warning logged once.
	SecretKeys []SecretKey
	// HTTPMaxBody caps the request body of an HTTPTarget. Defaults to
	// DefaultHTTPMaxBody (64 KiB); at most 1 MiB.
	HTTPMaxBody int
	// Metrics receives the scheduler's Prometheus collectors (internal/engine/metrics.go),
	// labelled app=App so that several apps may share one registry. Nil,
	// the default, registers nothing: importing xtimer never adds to a
	// service's registry. New fails, naming this field, when registration
	// does (a second Scheduler of the same App on one registry); Stop
	// unregisters them.
	Metrics prometheus.Registerer
	// Retention is how long executions are kept: final executions whose
	// run time is older are deleted by a sweep on one replica at a time
	// (internal/engine/retention.go). Negative keeps them forever. Defaults to
	// DefaultRetention (30 days); at least 1 hour.
	Retention time.Duration
	// RetentionPerTask also caps each task's history: final executions
	// older than the task's RetentionPerTask newest are deleted. Defaults
	// to 0, no cap.
	RetentionPerTask int
	// RetentionBatch is the most rows one DELETE of the sweep removes, in
	// its own short transaction. Defaults to DefaultRetentionBatch (1000);
	// 1-100000.
	RetentionBatch int
	// RetentionInterval is how often the sweep runs. Defaults to
	// DefaultRetentionInterval (1 minute); at least 1 second.
	RetentionInterval time.Duration
	// NoRollups turns off the daily roll-ups that the retention sweep
	// writes (internal/engine/retention.go, internal/store/rollup.go): per task, UTC day and final
	// status, how many executions there were, so that the task page's
	// daily chart outlives the executions. They cost a few rows a task a
	// day. Defaults to false: roll-ups on whenever the sweep runs, that is
	// unless Retention is negative and RetentionPerTask 0.
	NoRollups bool
	// Notifier receives alerts (internal/engine/alert.go, notify.go): executions failed or
	// timed out after their last attempt, fires skipped as misfires or
	// overlaps, attempts late past AlertLateAfter, silent tasks, lost
	// replicas, the slot lock falling back, tasks paused on failure
	// (WithPauseOnFailure). Each is sent by one replica,
	// damped to one per AlertWindow for a kind and task. Nil, the default,
	// sends nothing; NewLogNotifier and NewWebhookNotifier are built in.
	Notifier Notifier
	// AlertWindow damps alerts: after an alert of a kind and task (or
	// replica), the next ones within the window are counted, not sent; the
	// next alert carries the count. Defaults to DefaultAlertWindow (10
	// minutes); at least 1 second.
	AlertWindow time.Duration
	// AlertLateAfter raises EventLate for an attempt starting later than
	// this after it was due. Defaults to DefaultAlertLateAfter (30s);
	// negative raises none.
	AlertLateAfter time.Duration
	// AlertMissedRuns is the dead man's switch: EventSilent when a task's
	// last AlertMissedRuns fires have no success among them. Defaults to
	// DefaultAlertMissedRuns (3); negative turns the switch off; at most
	// 1000.
	AlertMissedRuns int
	// TracerProvider makes one OpenTelemetry span per attempt (internal/engine/trace.go),
	// "xtimer.run <task code>", with the execution ID, task code and the
	// final status as xtimer.* attributes. The handler's ctx carries the
	// span, and HTTP callbacks carry its context to the receiver (see
	// Propagator). Nil, the default, makes no spans and costs nothing per
	// fire. The global otel.GetTracerProvider() is not used unless passed
	// here: a library that starts tracing because a process set a global
	// would surprise more than it helps.
	TracerProvider trace.TracerProvider
	// Propagator writes the span's context into the headers of HTTP
	// callbacks, after the target's own headers. Defaults, when
	// TracerProvider is set, to W3C Trace Context (propagation.TraceContext:
	// traceparent and tracestate); pass otel.GetTextMapPropagator() for the
	// process's own. Unused without TracerProvider.
	Propagator propagation.TextMapPropagator
}

func (o Options) withDefaults() Options {
	if o.App == "" {
		o.App = DefaultApp
	}
	if o.Buckets == 0 {
		o.Buckets = DefaultBuckets
	}
	if o.InstanceID == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		o.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = SystemClock()
	}
	if o.MaxClockSkew == 0 {
		o.MaxClockSkew = DefaultMaxClockSkew
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.ClaimAhead == 0 {
		o.ClaimAhead = DefaultClaimAhead
	}
	if o.CatchUpHorizon == 0 {
		o.CatchUpHorizon = DefaultCatchUpHorizon
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.ReplicaTimeout == 0 {
		o.ReplicaTimeout = max(DefaultReplicaTimeout, 3*o.HeartbeatInterval)
	}
	if o.MaxOutput == 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.HTTPWorkers == 0 {
		o.HTTPWorkers = DefaultHTTPWorkers
	}
	if o.HTTPMaxBody == 0 {
		o.HTTPMaxBody = DefaultHTTPMaxBody
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.RetentionBatch == 0 {
		o.RetentionBatch = DefaultRetentionBatch
	}
	if o.RetentionInterval == 0 {
		o.RetentionInterval = DefaultRetentionInterval
	}
	if o.AlertWindow == 0 {
		o.AlertWindow = DefaultAlertWindow
	}
	if o.AlertLateAfter == 0 {
		o.AlertLateAfter = DefaultAlertLateAfter
	}
	if o.AlertMissedRuns == 0 {
		o.AlertMissedRuns = DefaultAlertMissedRuns
	}
	if o.TracerProvider != nil && o.Propagator == nil {
		o.Propagator = propagation.TraceContext{}
	}
	return o
}

// OptionsError is New's error for a field of Options it refuses.
type OptionsError struct {
	// Field names the field, with the index of an element:
	// "Buckets", "HTTPAllow[2]".
	Field string
	// Value is the refused value as the message shows it: `0`, `"Not An
	// App"`, or its length for a secret.
	Value string
	// Reason says what is wanted: "want 1-4096".
	Reason string

	err error // the cause, when there is one (*executor.AllowError)
}

// Error reads like `xtimer: Options.Buckets = 0: want 1-4096`.
func (e *OptionsError) Error() string {
	return fmt.Sprintf("xtimer: Options.%s = %s: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns the cause, if any.
func (e *OptionsError) Unwrap() error { return e.err }

func (o Options) validate() error {
	bad := func(field string, value any, reason string) error {
		return &OptionsError{Field: field, Value: fmt.Sprint(value), Reason: reason}
	}
	switch {
	case o.DB == nil:
		return bad("DB", nil, "required: a *gorm.DB on MySQL/MariaDB, PostgreSQL or SQLite")
	case !validCode(o.App) || len(o.App) > 64:
		return bad("App", fmt.Sprintf("%q", o.App), "want 1-64 lower-case letters, digits and . _ : - starting with a letter or digit")
	case o.Buckets < 1 || o.Buckets > 4096:
		return bad("Buckets", o.Buckets, "want 1-4096")
	case len(o.InstanceID) > 128:
		return bad("InstanceID", fmt.Sprintf("%q", o.InstanceID), "want at most 128 bytes")
	case o.ClockReference != ClockReferenceDatabase && o.ClockReference != ClockReferenceOff:
		return bad("ClockReference", int(o.ClockReference), "want ClockReferenceDatabase (0) or ClockReferenceOff (1)")
	case o.MaxClockSkew < time.Second:
		return bad("MaxClockSkew", o.MaxClockSkew, "want at least 1s (0 for the default, 10m)")
	case o.Workers < 1:
		return bad("Workers", o.Workers, "want at least 1")
	case o.ClaimAhead < time.Second || o.ClaimAhead > 50*time.Second:
		return bad("ClaimAhead", o.ClaimAhead, "want 1s-50s")
	case o.CatchUpHorizon < time.Minute:
		return bad("CatchUpHorizon", o.CatchUpHorizon, "want at least 1m")
	case o.HeartbeatInterval < 100*time.Millisecond:
		return bad("HeartbeatInterval", o.HeartbeatInterval, "want at least 100ms")
	case o.ReplicaTimeout < 3*o.HeartbeatInterval:
		return bad("ReplicaTimeout", o.ReplicaTimeout, fmt.Sprintf("want at least 3 heartbeat intervals (%s)", 3*o.HeartbeatInterval))
	case o.MaxOutput < 1:
		return bad("MaxOutput", o.MaxOutput, "want at least 1")
	case o.HTTPWorkers < 1:
		return bad("HTTPWorkers", o.HTTPWorkers, "want at least 1")
	case o.HTTPMaxBody < 1 || o.HTTPMaxBody > 1<<20:
		return bad("HTTPMaxBody", o.HTTPMaxBody, "want 1 byte to 1 MiB")
	case o.Retention >= 0 && o.Retention < time.Hour:
		return bad("Retention", o.Retention, "want at least 1h, or negative to keep executions forever")
	case o.RetentionPerTask < 0:
		return bad("RetentionPerTask", o.RetentionPerTask, "want 0 (no cap) or more")
	case o.RetentionBatch < 1 || o.RetentionBatch > 100_000:
		return bad("RetentionBatch", o.RetentionBatch, "want 1-100000")
	case o.RetentionInterval < time.Second:
		return bad("RetentionInterval", o.RetentionInterval, "want at least 1s")
	case o.AlertWindow < time.Second:
		return bad("AlertWindow", o.AlertWindow, "want at least 1s")
	case o.AlertMissedRuns > 1000:
		return bad("AlertMissedRuns", o.AlertMissedRuns, "want at most 1000, or negative to turn the dead man's switch off")
	case len(o.HTTPSigningSecret) > 1024:
		return bad("HTTPSigningSecret", fmt.Sprintf("%d bytes", len(o.HTTPSigningSecret)), "want at most 1024 bytes")
	}
	return checkSecretKeys(o.SecretKeys)
}

// Errors callers can test for with errors.Is.
var (
	// ErrTaskNotFound: no task with that code in this app.
	ErrTaskNotFound = engine.ErrTaskNotFound
	// ErrDuplicateTask: the code is already registered in this process.
	ErrDuplicateTask = engine.ErrDuplicateTask
	// ErrNotStarted: the call needs a started scheduler.
	ErrNotStarted = engine.ErrNotStarted
	// ErrStopped: the scheduler was stopped; make a new one.
	ErrStopped = engine.ErrStopped
)

// Scheduler runs registered tasks on this replica, together with every
// other replica of the same App. It is the public face of the engine
// (internal/engine), which it builds from Options and wires; see
// docs/architecture.md, "How a fire runs".
type Scheduler struct {
	opts   Options
	store  *store.Store
	log    *slog.Logger
	caller *executor.HTTPCaller // checks the URLs of HTTP tasks; the engine calls them
	eng    *engine.Engine
	// clock is the engine's: Options.Clock corrected by the database's
	// (Options.ClockReference), or Options.Clock with it off.
	clock Clock

	// The options that tasks registered alike share (Register), by their
	// options but the spec, then by spec; and the last ones used, which a
	// loop registering tasks alike finds without hashing its options.
	regMu       sync.Mutex
	regOpts     map[regKey]map[string]*regOpts
	lastRegKey  regKey
	lastRegSpec string
	lastRegOpts *regOpts
}

// New returns a Scheduler; nothing runs until Start.
func New(opts Options) (*Scheduler, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	caller, err := executor.NewHTTPCaller(executor.HTTPOptions{Allow: opts.HTTPAllow, MaxResponse: opts.MaxOutput,
		Propagator: engine.CallbackPropagator(opts.TracerProvider, opts.Propagator)})
	var allowErr *executor.AllowError
	switch {
	case errors.As(err, &allowErr):
		return nil, &OptionsError{Field: fmt.Sprintf("HTTPAllow[%d]", allowErr.Index), Value: strconv.Quote(allowErr.Entry), Reason: allowErr.Reason, err: err}
	case err != nil:
		return nil, err
	}
	keys, err := keyring(opts.SecretKeys)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{opts: opts, caller: caller, regOpts: map[regKey]map[string]*regOpts{}, log: opts.Logger.With("app", opts.App, "replica", opts.InstanceID)}
	// The engine and the store go by one clock: the database's time when
	// the replica measures against it.
	s.clock = opts.Clock
	var ref *engine.RefClock
	if opts.ClockReference == ClockReferenceDatabase {
		ref = engine.NewRefClock(opts.Clock)
		s.clock = ref
	}
	s.store = store.New(opts.DB, store.WithNow(s.clock.Now), store.WithRollups(!opts.NoRollups), store.WithLogger(s.log))
	var locker Locker
	mode := "redis"
	switch {
	case opts.Locker != nil:
		locker = opts.Locker
	case opts.Redis != nil:
		locker = NewRedisLocker(opts.Redis)
	default:
		locker = NewLocalLocker(opts.Clock)
		mode = "in-process (one process only: start a second replica only with Options.Redis)"
	}
	var notify engine.Notify
	if n := opts.Notifier; n != nil {
		notify = func(ctx context.Context, e engine.Event) error { return n.Notify(ctx, Event(e)) }
	}
	s.eng, err = engine.New(engine.Config{
		App: opts.App, Buckets: opts.Buckets, InstanceID: opts.InstanceID, Version: opts.Version,
		Workers: opts.Workers, ClaimAhead: opts.ClaimAhead, CatchUpHorizon: opts.CatchUpHorizon,
		HeartbeatInterval: opts.HeartbeatInterval, ReplicaTimeout: opts.ReplicaTimeout,
		MaxOutput: opts.MaxOutput, HTTPWorkers: opts.HTTPWorkers, HTTPSigningSecret: opts.HTTPSigningSecret,
		Retention: opts.Retention, RetentionPerTask: opts.RetentionPerTask, RetentionBatch: opts.RetentionBatch,
		RetentionInterval: opts.RetentionInterval, NoRollups: opts.NoRollups,
		AlertWindow: opts.AlertWindow, AlertLateAfter: opts.AlertLateAfter, AlertMissedRuns: opts.AlertMissedRuns,
		Metrics: opts.Metrics, TracerProvider: opts.TracerProvider, Propagator: opts.Propagator,
		MaxClockSkew: opts.MaxClockSkew, RedisTime: redisTime(opts.Redis),
		Store: s.store, Clock: s.clock, Reference: ref, Locker: locker, LockMode: mode,
		Logger: s.log,
		Caller: caller, Invoke: invoke, Notifier: notify, SecretKeys: keys,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// redisTime reads Redis's clock for the clock reference's cross-check; nil
// without Redis.
func redisTime(rdb redis.UniversalClient) func(context.Context) (time.Time, error) {
	if rdb == nil {
		return nil
	}
	return func(ctx context.Context) (time.Time, error) { return rdb.Time(ctx).Result() }
}

// invoke runs a Go task's handler for one attempt of the engine.
func invoke(ctx context.Context, h any, a *engine.Attempt) error {
	return h.(Handler)(ctx, &Run{
		ID: a.ID, ExecutionID: a.ExecutionID, Code: a.Code, ScheduledAt: a.ScheduledAt, Shard: a.Shard, Shards: max(a.Shards, 1),
		Attempt: a.Attempt, MaxAttempts: a.MaxAttempts, Source: Source(a.Source), Replica: a.Replica,
		Params: a.Params, out: a.Out,
	})
}

// InstanceID returns the name of this replica.
func (s *Scheduler) InstanceID() string { return s.opts.InstanceID }

// Now returns the current instant as the scheduler goes by it:
// Options.Clock corrected by its offset from the database's clock
// (Options.ClockReference), or Options.Clock as it is with it off.
func (s *Scheduler) Now() time.Time { return s.clock.Now() }

// App returns the scheduler's namespace.
func (s *Scheduler) App() string { return s.opts.App }

// Register adds a task. Its code is stable forever (history hangs on it);
// spec is read by ParseSchedule with the task's dialect and zone. The
// definition is written to the database at Start, or at once when the
// scheduler runs already; pause state and console overrides stored there
// win over the code's defaults until reset.
func (s *Scheduler) Register(code, spec string, h Handler, opts ...TaskOption) error {
	cfg := newTaskConfig(code, spec, h)
	if len(opts) > 0 {
		var err error
		if cfg, err = applyOptions(cfg, opts); err != nil {
			return err
		}
	}
	// Keyed by the options but the spec, then by the spec: tasks that
	// each fire at their own time share the options' key once, not once
	// per spec.
	key := regKey{cfg.taskOpts, cfg.name == code}
	key.spec = ""
	if key.nameIsCode {
		key.name = ""
	}
	s.regMu.Lock()
	shared := s.lastRegOpts // a loop registering tasks alike: no hashing of the options
	if shared == nil || s.lastRegSpec != cfg.spec || s.lastRegKey != key {
		shared = s.regOpts[key][cfg.spec]
	}
	s.regMu.Unlock()
	// The clock only for options not seen yet (the jitter's check): a
	// clock read per task added up over a million Registers.
	var now time.Time
	if shared == nil {
		now = s.clock.Now()
	}
	sched, err := cfg.validate(shared, now)
	if err != nil {
		return err
	}
	s.regMu.Lock()
	if shared == nil {
		bySpec := s.regOpts[key]
		if bySpec == nil {
			bySpec = map[string]*regOpts{}
			s.regOpts[key] = bySpec
		}
		if shared = bySpec[cfg.spec]; shared == nil {
			def := cfg.definition()
			shared = &regOpts{Shared: engine.Shared{Name: key.name, Sched: sched, Def: &def, EndAt: key.endAt}}
			bySpec[cfg.spec] = shared
		}
	}
	s.lastRegKey, s.lastRegSpec, s.lastRegOpts = key, cfg.spec, shared
	s.regMu.Unlock()
	return s.eng.Register(code, h, &shared.Shared)
}

// applyOptions is c with opts applied. Apart from Register, so that the
// options' pointer to the config, which moves it to the heap, costs
// nothing to the Registers without options: a config is hundreds of
// bytes, garbage a million times over.
func applyOptions(c taskConfig, opts []TaskOption) (taskConfig, error) {
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&c); err != nil {
			return c, &taskError{c.code, err}
		}
	}
	return c, nil
}

// Start creates the tables, records the registered tasks, catches up what
// every replica missed while down, and starts the loop. It returns once
// the loop runs. The database may arrive late: Start retries with back-off
// until ctx ends (DefaultStartTimeout when ctx has no deadline) and then
// returns the last error.
func (s *Scheduler) Start(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	return s.eng.Start(ctx)
}

// Stop stops claiming slots, hands the fires this replica recorded but has
// not started to the other replicas, lets running handlers finish until ctx
// ends (then cancels their contexts), writes the last status updates and
// releases its locks. A stopped Scheduler cannot start again.
func (s *Scheduler) Stop(ctx context.Context) error { return s.eng.Stop(ctx) }

// Pause stops a task's fires on every replica within a second, including
// fires already recorded (they are recorded skipped, reason paused). The
// pause is stored and survives restarts and redeploys until Resume. It is
// PauseWith without a note (it clears the one stored).
func (s *Scheduler) Pause(ctx context.Context, code string) error {
	return s.PauseWith(ctx, code, PauseOptions{})
}

// Resume undoes Pause. Fires missed while paused are not run; those from
// the resume on do, in the minutes already planned too. It is ResumeWith
// without a note.
func (s *Scheduler) Resume(ctx context.Context, code string) error {
	return s.ResumeWith(ctx, code, PauseOptions{})
}

func (s *Scheduler) setStatus(ctx context.Context, code, status, note string) error {
	return s.eng.ChangeTask(ctx, code, "set status "+status, func(ctx context.Context) error {
		return s.store.SetTaskStatusNote(ctx, s.opts.App, code, status, note)
	})
}

// SetSchedule overrides the schedule of a task from outside its code, as
// the admin console's edit does: spec in dialect (DialectCron when empty)
// in zone (UTC when empty). The override is stored, wins over the
// code-defined schedule on every replica within a second, and survives
// redeploys until ResetSchedule. It applies from then on, although fires
// are recorded ahead: those of the old schedule that the new one lacks are
// recorded skipped (reason "rescheduled"), and those of the new one in the
// minutes already planned are recorded and run, once across the replicas.
// A spec that does not parse is refused with a *SpecError naming the
// field; nothing is stored.
func (s *Scheduler) SetSchedule(ctx context.Context, code, spec string, dialect Dialect, zone string) error {
	if dialect == "" {
		dialect = DialectCron
	}
	if zone == "" {
		zone = "UTC"
	}
	opts := []ScheduleOption{WithDialect(dialect)}
	if zone != "UTC" {
		loc, err := loadZone(zone)
		if err != nil {
			return fmt.Errorf("xtimer: set schedule of %q: %w", code, err)
		}
		opts = append(opts, In(loc))
	}
	if _, err := ParseSchedule(spec, opts...); err != nil {
		return fmt.Errorf("xtimer: set schedule of %q: %w", code, err)
	}
	if len(spec) > 255 {
		return fmt.Errorf("xtimer: set schedule of %q: %w", code, &SpecError{Field: "spec", Value: spec, Reason: "longer than 255 bytes"})
	}
	o := store.Override{Spec: spec, Dialect: string(dialect), TimeZone: zone}
	return s.eng.ChangeTask(ctx, code, "set schedule", func(ctx context.Context) error {
		return s.store.SetOverride(ctx, s.opts.App, code, o)
	})
}

// ResetSchedule removes the override SetSchedule stored: the schedule the
// code registers applies again, on every replica within a second, from then
// on, as an edit does.
func (s *Scheduler) ResetSchedule(ctx context.Context, code string) error {
	return s.eng.ChangeTask(ctx, code, "reset schedule", func(ctx context.Context) error {
		return s.store.ResetOverride(ctx, s.opts.App, code)
	})
}

// Trigger records a manual run of a task now (source manual) and returns
// its execution. It runs here when this replica has the handler, otherwise
// on a replica that has it, within a second. It is TriggerWith with no
// options: the run gets the task's parameters.
func (s *Scheduler) Trigger(ctx context.Context, code string) (Execution, error) {
	return s.TriggerWith(ctx, code, TriggerOptions{})
}

// NextRuns returns the next n fire times of a task (1-1000) after now, in
// its zone, as its stored schedule (console overrides included) says.
func (s *Scheduler) NextRuns(code string, n int) ([]time.Time, error) {
	if n < 1 || n > 1000 {
		return nil, fmt.Errorf("xtimer: NextRuns(%q, %d): n must be 1-1000", code, n)
	}
	sched, endAt, ok := s.eng.ScheduleOf(code)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrTaskNotFound, code)
	}
	return NextFires(sched, s.clock.Now(), n, endAt), nil
}

// Execution returns one execution by its ID.
func (s *Scheduler) Execution(ctx context.Context, id int64) (Execution, error) {
	row, err := s.store.Execution(ctx, id)
	if err != nil {
		return Execution{}, fmt.Errorf("xtimer: read execution %d: %w", id, err)
	}
	return toExecution(row, s.eng.Zone(row.TaskCode)), nil
}

// Options returns the options the scheduler runs with, defaults filled in.
func (s *Scheduler) Options() Options { return s.opts }

func toExecution(r store.Execution, loc *time.Location) Execution {
	at := func(ms int64) time.Time {
		if ms == 0 {
			return time.Time{}
		}
		return time.UnixMilli(ms).In(loc)
	}
	return Execution{
		ID: r.ID, App: r.App, Code: r.TaskCode, RunTime: at(r.RunTime), PlannedAt: at(r.Planned()),
		Status: Status(r.Status), Reason: r.Reason, Source: Source(r.Source),
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Replica: r.Replica,
		Shard: r.Shard, Shards: max(r.Shards, 1), Broadcast: r.Broadcast,
		StartedAt: at(r.StartedMs), FinishedAt: at(r.FinishedMs),
		Lateness: time.Duration(r.LatenessMs) * time.Millisecond, Duration: time.Duration(r.DurationMs) * time.Millisecond,
		NextAttempt: at(r.NextAttemptMs), Output: r.Output, Error: r.Error,
		Params: string(r.Params), Note: r.Note,
	}
}

// clockTimers is how many timers of the injected clock the running
// components keep armed while they wait: what a test moving a fake clock
// waits for (internal/startstop).
func (s *Scheduler) clockTimers() int { return s.eng.ClockTimers() }
