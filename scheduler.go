package xtimer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/startstop"
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
	// Clock is the source of time. Defaults to SystemClock().
	Clock Clock
	// Workers bounds the handlers running at once on this replica; more
	// wait in run-time order. Defaults to DefaultWorkers (64).
	Workers int
	// ClaimAhead is how long before a minute starts its slots are claimed
	// and its fires recorded. Defaults to DefaultClaimAhead (10s); 1s-50s.
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
	// Empty allows any destination but the forbidden ones (link-local,
	// cloud metadata, unspecified), which are refused even when listed.
	HTTPAllow []string
	// HTTPSigningSecret keys the signature of HTTP callbacks whose target
	// has no secret of its own. Empty (the default) leaves those unsigned.
	// It is never logged.
	HTTPSigningSecret string
	// HTTPMaxBody caps the request body of an HTTPTarget. Defaults to
	// DefaultHTTPMaxBody (64 KiB); at most 1 MiB.
	HTTPMaxBody int
	// Metrics receives the scheduler's Prometheus collectors (metrics.go),
	// labelled app=App so that several apps may share one registry. Nil,
	// the default, registers nothing: importing xtimer never adds to a
	// service's registry. New fails, naming this field, when registration
	// does (a second Scheduler of the same App on one registry); Stop
	// unregisters them.
	Metrics prometheus.Registerer
	// Retention is how long executions are kept: final executions whose
	// run time is older are deleted by a sweep on one replica at a time
	// (retention.go). Negative keeps them forever. Defaults to
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
	// writes (retention.go, internal/store/rollup.go): per task, UTC day and final
	// status, how many executions there were, so that the task page's
	// daily chart outlives the executions. They cost a few rows a task a
	// day. Defaults to false: roll-ups on whenever the sweep runs, that is
	// unless Retention is negative and RetentionPerTask 0.
	NoRollups bool
	// Notifier receives alerts (alert.go, notify.go): executions failed or
	// timed out after their last attempt, fires skipped as misfires or
	// overlaps, attempts late past AlertLateAfter, silent tasks, lost
	// replicas, the slot lock falling back. Each is sent by one replica,
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
	// TracerProvider makes one OpenTelemetry span per attempt (trace.go),
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
	return nil
}

// Errors callers can test for with errors.Is.
var (
	// ErrTaskNotFound: no task with that code in this app.
	ErrTaskNotFound = errors.New("xtimer: task not found")
	// ErrDuplicateTask: the code is already registered in this process.
	ErrDuplicateTask = errors.New("xtimer: task already registered")
	// ErrNotStarted: the call needs a started scheduler.
	ErrNotStarted = errors.New("xtimer: scheduler not started")
	// ErrStopped: the scheduler was stopped; make a new one.
	ErrStopped = errors.New("xtimer: scheduler stopped")
)

// Scheduler runs registered tasks on this replica, together with every
// other replica of the same App. See docs/architecture.md, "How a fire
// runs".
type Scheduler struct {
	opts   Options
	store  *store.Store
	locker Locker
	clock  Clock
	log    *slog.Logger
	pool   *executor.Pool
	// HTTP callbacks: their own pool, and in front of it one FIFO per task
	// bounding the task's requests in flight (httprun.go).
	httpPool   *executor.Pool
	caller     *executor.HTTPCaller
	httpQueues httpQueues

	// mu guards the lifecycle (state); each component's fields are
	// guarded by that component's own lock. Lock order where one holds
	// two: view, then planner, then dispatcher; the lock keeper's, the
	// status writer's, the alerter's and the HTTP queues' are leaves.
	mu    sync.Mutex
	state int // stateNew, stateRunning, stateStopped

	view       view           // the registry and view of tasks (view.go)
	planner    *planner       // the tick loop (loop.go)
	dispatcher *dispatcher    // the armed and claimed fires (fire.go)
	stopped    chan struct{}  // closed when the first Stop has finished
	attempts   sync.WaitGroup // handlers

	keeper        *lockKeeper // the slot-lock keeper (slotlock.go)
	retention     *retention  // the retention sweeper (retention.go)
	handlerCtx    context.Context
	cancelHandler context.CancelFunc

	updates *statusWriter // the status writer (status.go)
	metrics *metrics      // nil without Options.Metrics
	tracer  trace.Tracer  // nil without Options.TracerProvider (trace.go)
	alerts  *alerter      // nil without Options.Notifier (alert.go)
	health  healthState   // health.go
}

