// Package engine is xtimer's engine: the components that plan, record,
// claim and run the fires of an app's tasks on one replica, and the Engine
// that builds, wires, starts and stops them. The root package's Scheduler
// is its public face: it validates Options and task options, builds the
// lock and the HTTP caller, and converts its public types (Run, Event,
// Execution) at the boundary. docs/architecture.md describes the
// components, their state and goroutines, and how a fire runs.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/secretbox"
	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
)

// Config is what the engine runs with: the root's Options with their
// defaults applied and validated (the fields of the same names mean what
// Options documents), and what the root built of them.
type Config struct {
	App               string
	Buckets           int
	InstanceID        string
	Version           string
	Workers           int
	ClaimAhead        time.Duration
	CatchUpHorizon    time.Duration
	HeartbeatInterval time.Duration
	ReplicaTimeout    time.Duration
	MaxOutput         int
	HTTPWorkers       int
	HTTPSigningSecret string
	Retention         time.Duration
	RetentionPerTask  int
	RetentionBatch    int
	RetentionInterval time.Duration
	NoRollups         bool
	AlertWindow       time.Duration
	AlertLateAfter    time.Duration
	AlertMissedRuns   int
	Metrics           prometheus.Registerer
	TracerProvider    trace.TracerProvider
	Propagator        propagation.TextMapPropagator
	// MaxClockSkew: beyond this offset from the database's clock the
	// replica claims nothing (clockref.go). Unused without Reference.
	MaxClockSkew time.Duration

	// Built by the root.
	Store *store.Store
	// Clock is the engine's clock: Reference when the replica measures
	// its clock against the database's (Options.ClockReference), the
	// root's Options.Clock otherwise.
	Clock Clock
	// Reference, when not nil, is Clock, corrected by the offset the
	// engine measures (clockref.go); RedisTime reads Redis's clock for
	// the cross-check (nil without Redis).
	Reference *RefClock
	RedisTime func(context.Context) (time.Time, error)
	Locker    Locker
	// LockMode says in the start-up log which lock is in use.
	LockMode string
	Logger   *slog.Logger // the app's and replica's attributes attached
	Caller   *executor.HTTPCaller
	Invoke   Invoker
	Notifier Notify // nil sends no alerts
	// SecretKeys encrypts the secrets of HTTP tasks (secrets.go); nil
	// stores them in plaintext.
	SecretKeys *secretbox.Keyring
	// DeferFrom: a Start that registers at least this many tasks into an
	// app without any runs before their rows are written, and writes them
	// in the background (catalog.go). 0 means DefaultDeferFrom; a
	// negative value never defers.
	DeferFrom int
}

// Engine is one replica's engine. Its fields are the components and what
// they share; each component guards its own state (docs/architecture.md).
type Engine struct {
	opts  Config
	store *store.Store
	clock Clock
	log   *slog.Logger
	pool  *executor.Pool
	// HTTP callbacks: their own pool, and in front of it one FIFO per task
	// bounding the task's requests in flight (httprun.go).
	httpPool   *executor.Pool
	caller     *executor.HTTPCaller
	httpQueues httpQueues
	secrets    secrets // the keys of HTTP tasks' secrets (secrets.go)
	locker     Locker

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

	keeper    *lockKeeper    // the slot-lock keeper (slotlock.go)
	retention *retention     // the retention sweeper (retention.go)
	catalog   *catalogWriter // a deferred registration's rows (catalog.go)
	// handlerCtxs are the contexts the handlers run under, which Stop
	// cancels (cancelHandler). An attempt's context is a
	// child of one of them, by its execution's ID: a child registers with
	// its parent under the parent's lock as it begins and ends, and the
	// 64 workers of an instant's fires, all on one parent, waited on that
	// lock (BenchmarkStartInstant).
	handlerCtxs   [handlerCtxShards]context.Context
	cancelHandler context.CancelFunc

	updates *statusWriter // the status writer (status.go)
	pauses  *pauser       // pause on failure (pause.go)
	metrics *metrics      // nil without Config.Metrics
	tracer  trace.Tracer  // nil without Config.TracerProvider (trace.go)
	alerts  *alerter      // nil without Config.Notifier (alert.go)
	health  healthState   // health.go
	ref     *clockRef     // nil without Config.Reference (clockref.go)
}

const (
	stateNew = iota
	stateRunning
	stateStopped
)

