package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// plan is one run: one system, one workload (or one scale size), fresh
// services, R replica processes.
type plan struct {
	system   string
	workload string
	tasks    int
	shards   int    // every task's WithShards; 0 for none (xtimer only)
	spec     string // every task's spec; "" when specAt builds it
	// window is how long fires are measured: from the warm-up after the
	// last replica is ready (steady, failover, throughput), or from the
	// fire instant (burst).
	window time.Duration
	// lead, for burst: the fire instant F is chosen at least lead after
	// the replicas start, and spec is built from it.
	lead      time.Duration
	topMinute bool                     // F on a top of minute (burst)
	specAt    func(f time.Time) string // builds spec from F
	afterFire time.Duration            // burst: measured after the window, for late fires
	kill      bool                     // failover: SIGKILL the busiest replica at half window
	idle      time.Duration            // scale: idle CPU window; no fires measured
	ready     time.Duration            // how long replicas may take to be ready
	// distinct: task i's spec is distinctSpec(i, tasks), not spec (which
	// then only describes them).
	distinct bool
	// restart (distinct): after the window, SIGKILL a replica, start it
	// again against the populated tables and time its start-up.
	restart bool
	// history is the executions rows seeded before the replicas start
	// (history.go); 0 for none.
	history int64
}

// replicaProc is one replica process of a run.
type replicaProc struct {
	n       int
	cmd     *exec.Cmd
	rec     string
	log     string
	ready   chan int64 // start-up ms, once
	done    chan struct{}
	killed  bool
	cpuFrom float64 // CPU seconds at the window start
	// hwmMB is the process's peak RSS (VmHWM) read just before it was
	// signalled. rusage's Maxrss cannot serve: a child started by fork +
	// exec carries the coordinator's peak in it.
	hwmMB float64
}

func (r *replicaProc) alive() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// coordinator runs plans one after another.
type coordinator struct {
	bin      string
	tmp      string
	replicas int
	workers  int
	warmup   time.Duration
	tail     time.Duration
	tpl      *templates
	keep     bool
	// killOffset shifts the failover kill from the half-window instant (a
	// whole second, when every-second fires are being started).
	killOffset time.Duration
	// durabilityOff trades the databases' durability for speed
	// (-durability-off); by default they run at their default durability.
	durabilityOff bool
}

// logf writes a line of the bench's log to stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// run executes p and returns its result; failures to run are the
// result's NA, never an error that stops the other runs.
func (c *coordinator) run(p plan) *result {
	res := &result{System: p.system, Workload: p.workload, Tasks: p.tasks, Shards: p.shards, Replicas: c.replicas,
		Workers: c.workers, History: p.history}
	if p.shards > 1 && !hasShards(p.system) {
		res.NA = "no sharded fires (only xtimer has WithShards)"
		return res
	}
	if na := distinctNA(p.system); p.distinct && na != "" {
		res.NA = na
		return res
	}
	dir, err := os.MkdirTemp(c.tmp, p.system+"-"+p.workload+"-")
	if err != nil {
		res.NA = err.Error()
		return res
	}
	if !c.keep {
		defer removeSettled(dir, logf)
	}
	// PostgreSQL runs as postgres and must reach its dir under ours.
	_ = os.Chmod(dir, 0o755)
	needPG, needMy := needs(p.system)
	svc, err := startServices(c.tpl, dir, needPG, needMy, c.durabilityOff, p.history)
	if err != nil {
		res.NA = "services: " + err.Error()
		return res
	}
	if p.history > 0 {
		res.SeedS = round(c.tpl.seedTime(needPG, p.history).Seconds(), 1)
		if err := checkHistory(svc, p.history); err != nil {
			res.NA = "history: " + err.Error()
			return res
		}
	}
	defer svc.close()
	if err := c.runReplicas(p, svc, dir, res); err != nil {
		res.NA = err.Error()
	}
	return res
}