const (
	stateNew = iota
	stateRunning
	stateStopped
)

// New returns a Scheduler; nothing runs until Start.
func New(opts Options) (*Scheduler, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	caller, err := executor.NewHTTPCaller(executor.HTTPOptions{Allow: opts.HTTPAllow, MaxResponse: opts.MaxOutput, Propagator: callbackPropagator(opts)})
	var allowErr *executor.AllowError
	switch {
	case errors.As(err, &allowErr):
		return nil, &OptionsError{Field: fmt.Sprintf("HTTPAllow[%d]", allowErr.Index), Value: strconv.Quote(allowErr.Entry), Reason: allowErr.Reason, err: err}
	case err != nil:
		return nil, err
	}
	s := &Scheduler{
		opts:     opts,
		clock:    opts.Clock,
		log:      opts.Logger.With("app", opts.App, "replica", opts.InstanceID),
		pool:     executor.NewPool(opts.Workers),
		httpPool: executor.NewPool(opts.HTTPWorkers),
		caller:   caller,
		tracer:   newTracer(opts),
	}
	s.store = store.New(opts.DB, store.WithNow(s.clock.Now), store.WithRollups(!opts.NoRollups))
	s.view.init(s)
	switch {
	case opts.Locker != nil:
		s.locker = opts.Locker
	case opts.Redis != nil:
		s.locker = NewRedisLocker(opts.Redis)
	default:
		s.locker = NewLocalLocker(s.clock)
	}
	s.pool.OnDone(func() { s.dispatcher.poke() })
	if s.metrics, err = newMetrics(opts.Metrics, opts.App); err != nil {
		return nil, err
	}
	s.alerts = newAlerter(s)
	s.updates = newStatusWriter(s)
	s.dispatcher = newDispatcher(s)
	s.keeper = newLockKeeper(s)
	s.planner = newPlanner(s)
	s.view.slots = s.planner
	s.retention = newRetention(s)
	return s, nil
}

// InstanceID returns the name of this replica.
func (s *Scheduler) InstanceID() string { return s.opts.InstanceID }

// App returns the scheduler's namespace.
func (s *Scheduler) App() string { return s.opts.App }

// Register adds a task. Its code is stable forever (history hangs on it);
// spec is read by ParseSchedule with the task's dialect and zone. The
// definition is written to the database at Start, or at once when the
// scheduler runs already; pause state and console overrides stored there
// win over the code's defaults until reset.
func (s *Scheduler) Register(code, spec string, h Handler, opts ...TaskOption) error {
	cfg := newTaskConfig(code, spec, h)
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&cfg); err != nil {
			return &taskError{code, err}
		}
	}
	key := regKey{cfg.taskOpts, cfg.name == code}
	if key.nameIsCode {
		key.name = ""
	}
	s.view.mu.Lock()
	shared := s.view.lastRegOpts // a loop registering tasks alike: no hashing of the options
	if shared == nil || s.view.lastRegKey != key {
		shared = s.view.regOpts[key]
	}
	s.view.mu.Unlock()
	sched, err := cfg.validate(shared)
	if err != nil {
		return err
	}
	// The lifecycle and the view together: a Register racing Start or
	// Stop is either recorded by Start or recorded here.
	s.mu.Lock()
	if s.state == stateStopped {
		s.mu.Unlock()
		return ErrStopped
	}
	started := s.state == stateRunning
	s.view.mu.Lock()
	unlock := func() { s.view.mu.Unlock(); s.mu.Unlock() }
	if t := s.view.others[code]; t != nil && t.kind() == store.KindHTTP {
		unlock()
		return fmt.Errorf("%w: %q", ErrDuplicateTask, code)
	}
	if shared == nil {
		if shared = s.view.regOpts[key]; shared == nil {
			def := cfg.definition()
			shared = &regOpts{taskOpts: key.taskOpts, nameIsCode: key.nameIsCode, sched: sched, def: &def}
			s.view.regOpts[key] = shared
		}
	}
	s.view.lastRegKey, s.view.lastRegOpts = key, shared
	reg := &registration{code: code, handler: h, opts: shared}
	if t := s.view.others[code]; t != nil { // another replica's task until now
		reg.state = t
		delete(s.view.others, code)
	}
	// One map operation, not a lookup and then an insert: a code already
	// there leaves the map's length as it was.
	n := len(s.view.handlers)
	s.view.handlers[code] = reg
	if len(s.view.handlers) == n {
		for _, first := range s.view.regOrder { // put the first registration back: an error, rare
			if first.code == code {
				s.view.handlers[code] = first
				break
			}
		}
		unlock()
		return fmt.Errorf("%w: %q", ErrDuplicateTask, code)
	}
	s.view.regOrder = append(s.view.regOrder, reg)
	s.view.codesGen++
	s.view.handlersGen++
	unlock()
	if !started {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.upsertTask(ctx, reg); err != nil {
		s.view.mu.Lock()
		if reg.state != nil {
			s.view.others[code] = reg.state
		}
		delete(s.view.handlers, code)
		if i := slices.Index(s.view.regOrder, reg); i >= 0 {
			s.view.regOrder = slices.Delete(s.view.regOrder, i, i+1)
		}
		s.view.codesGen++
		s.view.handlersGen++
		s.view.mu.Unlock()
		if errors.Is(err, store.ErrExists) {
			return fmt.Errorf("%w: %q is an HTTP task", ErrDuplicateTask, code)
		}
		return err
	}
	return nil
}

