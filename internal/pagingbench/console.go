package main

// The console cases: every page and JSON list of admin/ that an operator
// opens, loaded through the real http.Handler (admin.New on a scheduler
// that is never started, served by httptest on loopback) over an app of
// -tasks tasks beside the seeded executions.
//
// The app's tasks are the taskCount tasks that have executions (seed.go)
// and -tasks minus taskCount more, generated on the server
// (seedManyTasks): task i is
//
//	code  job-%07d                       job-0012345
//	name  Nightly <region> export, customer c%07d
//
// with region regions[i%8] and the customer number (i*7919) % 1000003.
// Text searches pick terms whose matches the bench knows from these
// formulas, and check the answers against them.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/admin"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
)

// minTasks is the smallest -tasks: the first page of a search for a
// region needs 50 generated tasks of it.
const minTasks = 2 * taskCount

// tasksSeedVersion changes whenever manyTasksSQL generates other rows.
const tasksSeedVersion = 1

var regions = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// customerMod makes the customer numbers of the generated tasks a
// permutation-like spread over seven digits.
const customerMod = 1_000_003

// jobCode and jobName are generated task i, as manyTasksSQL writes it.
func jobCode(i int) string { return fmt.Sprintf("job-%07d", i) }
func jobName(i int) string {
	return fmt.Sprintf("Nightly %s export, customer c%07d", regions[i%len(regions)], i*7919%customerMod)
}