func (c *coordinator) runReplicas(p plan, svc *services, dir string, res *result) error {
	started := time.Now()
	var fireAt time.Time
	spec := p.spec
	if p.specAt != nil {
		fireAt = chooseFireAt(started.Add(p.lead), p.topMinute, p.window)
		spec = p.specAt(fireAt)
	}
	res.Spec = spec

	counters, err := newCounters(svc)
	if err != nil {
		return err
	}
	defer counters.close()

	// The invocation files hold every fire the run can have, with room.
	perSecond := p.tasks * max(p.shards, 1)
	runLen := p.lead + p.window + p.idle + c.warmup + c.tail + p.ready + 30*time.Second
	capacity := int64(perSecond)*int64(runLen/time.Second) + 4096
	if p.workload == "scale" || p.distinct {
		capacity = int64(p.tasks) + 4096 // a daily spec: at most one fire each
	}
	procs := make([]*replicaProc, c.replicas)
	defer func() {
		for _, r := range procs {
			if r != nil && r.alive() {
				_ = r.cmd.Process.Kill()
				<-r.done
			}
		}
	}()
	for i := range procs {
		r, startErr := c.startReplica(p, svc, dir, i, spec, capacity)
		if startErr != nil {
			return startErr
		}
		procs[i] = r
	}
	// Wait for every replica to say ready.
	deadline := time.After(p.ready)
	var startup []float64
	for _, r := range procs {
		select {
		case ms := <-r.ready:
			startup = append(startup, float64(ms)/1000)
		case <-r.done:
			return fmt.Errorf("replica %d exited before ready: %s", r.n, logReason(r.log))
		case <-deadline:
			return fmt.Errorf("not ready after %s (replica %d's last log line: %s)", p.ready, r.n, logReason(r.log))
		}
	}
	allReady := time.Now()
	res.StartupS = startup
	logf("%s/%s: %d replicas ready in %.1fs", p.system, condition(p.workload, p.history), len(procs), allReady.Sub(started).Seconds())

	if p.workload == "scale" {
		return c.measureIdle(p, procs, res)
	}
	if p.distinct {
		return c.measureDistinct(p, svc, dir, spec, capacity, procs, counters, allReady, res)
	}

	var winFrom, winTo time.Time
	if fireAt.IsZero() {
		winFrom = allReady.Add(c.warmup).Truncate(time.Second).Add(time.Second)
	} else {
		winFrom = fireAt
		if allReady.After(fireAt.Add(-time.Second)) {
			return fmt.Errorf("not ready before the fire instant (ready %.1fs after start, fire at +%.1fs)",
				allReady.Sub(started).Seconds(), fireAt.Sub(started).Seconds())
		}
	}
	winTo = winFrom.Add(p.window)
	res.WindowFrom, res.WindowTo = winFrom.UTC(), winTo.UTC()
	disk := sampleDisk(dir) // from now on; addDisk keeps the window's seconds
	defer disk.end()
	// Counters start before the window; what is counted after it is
	// divided by the fires scheduled from winFrom on.
	time.Sleep(time.Until(winFrom.Add(-500 * time.Millisecond)))
	if err = counters.snapshot(true); err != nil {
		return err
	}
	for _, r := range procs {
		r.cpuFrom = procCPU(r.cmd.Process.Pid)
	}
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	if p.kill {
		time.Sleep(time.Until(winFrom.Add(p.window/2 + c.killOffset)))
		victim := busiest(procs, time.Now())
		victim.hwmMB = procStatusMB(victim.cmd.Process.Pid, "VmHWM:")
		_ = victim.cmd.Process.Signal(syscall.SIGKILL)
		victim.killed = true
		res.Killed = fmt.Sprintf("replica %d at %s", victim.n, time.Now().UTC().Format("15:04:05.000"))
		res.killedAt = time.Now()
		logf("%s/%s: SIGKILL replica %d (most fires in the last second)", p.system, p.workload, victim.n)
	}
	time.Sleep(time.Until(winTo.Add(max(c.tail, p.afterFire))))
	c.stopAll(procs)
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	seconds := disk.end()
	time.Sleep(500 * time.Millisecond) // PostgreSQL backends flush their stats as they exit
	if err = counters.snapshot(false); err != nil {
		return err
	}

	var invs []invocation
	for _, r := range procs {
		if invs, err = readInvocations(r.rec, r.n, invs); err != nil {
			return err
		}
		res.addProcess(r)
	}
	analyze(res, invs, p, counters)
	res.addDisk(seconds)
	return nil
}