func (s *Scheduler) upsertTask(ctx context.Context, r *registration) error {
	stored, err := s.store.UpsertTask(ctx, s.taskRow(r))
	if err != nil {
		return fmt.Errorf("xtimer: record task %q: %w", r.code, err)
	}
	s.view.adoptTask(stored)
	return nil
}

func (s *Scheduler) taskRow(r *registration) *store.Task {
	row := store.TaskFrom(s.opts.App, store.TaskDef{Code: r.code, Name: r.name(), Def: r.opts.def}, store.TaskHead{})
	return &row
}

// Start creates the tables, records the registered tasks, catches up what
// every replica missed while down, and starts the loop. It returns once
// the loop runs. The database may arrive late: Start retries with back-off
// until ctx ends (DefaultStartTimeout when ctx has no deadline) and then
// returns the last error.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	switch s.state {
	case stateRunning:
		s.mu.Unlock()
		return errors.New("xtimer: scheduler already started")
	case stateStopped:
		s.mu.Unlock()
		return ErrStopped
	}
	s.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	if err := s.retryStart(ctx, "create tables", s.store.Migrate); err != nil {
		return err
	}
	if err := s.retryStart(ctx, "record tasks", s.view.registerAll); err != nil {
		return err
	}
	if err := s.retryStart(ctx, "load tasks", s.view.syncTasks); err != nil {
		return err
	}
	if err := s.retryStart(ctx, "read recent run times", s.planner.seedRunTime); err != nil {
		return err
	}
	now := s.clock.Now()
	if err := s.retryStart(ctx, "heartbeat", func(ctx context.Context) error { return s.planner.heartbeat(ctx, now) }); err != nil {
		return err
	}
	if err := s.retryStart(ctx, "find missed slots", func(ctx context.Context) error { return s.planner.findMissedSlots(ctx, now) }); err != nil {
		return err
	}

	s.handlerCtx, s.cancelHandler = context.WithCancel(context.Background())
	s.mu.Lock()
	s.state = stateRunning
	s.mu.Unlock()
	bg := context.Background()
	if err := errors.Join(
		s.updates.start(),
		s.planner.Start(bg, startstop.Loop{Run: s.planner.tickLoop, Timers: 1}, startstop.Loop{Run: s.planner.publishHandlers}),
		s.dispatcher.Start(bg, startstop.Loop{Run: s.dispatcher.loop, Timers: 1}),
		s.keeper.start(),
		s.retention.start(),
		s.alerts.start(),
	); err != nil {
		return fmt.Errorf("xtimer: start: %w", err) // a component started twice: a bug of Start's state machine
	}
	mode := "redis"
	if s.opts.Redis == nil && s.opts.Locker == nil {
		mode = "in-process (one process only: start a second replica only with Options.Redis)"
	}
	s.view.mu.Lock()
	registered := len(s.view.handlers)
	s.view.mu.Unlock()
	s.log.Info("xtimer started", "lock", mode, "buckets", s.opts.Buckets, "tasks", registered)
	return nil
}