// seedManyTasks adds the generated tasks of the app, unless a previous
// complete seeding of as many is recorded in pagingbench_tasks_seeded.
func seedManyTasks(ctx context.Context, db *gorm.DB, total int) error {
	extra := total - taskCount
	db = db.WithContext(ctx)
	if err := db.Exec("CREATE TABLE IF NOT EXISTS pagingbench_tasks_seeded (fingerprint varchar(255) NOT NULL)").Error; err != nil {
		return fmt.Errorf("create pagingbench_tasks_seeded: %w", err)
	}
	fingerprint := fmt.Sprintf("v%d tasks=%d", tasksSeedVersion, total)
	var done []string
	if err := db.Raw("SELECT fingerprint FROM pagingbench_tasks_seeded").Scan(&done).Error; err != nil {
		return fmt.Errorf("read pagingbench_tasks_seeded: %w", err)
	}
	if len(done) == 1 && done[0] == fingerprint {
		logf("reusing the tasks seeded earlier (%s)", fingerprint)
		return nil
	}
	start := time.Now()
	for _, stmt := range []string{"DELETE FROM pagingbench_tasks_seeded",
		"DELETE FROM xtimer_tasks WHERE app = '" + benchApp + "' AND code LIKE 'job-%'"} {
		if err := db.Exec(stmt).Error; err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	const chunk = 250_000
	for lo := 0; lo < extra; lo += chunk {
		hi := min(lo+chunk, extra)
		if err := db.Exec(manyTasksSQL(db.Dialector.Name(), lo, hi)).Error; err != nil {
			return fmt.Errorf("insert tasks %d..%d: %w", lo, hi, err)
		}
		logf("inserted %d/%d generated tasks in %s", hi, extra, time.Since(start).Round(time.Second))
	}
	analyze := map[string]string{"postgres": "ANALYZE xtimer_tasks", "mysql": "ANALYZE TABLE xtimer_tasks"}[db.Dialector.Name()]
	if analyze != "" {
		if err := db.Exec(analyze).Error; err != nil {
			return fmt.Errorf("%s: %w", analyze, err)
		}
	}
	if err := db.Exec("INSERT INTO pagingbench_tasks_seeded (fingerprint) VALUES (?)", fingerprint).Error; err != nil {
		return fmt.Errorf("record the tasks' seeding: %w", err)
	}
	return nil
}

// manyTasksSQL generates tasks lo <= i < hi. Every value is an integer
// computed here or a constant.
func manyTasksSQL(dialect string, lo, hi int) string {
	var code, name, gen string
	region := "CASE i % 8"
	for k, r := range regions {
		region += fmt.Sprintf(" WHEN %d THEN '%s'", k, r)
	}
	region += " END"
	customer := fmt.Sprintf("(i * 7919 %% %d)", customerMod)
	switch dialect {
	case "postgres":
		code = "'job-' || lpad(i::text, 7, '0')"
		name = "'Nightly ' || " + region + " || ' export, customer c' || lpad(" + customer + "::text, 7, '0')"
		gen = fmt.Sprintf("SELECT i FROM generate_series(%d::bigint, %d::bigint) AS g(i)", lo, hi-1)
	case "mysql":
		code = "CONCAT('job-', LPAD(i, 7, '0'))"
		name = "CONCAT('Nightly ', " + region + ", ' export, customer c', LPAD(" + customer + ", 7, '0'))"
		gen = fmt.Sprintf("SELECT seq AS i FROM seq_%d_to_%d", lo, hi-1)
	case "sqlite":
		code = "printf('job-%07d', i)"
		name = "'Nightly ' || " + region + " || ' export, customer c' || printf('%07d', " + customer + ")"
		gen = fmt.Sprintf("WITH RECURSIVE g(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM g WHERE i < %d) SELECT i FROM g", lo, hi-1)
	}
	return fmt.Sprintf(`INSERT INTO xtimer_tasks (app, code, name, description, owner, kind, spec, dialect, time_zone, status,
  created_ms, updated_ms, version)
SELECT '%s', %s, %s, '', 'exports', 'func', '0 3 * * *', 'cron', 'UTC', CASE WHEN i %% 7 = 0 THEN 'paused' ELSE 'active' END,
  %d, %d, 1
FROM (%s) AS numbers`, benchApp, code, name, baseMs, baseMs, gen)
}

// rollUpHistory rolls up every seeded day but the last two, as the
// retention sweep of a live app has done (internal/engine/retention.go):
// the task page's 30-day chart reads those days from xtimer_rollups and
// counts only the last ones live. RollupDay leaves a day rolled up already
// as it is.
func rollUpHistory(ctx context.Context, st *store.Store, p plan) error {
	start := time.Now()
	last := (p.toMs-1)/dayMs - 2
	for day := p.fromMs / dayMs; day <= last; day++ {
		if _, err := st.RollupDay(ctx, benchApp, day); err != nil {
			return err
		}
	}
	logf("rolled up the seeded days in %s", time.Since(start).Round(time.Second))
	return nil
}

// consoleCase is one line of the console's table: a page or API list,
// loaded from a URL that url(i) builds for load i, and checked by check.
type consoleCase struct {
	name string
	url  func(i int) string
	// check inspects a 200 answer's body; nil checks the status only.
	check func(u string, body []byte) error
}

// bench is the console under measurement.
type consoleBench struct {
	srv    *httptest.Server
	st     *store.Store
	base   string // the server's URL and the console's prefix
	client *http.Client
}

// newConsoleBench mounts the console of a scheduler whose clock stands at
// the end of the seeded history, so that the task page's last day and
// last days hold executions, as they do for a live app.
func newConsoleBench(db *gorm.DB, st *store.Store, p plan) (*consoleBench, func(), error) {
	s, err := xtimer.New(xtimer.Options{DB: db, App: benchApp, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock: fakeclock.New(time.UnixMilli(p.toMs).UTC()), ClockReference: xtimer.ClockReferenceOff})
	if err != nil {
		return nil, nil, err
	}
	h, err := admin.New(s, admin.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(admin.DefaultPrefix, h)
	srv := httptest.NewServer(mux)
	return &consoleBench{srv: srv, st: st, base: srv.URL + admin.DefaultPrefix, client: srv.Client()}, srv.Close, nil
}

// get loads u and returns its body; anything but 200 is an error.
func (b *consoleBench) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d: %.300s", u, resp.StatusCode, body)
	}
	return body, nil
}

// apiTasks is the part of GET api/tasks the checks read.
type apiTasks struct {
	Data []struct {
		Code, Name string
	}
	Next string
}

// searchTerm is a text search case and its term for load i.
type searchTerm struct {
	name string
	term func(i int) string
	// first returns the codes the first page must hold, from the
	// generator's formulas; nil checks only that each task listed matches.
	first func(term string) []string
}

