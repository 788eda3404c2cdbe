package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file holds the Prometheus metrics of a Scheduler (Options.Metrics).
// The engine calls the hooks below where things happen; with no registry
// s.metrics is nil and every hook returns at once. Labels stay bounded:
// task codes, statuses and outcomes, never an execution ID.

// timeBuckets are the buckets of the lateness and duration histograms, in
// seconds: 1 ms to 60 s.
var timeBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// metrics are the collectors of one Scheduler, labelled app=Options.App.
type metrics struct {
	reg           prometheus.Registerer
	fires         *prometheus.CounterVec   // task, status: fires that reached a final status
	attempts      *prometheus.CounterVec   // task, outcome
	lateness      *prometheus.HistogramVec // kind
	duration      *prometheus.HistogramVec // task
	running       prometheus.Gauge
	slotClaims    *prometheus.CounterVec // result
	redisFallback prometheus.Gauge
	dbErrors      prometheus.Counter
	rescued       prometheus.Counter
	retention     prometheus.Counter
	alerts        *prometheus.CounterVec // kind, result
	clock         prometheus.Gauge
}

// newMetrics registers the collectors on reg under the const label
// app=app, so that schedulers of several apps can share one registry. A
// nil reg means no metrics: it returns nil, and the hooks do nothing.
func newMetrics(reg prometheus.Registerer, app string) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		reg: prometheus.WrapRegistererWith(prometheus.Labels{"app": app}, reg),
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xtimer_fires_total",
			Help: "Fires that reached a final status (succeeded, failed, timed_out, skipped), by task."}, []string{"task", "status"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xtimer_attempts_total",
			Help: "Attempts that ended on this replica, by task and outcome (succeeded, failed, timed_out)."}, []string{"task", "outcome"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "xtimer_lateness_seconds",
			Help:    "Start minus run time of the first attempt of scheduled fires, by kind (func, http).",
			Buckets: timeBuckets}, []string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "xtimer_duration_seconds",
			Help: "Duration of attempts, by task.", Buckets: timeBuckets}, []string{"task"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "xtimer_running_handlers",
			Help: "Attempts running on this replica (Go handlers and HTTP callbacks)."}),
		slotClaims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xtimer_slot_claims_total",
			Help: "Slot lock results: won, lost (another replica holds it), refreshed, lost_while_held."}, []string{"result"}),
		redisFallback: prometheus.NewGauge(prometheus.GaugeOpts{Name: "xtimer_redis_fallback",
			Help: "1 while the slot lock is unavailable and claims fall back to the database unique key."}),
		dbErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "xtimer_db_errors_total",
			Help: "Database errors of the tick loop, the dispatcher and the status writes."}),
		rescued: prometheus.NewCounter(prometheus.CounterOpts{Name: "xtimer_rescued_total",
			Help: "Running executions of lost replicas settled by this replica."}),
		retention: prometheus.NewCounter(prometheus.CounterOpts{Name: "xtimer_retention_deleted_total",
			Help: "Execution rows deleted by retention."}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xtimer_alerts_total",
			Help: "Alerts by kind and result: sent, damped (counted into a later alert), failed (to be tried again), dropped."}, []string{"kind", "result"}),
		clock: prometheus.NewGauge(prometheus.GaugeOpts{Name: "xtimer_clock_offset_seconds",
			Help: "The database's clock minus this replica's, as the engine corrects it (Options.ClockReference); 0 when off."}),
	}
	var done []prometheus.Collector
	for _, c := range m.collectors() {
		if err := m.reg.Register(c); err != nil {
			for _, d := range done {
				m.reg.Unregister(d)
			}
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				return nil, fmt.Errorf("xtimer: Options.Metrics: the metrics of app %q are registered already (one Scheduler per App and registry): %w", app, err)
			}
			return nil, fmt.Errorf("xtimer: Options.Metrics: register the metrics of app %q: %w", app, err)
		}
		done = append(done, c)
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.fires, m.attempts, m.lateness, m.duration, m.running,
		m.slotClaims, m.redisFallback, m.dbErrors, m.rescued, m.retention, m.alerts, m.clock}
}

// unregister removes the collectors at Stop, so that a new Scheduler of
// the same App may register on the same registry.
func (m *metrics) unregister() {
	if m == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}

// fireEnded counts a fire that reached a final status; retrying is not one.
func (m *metrics) fireEnded(task, status string) {
	if m == nil || status == store.StatusRetrying {
		return
	}
	m.fires.WithLabelValues(task, status).Inc()
}

// firesSkipped counts n fires of a task recorded skipped.
func (m *metrics) firesSkipped(task string, n int) {
	if m == nil {
		return
	}
	m.fires.WithLabelValues(task, store.StatusSkipped).Add(float64(n))
}

// Slot lock results of xtimer_slot_claims_total.
const (
	claimWon           = "won"
	claimLost          = "lost"
	claimRefreshed     = "refreshed"
	claimLostWhileHeld = "lost_while_held"
)

func (m *metrics) slotClaim(result string) {
	if m == nil {
		return
	}
	m.slotClaims.WithLabelValues(result).Inc()
}

func (m *metrics) lockFallback(down bool) {
	if m == nil {
		return
	}
	if down {
		m.redisFallback.Set(1)
	} else {
		m.redisFallback.Set(0)
	}
}

func (m *metrics) dbError() {
	if m == nil {
		return
	}
	m.dbErrors.Inc()
}

func (m *metrics) rescue(n int) {
	if m == nil {
		return
	}
	m.rescued.Add(float64(n))
}

// retentionDeleted counts execution rows deleted by retention.
func (m *metrics) retentionDeleted(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.retention.Add(float64(n))
}

// alert counts an alert's result (alert.go).
func (m *metrics) alert(kind, result string) {
	if m == nil {
		return
	}
	m.alerts.WithLabelValues(kind, result).Inc()
}

// clockOffset sets the clock offset the engine corrects by (clockref.go).
func (m *metrics) clockOffset(d time.Duration) {
	if m == nil {
		return
	}
	m.clock.Set(d.Seconds())
}

// attemptBegins is called as the work of an attempt starts on its pool, at
// (the lateness of a scheduled fire's first attempt is observed then).
func (s *Engine) attemptBegins(r store.Execution, at time.Time) {
	m := s.metrics
	if m == nil {
		return
	}
	m.running.Inc()
	if r.Attempt != 1 || r.Source != store.SourceSchedule {
		return
	}
	kind := store.KindFunc
	s.view.mu.Lock()
	if t := s.view.taskLocked(r.TaskCode); t != nil {
		kind = t.def().Kind
	}
	s.view.mu.Unlock()
	m.lateness.WithLabelValues(kind).Observe(max(at.Sub(time.UnixMilli(r.Planned())), 0).Seconds())
}

// attemptEnds is called once an attempt returned (or timed out) and was
// settled as fin.
func (s *Engine) attemptEnds(r store.Execution, out executor.Outcome, fin store.Finish) {
	m := s.metrics
	if m == nil {
		return
	}
	m.running.Dec()
	outcome := store.StatusSucceeded
	switch {
	case out.TimedOut():
		outcome = store.StatusTimedOut
	case out.Err != nil:
		outcome = store.StatusFailed
	}
	m.attempts.WithLabelValues(r.TaskCode, outcome).Inc()
	m.duration.WithLabelValues(r.TaskCode).Observe(max(out.Finished.Sub(out.Started), 0).Seconds())
	m.fireEnded(r.TaskCode, fin.Status)
}
