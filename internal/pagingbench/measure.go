package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
)

// pageSize is the console's page.
const pageSize = 50

// walkDepth is how many pages a walk from a random start follows.
const walkDepth = 5

const dayMs = 24 * 3600 * 1000

// query is one line of the table: a console filter, walked from starts
// that differ from walk to walk so that the loads are not all served from
// the same cached pages.
type query struct {
	name string
	// depth is the pages per walk; 0 means all the loads in one walk.
	depth int
	// start returns the filter and the cursor of walk number i.
	start func(i int) (store.ExecutionFilter, store.Cursor)
}

// checker collects the failed checks; any makes the run fail.
type checker struct{ failures []string }

func (c *checker) failf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(c.failures) < 50 {
		logf("CHECK FAILED: %s", msg)
	}
	c.failures = append(c.failures, msg)
}

// result is one measured line.
type result struct {
	name  string
	loads int
	rows  int
	times []time.Duration
}

func measure(ctx context.Context, st *store.Store, p plan, seeded time.Duration, loads int, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c := &checker{}
	loadBefore := loadAverage()
	randomTask := func() string { return taskCode(r.IntN(taskCount)) }
	// randomCursor is a position anywhere in the history; every other walk
	// starts at the top instead, as a console user does.
	randomCursor := func(i int) store.Cursor {
		if i%2 == 0 {
			return store.Cursor{}
		}
		return store.Cursor{RunTime: p.fromMs + r.Int64N(p.toMs-p.fromMs), ID: math.MaxInt64}
	}
	randomDay := func() (int64, int64) {
		from := p.fromMs + r.Int64N(max((p.toMs-p.fromMs)/dayMs, 1))*dayMs
		return from, from + dayMs
	}
	app := store.ExecutionFilter{App: benchApp}
	queries := []query{
		{"no filter, first page", 1, func(int) (store.ExecutionFilter, store.Cursor) { return app, store.Cursor{} }},
		{fmt.Sprintf("no filter, pages 1-%d following the cursor", loads), 0, func(int) (store.ExecutionFilter, store.Cursor) {
			return app, store.Cursor{}
		}},
		{"no filter, random start", walkDepth, func(int) (store.ExecutionFilter, store.Cursor) {
			return app, randomCursor(1)
		}},
		{"task", walkDepth, func(i int) (store.ExecutionFilter, store.Cursor) {
			return store.ExecutionFilter{App: benchApp, TaskCode: randomTask()}, randomCursor(i)
		}},
		{"status=failed", walkDepth, func(i int) (store.ExecutionFilter, store.Cursor) {
			return store.ExecutionFilter{App: benchApp, Status: store.StatusFailed}, randomCursor(i)
		}},
		{"task + status=failed", walkDepth, func(i int) (store.ExecutionFilter, store.Cursor) {
			return store.ExecutionFilter{App: benchApp, TaskCode: randomTask(), Status: store.StatusFailed}, randomCursor(i)
		}},
		{"source=manual", walkDepth, func(i int) (store.ExecutionFilter, store.Cursor) {
			return store.ExecutionFilter{App: benchApp, Source: store.SourceManual}, randomCursor(i)
		}},
		{"replica, current", walkDepth, func(i int) (store.ExecutionFilter, store.Cursor) {
			return store.ExecutionFilter{App: benchApp, Replica: replicaName(p.generations()-1, r.IntN(replicas))}, randomCursor(i)
		}},
		{"replica, any (most are gone)", walkDepth, func(i int) (store.ExecutionFilter, store.Cursor) {
			return store.ExecutionFilter{App: benchApp, Replica: replicaName(r.IntN(p.generations()), r.IntN(replicas))}, randomCursor(i)
		}},
		{"1-day range", walkDepth, func(int) (store.ExecutionFilter, store.Cursor) {
			from, to := randomDay()
			return store.ExecutionFilter{App: benchApp, FromMs: from, ToMs: to}, store.Cursor{}
		}},
		{"task + 1-day range", walkDepth, func(int) (store.ExecutionFilter, store.Cursor) {
			from, to := randomDay()
			return store.ExecutionFilter{App: benchApp, TaskCode: randomTask(), FromMs: from, ToMs: to}, store.Cursor{}
		}},
	}

	var results []result
	for _, q := range queries {
		res, err := runQuery(ctx, st, q, loads, c)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	others, err := measureCalls(ctx, st, p, r, loads, c)
	if err != nil {
		return err
	}
	results = append(results, others...)
	if err := checkComplete(ctx, st, p, r, c); err != nil {
		return err
	}

	printTable(st, p, seeded, results, loadBefore, loadAverage())
	if len(c.failures) > 0 {
		return fmt.Errorf("%d checks failed; the first: %s", len(c.failures), c.failures[0])
	}
	return nil
}

// runQuery loads pages of q until loads pages are measured, checking each.
func runQuery(ctx context.Context, st *store.Store, q query, loads int, c *checker) (result, error) {
	res := result{name: q.name}
	depth := q.depth
	if depth == 0 {
		depth = loads
	}
	for walk := 0; res.loads < loads; walk++ {
		f, cursor := q.start(walk)
		w := newWalk(q.name, f, cursor, c)
		for page := 0; page < depth && res.loads < loads; page++ {
			t := time.Now()
			rows, next, err := st.ListExecutions(ctx, f, cursor, pageSize)
			res.times = append(res.times, time.Since(t))
			if err != nil {
				return res, fmt.Errorf("%s: %w", q.name, err)
			}
			res.loads++
			res.rows += len(rows)
			w.page(rows, next)
			if next == (store.Cursor{}) {
				break
			}
			cursor = next
		}
	}
	return res, nil
}

// walk checks consecutive pages of one listing.
type walk struct {
	name   string
	f      store.ExecutionFilter
	last   store.Cursor // key of the last row seen; zero before the first
	top    bool         // the walk started at the newest row
	seen   map[int64]bool
	rows   int
	pages  int
	ended  bool
	checks *checker
}

func newWalk(name string, f store.ExecutionFilter, start store.Cursor, c *checker) *walk {
	return &walk{name: name, f: f, last: start, top: start == (store.Cursor{}), seen: map[int64]bool{}, checks: c}
}

func (w *walk) page(rows []store.Execution, next store.Cursor) {
	w.pages++
	if w.ended {
		w.checks.failf("%s: page %d loaded after the last page", w.name, w.pages)
	}
	for _, e := range rows {
		if msg := mismatch(w.f, e); msg != "" {
			w.checks.failf("%s: page %d: execution %d does not match the filter: %s", w.name, w.pages, e.ID, msg)
		}
		key := store.Cursor{RunTime: e.RunTime, ID: e.ID}
		if (w.rows > 0 || !w.top) && !before(key, w.last) {
			w.checks.failf("%s: page %d: execution %d (%d, %d) does not come after (%d, %d)",
				w.name, w.pages, e.ID, key.RunTime, key.ID, w.last.RunTime, w.last.ID)
		}
		if w.seen[e.ID] {
			w.checks.failf("%s: page %d: execution %d listed twice", w.name, w.pages, e.ID)
		}
		w.seen[e.ID] = true
		w.last = key
		w.rows++
	}
	switch {
	case next == (store.Cursor{}):
		w.ended = true
	case len(rows) != pageSize:
		w.checks.failf("%s: page %d has %d rows and a next cursor; want %d", w.name, w.pages, len(rows), pageSize)
	case next != w.last:
		w.checks.failf("%s: page %d: next cursor %+v is not its last row %+v", w.name, w.pages, next, w.last)
	}
}

// before reports whether a comes after b in the listing: (run_time, id)
// strictly smaller.
func before(a, b store.Cursor) bool {
	return a.RunTime < b.RunTime || a.RunTime == b.RunTime && a.ID < b.ID
}

// mismatch says how e fails f, or returns "".
func mismatch(f store.ExecutionFilter, e store.Execution) string {
	var bad []string
	check := func(field, want, got string) {
		if want != "" && want != got {
			bad = append(bad, fmt.Sprintf("%s %q, want %q", field, got, want))
		}
	}
	check("app", f.App, e.App)
	check("task", f.TaskCode, e.TaskCode)
	check("status", f.Status, e.Status)
	check("source", f.Source, e.Source)
	check("replica", f.Replica, e.Replica)
	if f.FromMs != 0 && e.RunTime < f.FromMs || f.ToMs != 0 && e.RunTime >= f.ToMs {
		bad = append(bad, fmt.Sprintf("run_time %d outside [%d, %d)", e.RunTime, f.FromMs, f.ToMs))
	}
	return strings.Join(bad, "; ")
}

// measureCalls times the console's other reads of xtimer_executions and
// checks them against ListExecutions.
func measureCalls(ctx context.Context, st *store.Store, p plan, r *rand.Rand, loads int, c *checker) ([]result, error) {
	counts30 := result{name: "StatusCounts, task, 30 days"}
	counts1 := result{name: "StatusCounts, task, 1 day"}
	last := result{name: fmt.Sprintf("LastExecutions, %d tasks", taskCount)}
	codes := make([]string, taskCount)
	for i := range codes {
		codes[i] = taskCode(i)
	}
	for i := 0; i < loads; i++ {
		code := taskCode(r.IntN(taskCount))
		for _, m := range []struct {
			res  *result
			span int64
		}{{&counts30, 30 * dayMs}, {&counts1, dayMs}} {
			from := p.fromMs + r.Int64N(max(p.toMs-p.fromMs-m.span, 1))
			t := time.Now()
			got, err := st.StatusCounts(ctx, benchApp, code, from, from+m.span)
			m.res.times = append(m.res.times, time.Since(t))
			if err != nil {
				return nil, err
			}
			m.res.loads++
			for _, n := range got {
				m.res.rows += int(n)
			}
		}

		before := p.fromMs + r.Int64N(p.toMs-p.fromMs)
		t := time.Now()
		got, err := st.LastExecutions(ctx, benchApp, codes, before)
		last.times = append(last.times, time.Since(t))
		if err != nil {
			return nil, err
		}
		last.loads++
		last.rows += len(got)
		// Spot-check a few against the first row ListExecutions gives.
		for range 3 {
			code := taskCode(r.IntN(taskCount))
			rows, _, err := st.ListExecutions(ctx, store.ExecutionFilter{App: benchApp, TaskCode: code},
				store.Cursor{RunTime: before, ID: math.MaxInt64}, 1)
			if err != nil {
				return nil, err
			}
			e, ok := got[code]
			switch {
			case len(rows) == 0 && ok:
				c.failf("LastExecutions(%s, before %d) = execution %d; ListExecutions finds none", code, before, e.ID)
			case len(rows) == 1 && (!ok || e.ID != rows[0].ID):
				c.failf("LastExecutions(%s, before %d) = execution %d (found %v); ListExecutions says %d", code, before, e.ID, ok, rows[0].ID)
			}
		}
	}
	tasks := result{name: "ListTasks, text, all pages"}
	for tasks.loads < loads {
		f := store.TaskFilter{App: benchApp, Text: fmt.Sprintf("TEAM %d", r.IntN(17))}
		if tasks.loads%2 == 1 {
			f.Status, f.Kind = store.TaskActive, store.KindFunc
		}
		after, prev := "", ""
		for {
			t := time.Now()
			page, next, err := st.ListTasks(ctx, f, after, pageSize)
			tasks.times = append(tasks.times, time.Since(t))
			if err != nil {
				return nil, err
			}
			tasks.loads++
			tasks.rows += len(page)
			for _, tk := range page {
				if !st.MatchesText(tk, f.Text) ||
					f.Status != "" && (tk.Status != f.Status || tk.Kind != f.Kind) || tk.Code <= prev {
					c.failf("ListTasks(%+v) after %q: task %s (%q, %s, %s) does not belong", f, after, tk.Code, tk.Name, tk.Status, tk.Kind)
				}
				prev = tk.Code
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	apps := result{name: "Apps"}
	for range loads {
		t := time.Now()
		got, err := st.Apps(ctx)
		apps.times = append(apps.times, time.Since(t))
		if err != nil {
			return nil, err
		}
		apps.loads++
		apps.rows += len(got)
		if !slices.Contains(got, benchApp) {
			c.failf("Apps() = %q, without %q", got, benchApp)
		}
	}
	return []result{counts30, counts1, last, tasks, apps}, nil
}

// checkComplete walks some listings to their end and compares what the
// pages held with what StatusCounts counts independently: every row
// exactly once. On a small table it does so for the whole app too.
func checkComplete(ctx context.Context, st *store.Store, p plan, r *rand.Rand, c *checker) error {
	type target struct {
		f         store.ExecutionFilter
		countFrom int64
		countTo   int64
	}
	var targets []target
	for range 5 {
		code := taskCode(r.IntN(taskCount))
		from := p.fromMs + r.Int64N(max((p.toMs-p.fromMs)/dayMs, 1))*dayMs
		targets = append(targets,
			target{store.ExecutionFilter{App: benchApp, TaskCode: code}, p.fromMs, p.toMs},
			target{store.ExecutionFilter{App: benchApp, TaskCode: code, Status: store.StatusFailed}, p.fromMs, p.toMs},
			target{store.ExecutionFilter{App: benchApp, TaskCode: code, FromMs: from, ToMs: from + dayMs}, from, from + dayMs})
	}
	if p.rows <= 200_000 {
		for i := range taskCount {
			targets = append(targets, target{store.ExecutionFilter{App: benchApp, TaskCode: taskCode(i)}, p.fromMs, p.toMs})
		}
		targets = append(targets, target{store.ExecutionFilter{App: benchApp}, p.fromMs, p.toMs})
	}
	var total int64
	for _, tg := range targets {
		name := fmt.Sprintf("complete walk of %+v", tg.f)
		w := newWalk(name, tg.f, store.Cursor{}, c)
		cursor := store.Cursor{}
		for {
			rows, next, err := st.ListExecutions(ctx, tg.f, cursor, pageSize)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			w.page(rows, next)
			if next == (store.Cursor{}) {
				break
			}
			cursor = next
		}
		var want int64
		if tg.f.TaskCode == "" {
			for i := range taskCount {
				n, err := countOf(ctx, st, taskCode(i), tg.countFrom, tg.countTo, "")
				if err != nil {
					return err
				}
				want += n
			}
			if want != p.rows {
				c.failf("StatusCounts of every task add up to %d; seeded %d", want, p.rows)
			}
		} else {
			n, err := countOf(ctx, st, tg.f.TaskCode, tg.countFrom, tg.countTo, tg.f.Status)
			if err != nil {
				return err
			}
			want = n
		}
		if int64(w.rows) != want || int64(len(w.seen)) != want {
			c.failf("%s: %d rows (%d distinct) in %d pages; the table holds %d", name, w.rows, len(w.seen), w.pages, want)
		}
		total += want
	}
	logf("complete walks: %d listings, %d rows, each exactly once", len(targets), total)
	return nil
}

// countOf counts the executions of a task in [from, to), of one status or all.
func countOf(ctx context.Context, st *store.Store, code string, from, to int64, status string) (int64, error) {
	counts, err := st.StatusCounts(ctx, benchApp, code, from, to)
	if err != nil {
		return 0, err
	}
	if status != "" {
		return counts[status], nil
	}
	var n int64
	for _, v := range counts {
		n += v
	}
	return n, nil
}

func printTable(st *store.Store, p plan, seeded time.Duration, results []result, loadBefore, loadAfter string) {
	db := st.DB()
	var version string
	switch db.Dialector.Name() {
	case "sqlite":
		db.Raw("SELECT 'SQLite ' || sqlite_version()").Scan(&version)
	default:
		db.Raw("SELECT version()").Scan(&version)
	}
	fmt.Printf("\n%s, %d executions of %d tasks over %d days",
		version, p.rows, taskCount, (p.toMs-p.fromMs+dayMs-1)/dayMs)
	if seeded > 0 {
		fmt.Printf(", seeded in %s", seeded.Round(time.Second))
	} else {
		fmt.Printf(", reused")
	}
	fmt.Printf(".\nPages of %d rows; random tasks, days, replicas and start cursors. Load average %s before, %s after.\n\n",
		pageSize, loadBefore, loadAfter)
	fmt.Println("| query | loads | rows/load | p50 ms | p95 ms | max ms |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, res := range results {
		slices.SortFunc(res.times, cmp.Compare)
		fmt.Printf("| %s | %d | %.0f | %s | %s | %s |\n", res.name, res.loads, float64(res.rows)/float64(res.loads),
			ms(percentile(res.times, 50)), ms(percentile(res.times, 95)), ms(res.times[len(res.times)-1]))
	}
}

// loadAverage returns the machine's 1-minute load average, or "?": the
// numbers mean little when other work competes for the CPUs.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