// New builds the engine of cfg; nothing runs until Start. It fails only
// when the metrics cannot be registered.
func New(cfg Config) (*Engine, error) {
	s := &Engine{
		opts:     cfg,
		store:    cfg.Store,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		locker:   cfg.Locker,
		pool:     executor.NewPool(cfg.Workers),
		httpPool: executor.NewPool(cfg.HTTPWorkers),
		caller:   cfg.Caller,
		tracer:   newTracer(cfg.TracerProvider),
	}
	s.secrets = secrets{keys: cfg.SecretKeys, app: cfg.App, replica: cfg.InstanceID, log: cfg.Logger}
	s.view.init(s)
	s.pool.OnDone(func() { s.dispatcher.roomFreed() })
	var err error
	if s.metrics, err = newMetrics(cfg.Metrics, cfg.App); err != nil {
		return nil, err
	}
	s.alerts = newAlerter(s)
	s.ref = newClockRef(s)
	s.updates = newStatusWriter(s)
	s.pauses = newPauser(s)
	s.dispatcher = newDispatcher(s)
	s.keeper = newLockKeeper(s)
	s.planner = newPlanner(s)
	s.view.slots = s.planner
	s.retention = newRetention(s)
	s.catalog = newCatalogWriter(s)
	return s, nil
}

// Store returns the store the engine records in.
func (s *Engine) Store() *store.Store { return s.store }