func measureConsole(ctx context.Context, db *gorm.DB, st *store.Store, p plan, total int, only string, loads int, seed uint64) ([]result, error) {
	b, stop, err := newConsoleBench(db, st, p)
	if err != nil {
		return nil, err
	}
	defer stop()
	r := rand.New(rand.NewPCG(seed, seed^0x51afd7ed558ccd))
	c := &checker{}
	extra := total - taskCount
	q := func(path string, kv ...string) string {
		v := url.Values{"app": {benchApp}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return b.base + path + "?" + v.Encode()
	}
	randomJob := func() int { return r.IntN(max(extra, 1)) }
	deep := func(int) string { return jobCode(randomJob()) }

	// The text searches, each through the API (checked) and the page.
	terms := []searchTerm{
		{"code substring (5 digits)", func(int) string { return fmt.Sprintf("%05d", r.IntN(100_000)) }, nil},
		{"code prefix (job- and 4 digits)", func(int) string { return fmt.Sprintf("job-%04d", r.IntN(max(extra/1000, 1))) }, prefixPage},
		{"name word, common (region)", func(int) string { return regions[r.IntN(len(regions))] }, regionPage},
		{"name word, rare (customer number)", func(int) string {
			return fmt.Sprintf("c%07d", randomJob()*7919%customerMod)
		}, nil},
		{"matches nothing", func(int) string { return fmt.Sprintf("zqx%06d", r.IntN(1_000_000)) }, func(string) []string { return nil }},
	}
	day := func() (string, string) {
		from := p.fromMs + r.Int64N(max((p.toMs-p.fromMs)/dayMs, 1))*dayMs
		return time.UnixMilli(from).UTC().Format(time.RFC3339), time.UnixMilli(from + dayMs).UTC().Format(time.RFC3339)
	}
	task := func() string { return taskCode(r.IntN(taskCount)) }
	cases := []consoleCase{
		{"tasks page, first", func(int) string { return q("") }, nil},
		{"tasks page, deep (after a random code)", func(i int) string { return q("", "after", deep(i)) }, nil},
		{"api/tasks, first", func(int) string { return q("api/tasks") }, checkTasks(st, "")},
		{"api/tasks, deep", func(i int) string { return q("api/tasks", "after", deep(i)) }, checkTasks(st, "")},
	}
	for _, t := range terms {
		cases = append(cases,
			consoleCase{"search page, " + t.name, func(i int) string { return q("", "q", t.term(i)) }, nil},
			consoleCase{"api/tasks?q=, " + t.name, func(i int) string { return q("api/tasks", "q", t.term(i)) }, checkSearch(st, t.first)})
	}
	execs := []struct {
		name string
		kv   func() []string
	}{
		{"no filter", func() []string { return nil }},
		{"task", func() []string { return []string{"task", task()} }},
		{"status=failed", func() []string { return []string{"status", store.StatusFailed} }},
		{"source=manual", func() []string { return []string{"source", store.SourceManual} }},
		{"replica, current", func() []string {
			return []string{"replica", replicaName(p.generations()-1, r.IntN(replicas))}
		}},
		{"replica, any", func() []string {
			return []string{"replica", replicaName(r.IntN(p.generations()), r.IntN(replicas))}
		}},
		{"1-day range", func() []string { from, to := day(); return []string{"from", from, "to", to} }},
		{"task + status=failed", func() []string { return []string{"task", task(), "status", store.StatusFailed} }},
	}
	for _, e := range execs {
		cases = append(cases,
			consoleCase{"executions page, " + e.name, func(int) string { return q("executions", e.kv()...) }, nil},
			consoleCase{"api/executions, " + e.name, func(int) string { return q("api/executions", e.kv()...) }, checkExecutions})
	}
	cases = append(cases,
		consoleCase{"task page", func(int) string { return q("tasks/" + task()) }, nil},
		consoleCase{"api/tasks/{code}", func(int) string { return q("api/tasks/" + task()) }, nil},
	)

	var results []result
	for _, cs := range cases {
		if !strings.Contains(cs.name, only) {
			continue
		}
		res := result{name: cs.name}
		for i := range loads {
			u := cs.url(i)
			t := time.Now()
			body, err := b.get(ctx, u)
			res.times = append(res.times, time.Since(t))
			res.loads++
			if err != nil {
				c.failf("%s: %v", cs.name, err)
				continue
			}
			res.rows += len(body) / 1024
			if cs.check != nil {
				if err := cs.check(u, body); err != nil {
					c.failf("%s: %s: %v", cs.name, u, err)
				}
			}
		}
		logf("%s: done", cs.name)
		results = append(results, res)
	}
	if len(c.failures) > 0 {
		return results, fmt.Errorf("%d console checks failed; the first: %s", len(c.failures), c.failures[0])
	}
	return results, nil
}

// checkTasks checks a page of api/tasks: codes strictly ascending, after
// the request's after, each matching the request's q as the store's
// backend defines it (store.Store.MatchesText).
func checkTasks(st *store.Store, _ string) func(u string, body []byte) error {
	return func(u string, body []byte) error {
		var got apiTasks
		if err := json.Unmarshal(body, &got); err != nil {
			return err
		}
		pu, err := url.Parse(u)
		if err != nil {
			return err
		}
		prev, term := pu.Query().Get("after"), pu.Query().Get("q")
		for _, t := range got.Data {
			if t.Code <= prev {
				return fmt.Errorf("task %s listed after %s", t.Code, cmp.Or(prev, `""`))
			}
			if term != "" && !st.MatchesText(store.Task{Code: t.Code, Name: t.Name}, term) {
				return fmt.Errorf("task %s (%q) does not match %q", t.Code, t.Name, term)
			}
			prev = t.Code
		}
		if got.Next != "" && len(got.Data) != store.DefaultListLimit {
			return fmt.Errorf("%d tasks and a next page; want %d", len(got.Data), store.DefaultListLimit)
		}
		return nil
	}
}

// checkSearch checks a search's first page as checkTasks does, and, when
// first is not nil, that it holds exactly the codes first says.
func checkSearch(st *store.Store, first func(term string) []string) func(u string, body []byte) error {
	rows := checkTasks(st, "")
	return func(u string, body []byte) error {
		if err := rows(u, body); err != nil {
			return err
		}
		var got apiTasks
		if err := json.Unmarshal(body, &got); err != nil {
			return err
		}
		if first == nil {
			return nil
		}
		pu, err := url.Parse(u)
		if err != nil {
			return err
		}
		want := first(pu.Query().Get("q"))
		codes := make([]string, len(got.Data))
		for i, t := range got.Data {
			codes[i] = t.Code
		}
		if !slices.Equal(codes, want) {
			return fmt.Errorf("first page %v, want %v", codes, want)
		}
		return nil
	}
}

// prefixPage is the first page of a search for "job-" and four digits:
// the next 50 codes in order on every backend (no name holds "job-").
func prefixPage(term string) []string {
	var out []string
	for k := range store.DefaultListLimit {
		out = append(out, fmt.Sprintf("%s%03d", term, k))
	}
	return out
}

// regionPage is the first page of a search for a region: every eighth
// generated task from the region's first, on every backend (no code and no
// other name holds a region's word).
func regionPage(term string) []string {
	k := slices.Index(regions, term)
	var out []string
	for i := range store.DefaultListLimit {
		out = append(out, jobCode(k+i*len(regions)))
	}
	return out
}

// checkExecutions checks a page of api/executions: rows match the
// request's filters and (run_time, id) descends.
func checkExecutions(u string, body []byte) error {
	var got struct {
		Data []struct {
			ID      int64     `json:"id"`
			Task    string    `json:"task"`
			Status  string    `json:"status"`
			Source  string    `json:"source"`
			Replica string    `json:"replica"`
			RunTime time.Time `json:"run_time"`
		}
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return err
	}
	pu, err := url.Parse(u)
	if err != nil {
		return err
	}
	v := pu.Query()
	var from, to time.Time
	if s := v.Get("from"); s != "" {
		from, _ = time.Parse(time.RFC3339, s)
		to, _ = time.Parse(time.RFC3339, v.Get("to"))
	}
	var last struct {
		t  time.Time
		id int64
	}
	for i, e := range got.Data {
		for _, f := range []struct{ name, want, got string }{
			{"task", v.Get("task"), e.Task}, {"status", v.Get("status"), e.Status},
			{"source", v.Get("source"), e.Source}, {"replica", v.Get("replica"), e.Replica},
		} {
			if f.want != "" && f.want != f.got {
				return fmt.Errorf("execution %d has %s %q, want %q", e.ID, f.name, f.got, f.want)
			}
		}
		if !from.IsZero() && (e.RunTime.Before(from) || !e.RunTime.Before(to)) {
			return fmt.Errorf("execution %d at %s is outside [%s, %s)", e.ID, e.RunTime, from, to)
		}
		if i > 0 && (e.RunTime.After(last.t) || e.RunTime.Equal(last.t) && e.ID >= last.id) {
			return fmt.Errorf("execution %d (%s) listed after %d (%s)", e.ID, e.RunTime, last.id, last.t)
		}
		last.t, last.id = e.RunTime, e.ID
	}
	if len(got.Data) == 0 && len(v) == 1 {
		return fmt.Errorf("no executions at all")
	}
	return nil
}

// printConsoleTable prints the console's cases as printTable does.
func printConsoleTable(total int, p plan, results []result) {
	fmt.Printf("\nConsole through admin.New's http.Handler (httptest, loopback): app of %d tasks, %d executions; "+
		"pages of %d (the console's default). \"KiB/load\" is the answer's size.\n\n", total, p.rows, store.DefaultListLimit)
	fmt.Println("| page or list | loads | KiB/load | p50 ms | p95 ms | max ms |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, res := range results {
		slices.SortFunc(res.times, cmp.Compare)
		fmt.Printf("| %s | %d | %.0f | %s | %s | %s |\n", res.name, res.loads, float64(res.rows)/float64(res.loads),
			ms(percentile(res.times, 50)), ms(percentile(res.times, 95)), ms(res.times[len(res.times)-1]))
	}
}
