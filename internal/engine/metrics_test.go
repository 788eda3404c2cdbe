package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// scriptedRun runs one minute on the fake clock with three tasks firing at
// second 0 of 10:01: "ok" succeeds, "bad" fails, and "sleepy" is paused
// after its fire was recorded (so it is skipped at its run time). It
// returns the running engine and its registry once both handlers have
// returned and their metrics are counted.
func scriptedRun(t *testing.T) (*Engine, *prometheus.Registry) {
	t.Helper()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC)
	clock := fakeclock.New(t0)
	reg := prometheus.NewRegistry()
	iv := newInvocations()
	s := newEngine(t, setupOpts{db: db, app: app, clock: clock}, func(c *Config) { c.Metrics = reg })
	mustRegister(t, s, "ok", "0 * * * * *", iv.handler(nil))
	mustRegister(t, s, "bad", "0 * * * * *", iv.handler(func(*Attempt) error { return errors.New("boom") }))
	mustRegister(t, s, "sleepy", "0 * * * * *", iv.handler(nil))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)

	waitIdle(ctx, t, clock, s)
	clock.Advance(54*time.Second + 500*time.Millisecond) // 10:00:55: the 10:01 slot is claimed and recorded
	require.Eventually(t, func() bool {
		rows, _, err := s.store.ListExecutions(ctx, store.ExecutionFilter{App: app}, store.Cursor{}, 10)
		return err == nil && len(rows) == 3
	}, 10*time.Second, 10*time.Millisecond)
	// The root's Pause.
	require.NoError(t, s.ChangeTask(ctx, "sleepy", "set status "+store.TaskPaused, func(ctx context.Context) error {
		return s.store.SetTaskStatus(ctx, app, "sleepy", store.TaskPaused)
	}))

	waitIdle(ctx, t, clock, s)
	clock.Advance(5 * time.Second) // 10:01:00
	ran := map[string]bool{}
	for len(ran) < 2 {
		ran[iv.next(t, 10*time.Second).Code] = true
	}
	require.Equal(t, map[string]bool{"ok": true, "bad": true}, ran)
	m := s.metrics
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 2.0, total(c, m.attempts), "both attempts ended")
		assert.Equal(c, 3.0, total(c, m.fires), "three fires final")
	}, 10*time.Second, 10*time.Millisecond)
	return s, reg
}

func TestMetricsCountFiresAttemptsAndLatenessOfAScriptedRun(t *testing.T) {
	t.Parallel()
	s, reg := scriptedRun(t)
	m := s.metrics

	require.Equal(t, 1.0, testutil.ToFloat64(m.fires.WithLabelValues("ok", "succeeded")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.fires.WithLabelValues("bad", "failed")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.fires.WithLabelValues("sleepy", "skipped")), "a paused fire is counted skipped")
	require.Equal(t, 3, testutil.CollectAndCount(m.fires), "no other task or status")
	require.Equal(t, 1.0, testutil.ToFloat64(m.attempts.WithLabelValues("ok", "succeeded")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.attempts.WithLabelValues("bad", "failed")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.running))
	require.GreaterOrEqual(t, testutil.ToFloat64(m.slotClaims.WithLabelValues(claimWon)), 1.0)
	require.Equal(t, 0.0, testutil.ToFloat64(m.redisFallback))

	families := gather(t, reg)
	require.Equal(t, uint64(2), histogramCount(families["xtimer_lateness_seconds"]), "one lateness sample per started fire")
	require.Equal(t, uint64(2), histogramCount(families["xtimer_duration_seconds"]))
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			require.Equal(t, "app", metric.GetLabel()[0].GetName(), "%s carries app", f.GetName())
			require.Equal(t, s.opts.App, metric.GetLabel()[0].GetValue())
		}
	}
}