// Register adds a task registered in this process, with the options it
// shares with the tasks registered alike. Its row is written at Start, or
// at once when the engine runs already.
func (s *Engine) Register(code string, handler any, shared *Shared) error {
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
	if shared.base.def == nil {
		shared.base = taskBase{def: shared.Def, sched: shared.Sched}
	}
	reg, added := s.view.handlers.add(code, handler, shared)
	if !added {
		unlock()
		return fmt.Errorf("%w: %q", ErrDuplicateTask, code)
	}
	if t := s.view.others[code]; t != nil { // another replica's task until now
		reg.state = t
		delete(s.view.others, code)
	}
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
		s.view.handlers.remove(reg)
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

func (s *Engine) upsertTask(ctx context.Context, r *registration) error {
	stored, err := s.store.UpsertTask(ctx, s.taskRow(r))
	if err != nil {
		return fmt.Errorf("xtimer: record task %q: %w", r.code, err)
	}
	s.view.adoptTask(stored)
	return nil
}

func (s *Engine) taskRow(r *registration) *store.Task {
	row := store.TaskFrom(s.opts.App, store.TaskDef{Code: r.code, Name: r.name(), Def: r.opts.Def}, store.TaskHead{})
	return &row
}

// Start creates the tables, records the registered tasks, catches up what
// every replica missed while down, and starts the components, retrying
// each step until ctx ends (the root gives it its deadline).
func (s *Engine) Start(ctx context.Context) error {
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
	// The clock first: the task rows, the heartbeat and the catch-up
	// below carry or compare instants.
	if err := s.retryStart(ctx, "read the database's clock", s.ref.calibrate); err != nil {
		return err
	}
	if err := s.retryStart(ctx, "create tables", s.store.Migrate); err != nil {
		return err
	}
	if err := s.retryStart(ctx, "encrypt stored secrets", s.sealStored); err != nil {
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

	s.setHandlerCtxs(context.Background())
	s.mu.Lock()
	s.state = stateRunning
	s.mu.Unlock()
	bg := context.Background()
	if err := errors.Join(
		s.updates.start(),
		s.pauses.start(),
		s.planner.Start(bg, startstop.Loop{Run: s.planner.tickLoop, Timers: 1}, startstop.Loop{Run: s.planner.publishHandlers},
			s.planner.shardLoop()),
		s.dispatcher.Start(bg, startstop.Loop{Run: s.dispatcher.loop, Timers: 1}),
		s.keeper.start(),
		s.retention.start(),
		s.alerts.start(),
		s.catalog.start(s.view.write),
	); err != nil {
		return fmt.Errorf("xtimer: start: %w", err) // a component started twice: a bug of Start's state machine
	}
	s.view.mu.Lock()
	registered := s.view.handlers.len()
	s.view.mu.Unlock()
	s.log.Info("xtimer started", "lock", s.opts.LockMode, "buckets", s.opts.Buckets, "tasks", registered)
	return nil
}

func (s *Engine) retryStart(ctx context.Context, what string, fn func(context.Context) error) error {
	wait := 100 * time.Millisecond
	began := time.Now()
	for {
		err := fn(ctx)
		if err == nil {
			s.log.Debug("xtimer start step done", "step", what, "took", time.Since(began).Round(time.Millisecond))
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, store.ErrExists) { // waiting does not fix a code taken by an HTTP task
			return startFailed(ctx, what, err)
		}
		s.log.Warn("xtimer start waits for the database", "step", what, "err", err, "retry_in", wait)
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return startFailed(ctx, what, err)
		case <-t.C():
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// startFailed is Start's error for its step what, which failed with err.
// When Start's deadline passed, it says so: a first start of a million
// tasks writes a million rows, which took longer than the 30 s a Start
// without a deadline gets, and "context deadline exceeded" alone did not
// tell the user what to change.
func startFailed(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("xtimer: start: %s: %w (Start's deadline passed: give Start a context with a later "+
			"deadline when the database is slow or there are many tasks to record; without one Start has "+
			"DefaultStartTimeout)", what, err)
	}
	return fmt.Errorf("xtimer: start: %s: %w", what, err)
}

// stopLoops stops the loops that claim, record and start fires, and the
// lock keeper and the retention sweeper, and waits for them.
func (s *Engine) stopLoops() {
	s.planner.Stop()
	s.dispatcher.Stop()
	s.keeper.Stop()
	s.retention.Stop()
	s.catalog.Stop()
	s.alerts.stopRounds()
}

// Stop stops claiming slots, hands the fires this replica recorded but has
// not started to the other replicas, lets running handlers finish until ctx
// ends (then cancels their contexts), writes the last status updates and
// releases its locks. A stopped Engine cannot start again.
func (s *Engine) Stop(ctx context.Context) error {
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
	s.stopLoops()

	var errs []error
	// Results first, then the fires this replica recorded but did not
	// start are handed on (those it claimed ahead of their run time too).
	// If the database is away, nothing is released; the other replicas
	// take the fires over once this one's heartbeat expires.
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
	s.pool.Close()
	s.httpPool.Close()
	s.caller.CloseIdleConnections()
	if err := s.updates.stop(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.pauses.stop(ctx); err != nil {
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

// ChangeTask applies an operator's change to a stored task and adopts the
// new row here at once; other replicas adopt it on their next tick.
func (s *Engine) ChangeTask(ctx context.Context, code, what string, change func(context.Context) error) error {
	if err := change(ctx); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %q", ErrTaskNotFound, code)
		}
		return fmt.Errorf("xtimer: %s of task %q: %w", what, code, err)
	}
	return s.ReloadTask(ctx, code)
}

// ReloadTask reads a task's row and adopts it.
func (s *Engine) ReloadTask(ctx context.Context, code string) error {
	row, err := s.store.Task(ctx, s.opts.App, code)
	if err != nil {
		return fmt.Errorf("xtimer: read task %q: %w", code, err)
	}
	s.view.adoptTask(row)
	return nil
}

// Adopt takes a task row the caller just wrote into the view.
func (s *Engine) Adopt(row store.Task) { s.view.adoptTask(row) }

// Drop removes a deleted task from the view.
func (s *Engine) Drop(code string) {
	s.view.mu.Lock()
	s.view.dropTaskLocked(code)
	s.view.mu.Unlock()
}

// Registered reports whether this process registered a handler for code.
func (s *Engine) Registered(code string) bool {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	return s.view.handlers.get(code) != nil
}

// Trigger records a manual run of a task now and returns its row and the
// task's zone. It runs here when this replica has the handler, otherwise
// on a replica that has it, within a second.
func (s *Engine) Trigger(ctx context.Context, code string) (store.Execution, *time.Location, error) {
	return s.TriggerWith(ctx, code, Manual{})
}

// TriggerWith is Trigger with the run's own parameters and note (m),
// recorded on its row: every attempt of it gets those parameters
// (paramsOf, fire.go). m.Check refuses parameters that do not fit the
// task before anything is recorded.
func (s *Engine) TriggerWith(ctx context.Context, code string, m Manual) (store.Execution, *time.Location, error) {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	s.view.mu.Lock()
	t, local := s.view.taskLocked(code), s.view.runsHereLocked(code)
	s.view.mu.Unlock()
	switch state {
	case stateNew:
		return store.Execution{}, nil, ErrNotStarted
	case stateStopped:
		return store.Execution{}, nil, ErrStopped
	}
	if t == nil {
		if err := s.ReloadTask(ctx, code); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return store.Execution{}, nil, fmt.Errorf("%w: %q", ErrTaskNotFound, code)
			}
			return store.Execution{}, nil, err
		}
		s.view.mu.Lock()
		t, local = s.view.taskLocked(code), s.view.runsHereLocked(code)
		s.view.mu.Unlock()
	}
	if m.Check != nil {
		if err := m.Check(t.httpSpec()); err != nil {
			return store.Execution{}, nil, err
		}
	}
	owner := ""
	if local && !s.ref.refusing() { // a replica that claims nothing records it for another
		owner = s.opts.InstanceID
	}
	now := s.clock.Now()
	at := now.UnixMilli()
	for range 10 { // another manual run in the same millisecond: take the next
		fire := []store.Execution{{
			App: s.opts.App, TaskCode: code, RunTime: at, Status: store.StatusScheduled,
			Source: store.SourceManual, MaxAttempts: t.def().MaxAttempts, Replica: owner,
			Params: store.Params(m.Params), Note: m.Note,
		}}
		if isSharded(t.def()) { // every shard, dealt as the schedule's fires are
			fire = s.planner.shardRows(t, fire, now)
		}
		rows, err := s.store.InsertFires(ctx, fire)
		if err != nil {
			if owner != "" {
				s.planner.doubtOwned() // the row may be there, ours and not armed
			}
			return store.Execution{}, nil, fmt.Errorf("xtimer: trigger %q: %w", code, err)
		}
		if len(rows) > 0 {
			for _, r := range rows {
				switch {
				case r.Replica != s.opts.InstanceID:
				case r.Sharded():
					s.planner.armShard(r)
				default:
					s.dispatcher.arm(r)
				}
			}
			s.log.Info("manual run recorded", "task", code, "execution", rows[0].ID, "shards", len(rows))
			return rows[0], t.loc(), nil // shard 0: InsertFires returns the rows in key order
		}
		at++
	}
	return store.Execution{}, nil, fmt.Errorf("xtimer: trigger %q: ten manual runs in the same millisecond", code)
}

// ScheduleOf returns a task's schedule as stored (console overrides
// included), less the days it excludes, and its end, or as registered here when the row is not in
// the view yet; ok is false for a task nobody has.
func (s *Engine) ScheduleOf(code string) (sched cron.Schedule, endAt time.Time, ok bool) {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	t := s.view.taskLocked(code)
	cfg := s.view.handlers.get(code)
	switch {
	case t != nil && t.sched() != nil:
		return t.runSchedule(), t.endAt(), true
	case cfg != nil:
		if excl := s.view.calendars.exclusionLocked(cfg.opts.Def); excl != nil {
			return Excluding(cfg.opts.Sched, excl.excludes), cfg.opts.EndAt, true
		}
		return cfg.opts.Sched, cfg.opts.EndAt, true
	}
	return nil, time.Time{}, false
}

// Zone returns the zone of a task in the view, UTC for one it lacks.
func (s *Engine) Zone(code string) *time.Location {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	if t := s.view.taskLocked(code); t != nil {
		return t.loc()
	}
	return time.UTC
}

// ClockTimers is how many timers of the injected clock the running
// components keep armed while they wait: what a test moving a fake clock
// waits for (internal/startstop).
func (s *Engine) ClockTimers() int {
	return s.planner.Timers() + s.dispatcher.Timers() + s.keeper.Timers() + s.retention.Timers() +
		s.updates.Timers() + s.alerts.timers()
}

// pollCancels stops the attempts running here that a later fire of their
// task asked to stop through their rows (overlap policy cancel_other,
// store.RequestCancel): the tick loop calls it every second.
func (s *Engine) pollCancels(ctx context.Context) error {
	asked, err := s.store.CancelRequested(ctx, s.dispatcher.trackedIDs())
	if err != nil {
		return err
	}
	s.dispatcher.cancelIDs(asked)
	return nil
}

// WakePending reports whether the dispatcher has been woken and has not
// run since, a pause on failure is being checked, or the status writer
// holds writes (it batches them over real milliseconds): a test moving a
// fake clock waits for it to be false, so that no fire armed now is left
// unseen, a task paused for failing is paused before its next fire, and
// the next tick reads the rows as the attempts that ended left them (a
// retry due is there to start).
func (s *Engine) WakePending() bool {
	return s.dispatcher.wakePending() || s.pauses.pending() || s.updates.pending()
}

// BucketOf is FNV-1a of the code, modulo buckets: every replica, of any
// version, puts a task in the same bucket.
func BucketOf(code string, buckets int) int { return bucketOf(code, buckets) }