// chooseFireAt is the fire instant of burst: the first
// whole second at or after earliest (on a top of minute when asked) whose
// window stays inside one minute, so that one spec per task names it.
func chooseFireAt(earliest time.Time, topMinute bool, window time.Duration) time.Time {
	f := earliest.Truncate(time.Second).Add(time.Second)
	for {
		if topMinute && f.Second() != 0 {
			f = f.Truncate(time.Minute).Add(time.Minute)
			continue
		}
		if f.Second()+int(window/time.Second) > 60 {
			f = f.Truncate(time.Minute).Add(time.Minute)
			continue
		}
		return f.UTC()
	}
}

func (c *coordinator) startReplica(p plan, svc *services, dir string, n int, spec string, capacity int64) (*replicaProc, error) {
	return c.startReplicaAs(p, svc, dir, n, fmt.Sprintf("replica-%d", n), spec, capacity)
}

// startReplicaAs starts replica n with its invocation file and log named
// by name (a restarted replica keeps its number but not its files).
func (c *coordinator) startReplicaAs(p plan, svc *services, dir string, n int, name, spec string, capacity int64) (*replicaProc, error) {
	redisAddr, pgURL, myDSN := svc.env()
	r := &replicaProc{
		n:     n,
		rec:   filepath.Join(dir, name+".inv"),
		log:   filepath.Join(dir, name+".log"),
		ready: make(chan int64, 1),
		done:  make(chan struct{}),
	}
	args := []string{"replica", "-system", p.system, "-replica", strconv.Itoa(n), "-redis", redisAddr,
		"-pg", pgURL, "-mysql", myDSN, "-workers", strconv.Itoa(c.workers), "-tasks", strconv.Itoa(p.tasks),
		"-shards", strconv.Itoa(p.shards), "-spec", spec, "-rec", r.rec, "-cap", strconv.FormatInt(capacity, 10),
		"-distinct=" + strconv.FormatBool(p.distinct)}
	logf, err := os.Create(r.log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	r.cmd = cmd
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if ms, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				v, _ := strconv.ParseInt(ms, 10, 64)
				r.ready <- v
			}
		}
		_ = cmd.Wait()
		logf.Close()
		close(r.done)
	}()
	return r, nil
}