func (s *Scheduler) retryStart(ctx context.Context, what string, fn func(context.Context) error) error {
	wait := 100 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, store.ErrExists) { // waiting does not fix a code taken by an HTTP task

			return fmt.Errorf("xtimer: start: %s: %w", what, err)
		}
		s.log.Warn("xtimer start waits for the database", "step", what, "err", err, "retry_in", wait)
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("xtimer: start: %s: %w", what, err)
		case <-t.C():
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// Stop stops claiming slots, hands the fires this replica recorded but has
// not started to the other replicas, lets running handlers finish until ctx
// ends (then cancels their contexts), writes the last status updates and
// releases its locks. A stopped Scheduler cannot start again.
func (s *Scheduler) Stop(ctx context.Context) error {
	defer s.metrics.unregister()
	s.mu.Lock()
	if s.state != stateRunning {
		s.state = stateStopped
		stopped := s.stopped
		s.mu.Unlock()
		if stopped != nil { // another Stop is under way: return when it is done
			select {
			case <-stopped:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	s.state = stateStopped
	s.stopped = make(chan struct{})
	defer close(s.stopped)
	s.mu.Unlock()
	// The loops that claim, record and start fires stop first; the status
	// writer and the alerts' sender run until the end.
	s.planner.Stop()
	s.dispatcher.Stop()
	s.keeper.Stop()
	s.retention.Stop()
	s.alerts.stopRounds()

	var errs []error
	// Results first, then the fires this replica recorded but did not start
	// are handed on (those it claimed ahead of their run time too). If the database is away, nothing is released; the other
	// replicas take the fires over once this one's heartbeat expires.
	if err := s.updates.flush(ctx); err != nil {
		errs = append(errs, err)
	} else if _, err := s.store.UnclaimFires(ctx, s.opts.App, s.opts.InstanceID, s.dispatcher.takeUnstarted()); err != nil {
		errs = append(errs, err)
	} else if n, err := s.store.ReleaseFires(ctx, s.opts.App, s.opts.InstanceID); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		s.log.Info("handed recorded fires to other replicas", "fires", n)
	}
	s.keeper.releaseAll(ctx)

	done := make(chan struct{})
	go func() { s.attempts.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancelHandler()
		<-done // Call returns at once for a handler that ignores its context
	}
	s.cancelHandler()
	s.caller.CloseIdleConnections()
	if err := s.updates.stop(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.alerts.stop(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.store.DeleteReplica(ctx, s.opts.App, s.opts.InstanceID); err != nil {
		errs = append(errs, err)
	}
	s.log.Info("xtimer stopped")
	return errors.Join(errs...)
}

// Pause stops a task's fires on every replica within a second, including
// fires already recorded (they are recorded skipped, reason paused). The
// pause is stored and survives restarts and redeploys until Resume.
func (s *Scheduler) Pause(ctx context.Context, code string) error {
	return s.setStatus(ctx, code, store.TaskPaused)
}

// Resume undoes Pause. Fires missed while paused are not run; those from
// the resume on do, in the minutes already planned too.
func (s *Scheduler) Resume(ctx context.Context, code string) error {
	return s.setStatus(ctx, code, store.TaskActive)
}

func (s *Scheduler) setStatus(ctx context.Context, code, status string) error {
	return s.changeTask(ctx, code, "set status "+status, func(ctx context.Context) error {
		return s.store.SetTaskStatus(ctx, s.opts.App, code, status)
	})
}

// changeTask applies an operator's change to a stored task and adopts the
// new row here at once; other replicas adopt it on their next tick.
func (s *Scheduler) changeTask(ctx context.Context, code, what string, change func(context.Context) error) error {
	if err := change(ctx); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %q", ErrTaskNotFound, code)
		}
		return fmt.Errorf("xtimer: %s of task %q: %w", what, code, err)
	}
	return s.reloadTask(ctx, code)
}

func (s *Scheduler) reloadTask(ctx context.Context, code string) error {
	row, err := s.store.Task(ctx, s.opts.App, code)
	if err != nil {
		return fmt.Errorf("xtimer: read task %q: %w", code, err)
	}
	s.view.adoptTask(row)
	return nil
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
	return s.changeTask(ctx, code, "set schedule", func(ctx context.Context) error {
		return s.store.SetOverride(ctx, s.opts.App, code, o)
	})
}

// ResetSchedule removes the override SetSchedule stored: the schedule the
// code registers applies again, on every replica within a second, from then
// on, as an edit does.
func (s *Scheduler) ResetSchedule(ctx context.Context, code string) error {
	return s.changeTask(ctx, code, "reset schedule", func(ctx context.Context) error {
		return s.store.ResetOverride(ctx, s.opts.App, code)
	})
}

// Trigger records a manual run of a task now (source manual) and returns
// its execution. It runs here when this replica has the handler, otherwise
// on a replica that has it, within a second.
func (s *Scheduler) Trigger(ctx context.Context, code string) (Execution, error) {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	s.view.mu.Lock()
	t, local := s.view.taskLocked(code), s.view.runsHereLocked(code)
	s.view.mu.Unlock()
	switch state {
	case stateNew:
		return Execution{}, ErrNotStarted
	case stateStopped:
		return Execution{}, ErrStopped
	}
	if t == nil {
		if err := s.reloadTask(ctx, code); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return Execution{}, fmt.Errorf("%w: %q", ErrTaskNotFound, code)
			}
			return Execution{}, err
		}
		s.view.mu.Lock()
		t, local = s.view.taskLocked(code), s.view.runsHereLocked(code)
		s.view.mu.Unlock()
	}
	owner := ""
	if local {
		owner = s.opts.InstanceID
	}
	at := s.clock.Now().UnixMilli()
	for range 10 { // another manual run in the same millisecond: take the next
		rows, err := s.store.InsertFires(ctx, []store.Execution{{
			App: s.opts.App, TaskCode: code, RunTime: at, Status: store.StatusScheduled,
			Source: store.SourceManual, MaxAttempts: t.def.MaxAttempts, Replica: owner,
		}})
		if err != nil {
			return Execution{}, fmt.Errorf("xtimer: trigger %q: %w", code, err)
		}
		if len(rows) == 1 {
			if local {
				s.dispatcher.arm(rows[0])
			}
			s.log.Info("manual run recorded", "task", code, "execution", rows[0].ID)
			return toExecution(rows[0], t.loc()), nil
		}
		at++
	}
	return Execution{}, fmt.Errorf("xtimer: trigger %q: ten manual runs in the same millisecond", code)
}