// The dashboard queries only metrics the scheduler exports.
func TestGrafanaDashboardQueriesExistingMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../examples/grafana/xtimer-dashboard.json")
	require.NoError(t, err)
	var dashboard map[string]any
	require.NoError(t, json.Unmarshal(raw, &dashboard), "the dashboard is valid JSON")
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				exprs = append(exprs, e)
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(dashboard)
	require.NotEmpty(t, exprs)

	_, reg := scriptedRun(t)
	families := gather(t, reg)
	queried := map[string]bool{}
	name := regexp.MustCompile(`xtimer_[a-z_]+`)
	for _, e := range exprs {
		for _, n := range name.FindAllString(e, -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(n, suffix); ok && families[base] != nil {
					n = base
				}
			}
			queried[n] = true
		}
	}
	for n := range queried {
		require.NotNil(t, families[n], "the dashboard queries %s, which the registry lacks", n)
	}
	var exported []string
	for n := range families {
		exported = append(exported, n)
	}
	sort.Strings(exported)
	for _, n := range []string{"xtimer_fires_total", "xtimer_lateness_seconds", "xtimer_duration_seconds", "xtimer_running_handlers",
		"xtimer_slot_claims_total", "xtimer_redis_fallback", "xtimer_db_errors_total"} {
		require.True(t, queried[n], "the dashboard shows %s (exported: %v)", n, exported)
	}
}

func TestMetricsNilRegistryRegistersNothingAndHooksAreNoOps(t *testing.T) {
	t.Parallel()
	s := newEngine(t, setupOpts{db: testsvc.SQLite(t)}, nil)
	require.Nil(t, s.metrics)
	r := store.Execution{TaskCode: "x", Attempt: 1, Source: store.SourceSchedule}
	s.attemptBegins(r, time.Now())
	s.attemptEnds(r, executor.Outcome{}, store.Finish{})
	s.metrics.fireEnded("x", store.StatusSucceeded)
	s.metrics.firesSkipped("x", 2)
	s.metrics.slotClaim(claimWon)
	s.metrics.lockFallback(true)
	s.metrics.dbError()
	s.metrics.rescue(1)
	s.metrics.retentionDeleted(10)
	s.metrics.unregister()
}

func TestMetricsOfTwoAppsShareARegistry(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	reg := prometheus.NewRegistry()
	a := newEngine(t, setupOpts{db: db, app: "billing"}, func(c *Config) { c.Metrics = reg })
	b := newEngine(t, setupOpts{db: db, app: "reports"}, func(c *Config) { c.Metrics = reg })
	a.metrics.dbError()
	b.metrics.dbError()
	b.metrics.dbError()
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP xtimer_db_errors_total Database errors of the tick loop, the dispatcher and the status writes.
# TYPE xtimer_db_errors_total counter
xtimer_db_errors_total{app="billing"} 1
xtimer_db_errors_total{app="reports"} 2
`), "xtimer_db_errors_total"))
}

func TestMetricsSameAppTwiceOnARegistryFailsNewUntilStop(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	reg := prometheus.NewRegistry()
	first := newEngine(t, setupOpts{db: db, app: app}, func(c *Config) { c.Metrics = reg })
	cfg := testConfig(t, setupOpts{db: db, app: app})
	cfg.Metrics = reg
	_, err := New(cfg)
	require.ErrorContains(t, err, "xtimer: Options.Metrics")
	require.ErrorContains(t, err, app)
	require.Equal(t, 1, testutil.CollectAndCount(reg, "xtimer_running_handlers"), "the failed New left the first one's collectors alone")

	require.NoError(t, first.Stop(context.Background()))
	require.Equal(t, 0, testutil.CollectAndCount(reg, "xtimer_running_handlers"), "Stop unregisters")
	cfg = testConfig(t, setupOpts{db: db, app: app})
	cfg.Metrics = reg
	_, err = New(cfg)
	require.NoError(t, err, "a new Scheduler of the app registers after Stop")
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range mfs {
		out[f.GetName()] = f
	}
	return out
}

func histogramCount(f *dto.MetricFamily) uint64 {
	var n uint64
	if f == nil {
		return 0
	}
	for _, m := range f.GetMetric() {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// total sums the values of a counter vector's series.
func total(t assert.TestingT, c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	var sum float64
	for m := range ch {
		var d dto.Metric
		assert.NoError(t, m.Write(&d))
		sum += d.GetCounter().GetValue()
	}
	return sum
}