// stopAll sends SIGTERM to the live replicas and waits (SIGKILL after
// 20 s: Run promises a graceful stop within 10 s).
func (c *coordinator) stopAll(procs []*replicaProc) {
	for _, r := range procs {
		if r.alive() {
			r.hwmMB = procStatusMB(r.cmd.Process.Pid, "VmHWM:")
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, r := range procs {
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			logf("replica %d did not stop in 20 s: SIGKILL", r.n)
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	}
}

// busiest is the live replica that recorded the most fires started in
// the second before now: the lock holder or slot owner of the moment,
// whatever the system calls it.
func busiest(procs []*replicaProc, now time.Time) *replicaProc {
	var best *replicaProc
	bestN := -1
	from := now.Add(-time.Second).UnixMilli()
	for _, r := range procs {
		if !r.alive() {
			continue
		}
		invs, _ := readInvocations(r.rec, r.n, nil)
		n := 0
		for _, inv := range invs {
			if inv.started >= from {
				n++
			}
		}
		if n > bestN {
			best, bestN = r, n
		}
	}
	return best
}

// measureIdle is the scale workload after start-up: CPU over the idle
// window and resident memory at its end, per replica.
func (c *coordinator) measureIdle(p plan, procs []*replicaProc, res *result) error {
	time.Sleep(2 * time.Second) // let start-up work drain
	from := make([]float64, len(procs))
	for i, r := range procs {
		from[i] = procCPU(r.cmd.Process.Pid)
	}
	t0 := time.Now()
	time.Sleep(p.idle)
	el := time.Since(t0).Seconds()
	for i, r := range procs {
		if !r.alive() {
			return fmt.Errorf("replica %d died while idle: %s", r.n, firstLines(tail(r.log, 800)))
		}
		res.IdleCPUPct = append(res.IdleCPUPct, 100*(procCPU(r.cmd.Process.Pid)-from[i])/el)
		res.RSSMB = append(res.RSSMB, round(procStatusMB(r.cmd.Process.Pid, "VmRSS:"), 1))
	}
	c.stopAll(procs)
	for _, r := range procs {
		res.addProcess(r)
	}
	return nil
}

// measureDistinct is the distinct workload after the fleet's first
// start-up: over the window, each replica's CPU (as % of a core) while the
// fires of its tasks run, its RSS at the window's end, and the fires of the
// window; then one replica is SIGKILLed and started again against the
// populated tables, and its start-up timed.
func (c *coordinator) measureDistinct(p plan, svc *services, dir, spec string, capacity int64, procs []*replicaProc,
	counters *counters, allReady time.Time, res *result) error {
	winFrom := allReady.Add(c.warmup).Truncate(time.Second).Add(time.Second)
	winTo := winFrom.Add(p.window)
	res.WindowFrom, res.WindowTo = winFrom.UTC(), winTo.UTC()
	time.Sleep(time.Until(winFrom.Add(-500 * time.Millisecond)))
	if err := counters.snapshot(true); err != nil {
		return err
	}
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	time.Sleep(time.Until(winFrom))
	from := make([]float64, len(procs))
	for i, r := range procs {
		from[i] = procCPU(r.cmd.Process.Pid)
	}
	t0 := time.Now()
	time.Sleep(time.Until(winTo))
	el := time.Since(t0).Seconds()
	for i, r := range procs {
		if !r.alive() {
			return fmt.Errorf("replica %d died in the window: %s", r.n, firstLines(tail(r.log, 800)))
		}
		cpu := procCPU(r.cmd.Process.Pid) - from[i]
		res.cpuWindow += cpu
		res.IdleCPUPct = append(res.IdleCPUPct, round(100*cpu/el, 2))
		res.RSSMB = append(res.RSSMB, round(procStatusMB(r.cmd.Process.Pid, "VmRSS:"), 1))
	}
	time.Sleep(c.tail) // late fires of the window still land
	if err := counters.snapshot(false); err != nil {
		return err
	}
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	var invs []invocation
	var err error
	for _, r := range procs {
		if invs, err = readInvocations(r.rec, r.n, invs); err != nil {
			return err
		}
	}
	analyze(res, invs, p, counters)

	// The restart: the last replica, SIGKILLed, started again with the
	// same number against the tables the fleet filled.
	victim := procs[len(procs)-1]
	victim.hwmMB = procStatusMB(victim.cmd.Process.Pid, "VmHWM:")
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	victim.killed = true
	<-victim.done
	res.addProcess(victim)
	res.Killed = fmt.Sprintf("replica %d, restarted", victim.n)
	again, err := c.startReplicaAs(p, svc, dir, victim.n, fmt.Sprintf("replica-%d-restart", victim.n), spec, capacity)
	if err != nil {
		return err
	}
	procs[len(procs)-1] = again
	select {
	case ms := <-again.ready:
		res.RestartS = round(float64(ms)/1000, 2)
		logf("%s/%s: replica %d restarted, ready in %.1fs", p.system, p.workload, again.n, res.RestartS)
	case <-again.done:
		return fmt.Errorf("restarted replica %d exited before ready: %s", again.n, logReason(again.log))
	case <-time.After(p.ready):
		return fmt.Errorf("restarted replica %d not ready after %s: %s", again.n, p.ready, logReason(again.log))
	}
	c.stopAll(procs)
	for _, r := range procs {
		res.addProcess(r)
	}
	return nil
}

// procCPU is the user+system CPU seconds of a live process, from
// /proc/<pid>/stat (clock ticks of 1/100 s).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// loadAvg is the machine's 1-minute load average, 0 when unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// procStatusMB is a memory figure of a live process's /proc/<pid>/status
// (VmRSS:, VmHWM:) in MiB.
func procStatusMB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// logReason is the gist of a replica log's last line: its err="..."
// (slog's text form) when it has one, else the line.
func logReason(path string) string {
	lines := strings.Split(tail(path, 2000), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if i := strings.Index(last, `err="`); i >= 0 {
		msg := last[i+len(`err="`):]
		if j := strings.Index(msg, `" `); j >= 0 {
			msg = msg[:j]
		} else {
			msg = strings.TrimSuffix(msg, `"`)
		}
		return strings.ReplaceAll(msg, `\"`, `"`)
	}
	if last == "" {
		return "(empty log)"
	}
	return last
}

func firstLines(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// counters are the run's Redis and database counters, read at the window
// start and after the replicas exited.
type counters struct {
	rdb                *redis.Client
	db                 *gorm.DB
	kind               string
	redisFrom, redisTo int64
	rowsFrom, rowsTo   int64
	hasDB              bool
}

func newCounters(svc *services) (*counters, error) {
	c := &counters{rdb: redis.NewClient(&redis.Options{Addr: svc.redisAdr})}
	if err := c.rdb.Ping(context.Background()).Err(); err != nil {
		return nil, err
	}
	var err error
	if kind, dsn := svc.database(); kind != "" {
		c.kind, c.hasDB = kind, true
		c.db, err = openSQL(kind, dsn)
	}
	if err != nil {
		c.rdb.Close()
		return nil, err
	}
	return c, nil
}

func (c *counters) close() {
	_ = c.rdb.Close()
	if c.db != nil {
		closeSQL(c.db)
	}
}

func (c *counters) snapshot(from bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return fmt.Errorf("redis INFO commandstats: %w", err)
	}
	calls := redisCalls(info)
	rows := int64(0)
	switch c.kind {
	case "postgres":
		_ = c.db.WithContext(ctx).Exec("SELECT pg_stat_clear_snapshot()").Error
		err = c.db.WithContext(ctx).Raw(`SELECT COALESCE(SUM(tup_inserted + tup_updated + tup_deleted), 0)
			FROM pg_stat_database WHERE datname = current_database()`).Scan(&rows).Error
	case "mysql":
		// MariaDB 10.11 has no Innodb_rows_* any more: the handler
		// counters count the row writes, updates and deletes of every
		// engine (internal temporary tables apart, in Handler_tmp_*).
		var st []struct {
			VariableName string `gorm:"column:Variable_name"`
			Value        string `gorm:"column:Value"`
		}
		err = c.db.WithContext(ctx).Raw("SHOW GLOBAL STATUS WHERE Variable_name IN ('Handler_write', 'Handler_update', 'Handler_delete')").Scan(&st).Error
		for _, s := range st {
			v, _ := strconv.ParseInt(s.Value, 10, 64)
			rows += v
		}
	}
	if err != nil {
		return fmt.Errorf("database row counters: %w", err)
	}
	if from {
		c.redisFrom, c.rowsFrom = calls, rows
	} else {
		c.redisTo, c.rowsTo = calls, rows
	}
	return nil
}

// redisCalls sums the calls of INFO commandstats, except INFO itself
// (the harness's own reads).
func redisCalls(info string) int64 {
	var n int64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				x, _ := strconv.ParseInt(v, 10, 64)
				n += x
			}
		}
	}
	return n
}