// NextRuns returns the next n fire times of a task (1-1000) after now, in
// its zone, as its stored schedule (console overrides included) says.
func (s *Scheduler) NextRuns(code string, n int) ([]time.Time, error) {
	if n < 1 || n > 1000 {
		return nil, fmt.Errorf("xtimer: NextRuns(%q, %d): n must be 1-1000", code, n)
	}
	s.view.mu.Lock()
	t := s.view.taskLocked(code)
	cfg := s.view.handlers[code]
	s.view.mu.Unlock()
	var sched Schedule
	var endAt time.Time
	switch {
	case t != nil && t.sched != nil:
		sched, endAt = t.sched, t.endAt()
	case cfg != nil:
		sched, endAt = cfg.opts.sched, cfg.opts.endAt
	default:
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
	s.view.mu.Lock()
	loc := time.UTC
	if t := s.view.taskLocked(row.TaskCode); t != nil {
		loc = t.loc()
	}
	s.view.mu.Unlock()
	return toExecution(row, loc), nil
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
		ID: r.ID, App: r.App, Code: r.TaskCode, RunTime: at(r.RunTime),
		Status: Status(r.Status), Reason: r.Reason, Source: Source(r.Source),
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Replica: r.Replica,
		StartedAt: at(r.StartedMs), FinishedAt: at(r.FinishedMs),
		Lateness: time.Duration(r.LatenessMs) * time.Millisecond, Duration: time.Duration(r.DurationMs) * time.Millisecond,
		NextAttempt: at(r.NextAttemptMs), Output: r.Output, Error: r.Error,
	}
}

// clockTimers is how many timers of the injected clock the running
// components keep armed while they wait: what a test moving a fake clock
// waits for (internal/startstop).
func (s *Scheduler) clockTimers() int {
	return s.planner.Timers() + s.dispatcher.Timers() + s.keeper.Timers() + s.retention.Timers() +
		s.updates.Timers() + s.alerts.timers()
}
