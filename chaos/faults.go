package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xtimer-go/xtimer/internal/store"
)

type faultKind string

// The fault kinds, in the order the summary line lists them.
const (
	faultKill         faultKind = "kill"
	faultStop         faultKind = "stop"
	faultRedisFlush   faultKind = "redis_flush"
	faultRedisRestart faultKind = "redis_restart"
	faultDBDown       faultKind = "db_down"
	faultSkew         faultKind = "skew"
	faultRolling      faultKind = "rolling"
)

var faultOrder = []faultKind{faultKill, faultStop, faultRedisFlush, faultRedisRestart, faultDBDown, faultSkew, faultRolling}

type fault struct {
	kind faultKind
	at   time.Duration // from the opening of the measured window
}

type window struct{ from, to time.Time }

// failoverRecord is one SIGKILL, SIGSTOP, cut or slow link (partition.go): the
// victim and the tasks of the fires it had recorded ahead, whose
// takeover maxFailover measures over the fires due from at to until.
type failoverRecord struct {
	kind    faultKind
	at      time.Time
	until   time.Time
	victim  string
	codes   map[string]bool
	bounded bool    // its figure counts in max_failover_s (a slow link's is only reported)
	gap     float64 // the slowest start, s; filled by maxFailover
	detail  string  // filled by maxFailover
	// grace is how long the engine waits, by design, before a takeover
	// can begin: a replica cut from its database lets its locks go only
	// once the database has not answered for a second (dbCutAfter), as
	// a slow link must not cost it its slots. The bound applies to the
	// gap less grace; the gap is reported whole.
	grace time.Duration
	// ownUntil: a frozen victim may have claimed (started) the fires due
	// until then before it froze (its clock's skew and the dispatcher's
	// claim lead, at most a second, ahead); run by itself once it wakes,
	// they are its own, not a failover.
	ownUntil time.Time
}

// A replica claims a fire ahead of its run time (by its claim lead, at
// most maxClaimLead) and starts its handler at the run time: a SIGKILL
// between the two leaves a row that says started and a handler that never
// ran. The engine cannot tell that row from a run killed midway, and
// settles both alike, failed with reason "replica lost", by the task's
// retry policy; it never starts the fire again as a first attempt
// (docs/architecture.md, "Claimed but not started"). The check counts such
// a fire as claimed at a kill, not missed, when its row says so and its
// run time is within maxClaimLead after the kill, or launchSlack before
// it: a dispatcher that woke that late for its run time had not started
// it yet. Anything else not invoked is missed.
const (
	maxClaimLead = time.Second            // the engine's (internal/engine/fire.go)
	launchSlack  = 250 * time.Millisecond // a late wake of the victim's dispatcher
)

// claimedAtKill names the SIGKILL that left row's fire claimed and not
// started, as above, or returns "" when none did.
func (h *harness) claimedAtKill(row *store.Execution) string {
	if row == nil || row.Status != store.StatusFailed || row.Reason != store.ReasonReplicaLost {
		return ""
	}
	due := time.UnixMilli(row.Planned())
	for _, f := range h.failovers {
		if f.kind == faultKill && f.victim == row.Replica && !due.Before(f.at.Add(-launchSlack)) && !due.After(f.at.Add(maxClaimLead)) {
			return fmt.Sprintf("SIGKILL of %s at %s, run time %+dms from it", f.victim, f.at.UTC().Format("15:04:05.000"), due.Sub(f.at).Milliseconds())
		}
	}
	return ""
}

// schedule derives the fault times from the seed. The rolling deploy comes
// first in every profile: while the extra task exists on one replica only,
// killing that replica would test nothing but its absence. A kill is never
// last: its running rows are rescued only after the replica timeout (30 s),
// which must end inside the run.
func (h *harness) schedule() []fault {
	rng := rand.New(rand.NewPCG(h.seed, h.seed^0x9e3779b97f4a7c15))
	kinds := append([]faultKind(nil), h.prof.faults...)
	if h.prof.name == "long" {
		rest := kinds[1:]
		rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		if rest[len(rest)-1] == faultKill {
			for i := len(rest) - 2; i >= 0; i-- {
				if rest[i] != faultKill {
					rest[i], rest[len(rest)-1] = rest[len(rest)-1], rest[i]
					break
				}
			}
		}
	}
	jitter := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)).Truncate(100*time.Millisecond)
	}
	var out []fault
	t := 3 * time.Second
	for _, k := range kinds {
		at := t + jitter(0, 2*time.Second)
		out = append(out, fault{k, at})
		t = at + h.duration(k) + jitter(h.prof.gapMin, h.prof.gapMax)
	}
	return out
}

// duration is roughly how long a fault lasts.
func (h *harness) duration(k faultKind) time.Duration {
	switch k {
	case faultKill:
		return h.prof.killWait + time.Second
	case faultStop:
		return stopFor
	case faultRedisRestart:
		return redisDown + time.Second
	case faultDBDown:
		return h.prof.dbDown + 2*time.Second
	case faultPGFailover:
		return h.prof.standbyLag + h.prof.promoteAfter + 3*time.Second
	case faultRolling:
		n := h.prof.replicas - max(1, h.prof.replicas/2)
		return time.Duration(n) * (h.prof.rollWait + 2*time.Second)
	case faultCutRedis, faultCutDB, faultCutBoth:
		return h.prof.cutFor
	case faultSlowDB:
		return h.prof.slowFor
	}
	return 0
}

func (h *harness) printSchedule(sched []fault) {
	var b strings.Builder
	for i, f := range sched {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "+%.1fs %s", f.at.Seconds(), f.kind)
	}
	skews := make([]string, h.prof.replicas)
	for i := range skews {
		skews[i] = h.skewOf(i).String()
	}
	fmt.Printf("chaos: seed=%d profile=%s replicas=%d tasks=%d length=%s skews=%s\n",
		h.seed, h.prof.name, h.prof.replicas, h.prof.tasks+1, h.prof.length, strings.Join(skews, ","))
	fmt.Printf("chaos: schedule: %s\n", b.String())
	if len(sched) == 0 {
		return
	}
	if end := sched[len(sched)-1].at + h.duration(sched[len(sched)-1].kind); end > h.prof.length-5*time.Second {
		fmt.Printf("chaos: warning: the schedule ends at +%.0fs, close to the end of the run (+%.0fs)\n", end.Seconds(), h.prof.length.Seconds())
	}
}

func (h *harness) inject(f fault) {
	h.counts[f.kind]++
	h.begun = append(h.begun, time.Now())
	switch f.kind {
	case faultKill:
		h.kill()
	case faultStop:
		h.freeze()
	case faultRedisFlush:
		c := redis.NewClient(&redis.Options{Addr: h.redis.addr()})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, _ := c.DBSize(ctx).Result()
		err := c.FlushAll(ctx).Err()
		cancel()
		_ = c.Close()
		h.logf("redis FLUSHALL (%d keys): %v", n, errText(err))
	case faultRedisRestart:
		h.logf("redis-server stopped for %s", redisDown)
		h.redis.stop()
		time.Sleep(redisDown)
		if err := h.redis.start(); err != nil {
			h.logf("redis-server did not start again: %v", err)
			return
		}
		h.logf("redis-server running again, empty")
	case faultDBDown:
		h.dbDown()
	case faultRolling:
		h.rolling()
	case faultPGFailover:
		h.pgFailover()
	case faultCutRedis, faultCutDB, faultCutBoth:
		h.cut(f.kind)
	case faultSlowDB:
		h.slowDB()
	case faultSentinelFailover:
		h.sentinelFailover()
	case faultClusterFailover:
		h.clusterFailover()
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// dbDown stops PostgreSQL with pg_ctl -m fast and starts it again. This is
// the real outage, not a simulated one: the server process is gone, every
// open connection is cut and new ones are refused, exactly what replicas
// see when their database fails over or restarts. (Dropping connections
// with pg_terminate_backend would let them reconnect at once; a proxy would
// test the proxy.)
func (h *harness) dbDown() {
	from := time.Now()
	if err := h.pg.stop("fast"); err != nil {
		h.logf("pg_ctl stop: %v", err)
	}
	h.logf("PostgreSQL stopped for %s", h.prof.dbDown)
	time.Sleep(time.Until(from.Add(h.prof.dbDown)))
	if err := h.pg.start(); err != nil {
		h.logf("PostgreSQL did not start again: %v", err)
	}
	h.mu.Lock()
	h.outages = append(h.outages, window{from, time.Now()})
	h.mu.Unlock()
	h.logf("PostgreSQL running again")
}

// owner picks the live, running replica that recorded the most upcoming
// fires: the owner of slots, so that killing or freezing it tests failover
// and fencing rather than an idle process. It returns the codes of those
// fires too.
func (h *harness) owner(exclude *replica) (*replica, map[string]bool) {
	h.mu.Lock()
	cands := map[string]*replica{}
	for _, r := range h.replicas {
		if r != exclude && !r.frozen && r.alive() {
			cands[r.id] = r
		}
	}
	h.mu.Unlock()
	type row struct {
		Replica string
		N       int
	}
	var rows []row
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	now := time.Now().UnixMilli()
	err := h.db.WithContext(ctx).Raw(`SELECT replica, count(*) AS n FROM xtimer_executions
		WHERE app = ? AND status = 'scheduled' AND run_time > ? GROUP BY replica ORDER BY n DESC, replica`, app, now).
		Scan(&rows).Error
	var victim *replica
	if err == nil {
		for _, r := range rows {
			if c := cands[r.Replica]; c != nil {
				victim = c
				break
			}
		}
	}
	if victim == nil { // nothing recorded ahead (or no answer): any replica
		for _, r := range h.replicas {
			if cands[r.id] != nil {
				victim = r
				break
			}
		}
	}
	if victim == nil {
		return nil, nil
	}
	codes := map[string]bool{}
	var list []string
	_ = h.db.WithContext(ctx).Raw(`SELECT DISTINCT task_code FROM xtimer_executions
		WHERE app = ? AND status = 'scheduled' AND run_time > ? AND replica = ?`, app, now, victim.id).Scan(&list).Error
	for _, c := range list {
		codes[c] = true
	}
	return victim, codes
}

func (h *harness) kill() {
	victim, codes := h.owner(nil)
	if victim == nil {
		h.logf("kill: no live replica")
		return
	}
	at := time.Now()
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	h.mu.Lock()
	h.failovers = append(h.failovers, failoverRecord{kind: faultKill, at: at, until: at.Add(15 * time.Second),
		victim: victim.id, codes: codes, bounded: true})
	h.mu.Unlock()
	h.logf("SIGKILL %s (recorded ahead fires of %d tasks); restart in %s", victim.id, len(codes), h.prof.killWait)
	time.Sleep(h.prof.killWait)
	if err := h.startReplica(victim.idx, victim.extra, victim.skew); err != nil {
		h.logf("restart after kill: %v", err)
	}
}

// freeze SIGSTOPs the slot owner for longer than the lock TTL: it wakes up
// believing it still owns its slots and holds armed timers for fires other
// replicas may have taken over.
func (h *harness) freeze() {
	victim, codes := h.owner(nil)
	if victim == nil {
		h.logf("stop: no live replica")
		return
	}
	at := time.Now()
	_ = victim.cmd.Process.Signal(syscall.SIGSTOP)
	h.mu.Lock()
	victim.frozen = true
	h.failovers = append(h.failovers, failoverRecord{kind: faultStop, at: at, until: at.Add(15 * time.Second),
		victim: victim.id, codes: codes, bounded: true, ownUntil: at.Add(victim.skew + time.Second)})
	h.mu.Unlock()
	h.logf("SIGSTOP %s (recorded ahead fires of %d tasks) for %s", victim.id, len(codes), stopFor)
	time.Sleep(stopFor)
	_ = victim.cmd.Process.Signal(syscall.SIGCONT)
	h.mu.Lock()
	victim.frozen = false
	h.mu.Unlock()
	h.logf("SIGCONT %s", victim.id)
}

// rolling upgrades, one by one, the replicas that run without the extra
// task: SIGTERM, wait for the graceful stop, start the new build.
func (h *harness) rolling() {
	h.mu.Lock()
	var old []*replica
	for _, r := range h.replicas {
		if !r.extra {
			old = append(old, r)
		}
	}
	h.mu.Unlock()
	for i, r := range old {
		if i > 0 {
			time.Sleep(h.prof.rollWait)
		}
		h.logf("rolling deploy: SIGTERM %s", r.id)
		if !r.term(15 * time.Second) {
			h.logf("rolling deploy: %s did not stop within 15 s; killed", r.id)
		}
		if err := h.startReplica(r.idx, true, r.skew); err != nil {
			h.logf("rolling deploy: %v", err)
		}
	}
}

// replica is one process of one replica slot; a restart is a new process
// with a new InstanceID (as a rescheduled pod gets a new name).
type replica struct {
	idx, gen int
	id       string
	extra    bool
	skew     time.Duration
	inv      string // invocation file
	stderr   string
	cmd      *exec.Cmd
	done     chan struct{}
	frozen   bool
}

func (r *replica) alive() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// term sends SIGTERM (and SIGCONT, should it be frozen) and waits; after
// wait it kills. It reports whether the process exited by itself.
func (r *replica) term(wait time.Duration) bool {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-r.done:
		return true
	case <-time.After(wait):
		_ = r.cmd.Process.Kill()
		<-r.done
		return false
	}
}

func (h *harness) startReplica(idx int, extra bool, skew time.Duration) error {
	h.mu.Lock()
	gen := 1
	for _, r := range h.all {
		if r.idx == idx {
			gen = max(gen, r.gen+1)
		}
	}
	h.mu.Unlock()
	r := &replica{idx: idx, gen: gen, id: fmt.Sprintf("r%d-g%d", idx, gen), extra: extra, skew: skew, done: make(chan struct{})}
	r.inv = filepath.Join(h.tmp, "inv", r.id+".log")
	r.stderr = filepath.Join(h.tmp, "logs", r.id+".log")
	errf, err := os.Create(r.stderr)
	if err != nil {
		return err
	}
	defer errf.Close()
	dsn, redisAddr := h.replicaLinks(idx)
	args := append([]string{"-app", app, "-dsn", dsn, "-id", r.id,
		"-tasks", fmt.Sprint(h.prof.tasks), "-log", r.inv}, h.redisArgs(redisAddr)...)
	if extra {
		args = append(args, "-extra")
	}
	if skew != 0 {
		args = append(args, "-skew="+skew.String()) // one argument: a negative offset reads as a value
	}
	r.cmd = exec.Command(h.bin, args...)
	r.cmd.Stdout, r.cmd.Stderr = errf, errf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start replica %s: %w", r.id, err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	h.mu.Lock()
	if idx < len(h.replicas) {
		h.replicas[idx] = r
	} else {
		h.replicas = append(h.replicas, r)
	}
	h.all = append(h.all, r)
	h.mu.Unlock()
	if !h.start.IsZero() {
		flags := ""
		if extra {
			flags += " -extra"
		}
		if skew != 0 {
			flags += " -skew=" + skew.String()
		}
		h.logf("started %s%s", r.id, flags)
	}
	return nil
}

// waitReplicas waits until every replica has written its heartbeat row.
func (h *harness) waitReplicas(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var n int64
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := h.db.WithContext(ctx).Raw(`SELECT count(*) FROM xtimer_replicas WHERE app = ?`, app).Scan(&n).Error
		cancel()
		if err == nil && n >= int64(h.prof.replicas) {
			return nil
		}
		for _, r := range h.replicas {
			if !r.alive() {
				return fmt.Errorf("replica %s exited during start (see its log)", r.id)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the replicas did not heartbeat within %s", limit)
}

// stopAll sends SIGTERM to every replica at once and waits (each replica
// stops with a 10 s deadline; after 20 s it is killed).
func (h *harness) stopAll() {
	h.mu.Lock()
	reps := append([]*replica(nil), h.replicas...)
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range reps {
		wg.Go(func() {
			if r.alive() && !r.term(20*time.Second) {
				h.logf("%s did not stop within 20 s of SIGTERM; killed", r.id)
			}
		})
	}
	wg.Wait()
}

// killAll is the cleanup for replicas still running after a failure.
func (h *harness) killAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.all {
		if r.alive() {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Process.Signal(syscall.SIGCONT)
			<-r.done
		}
	}
}

// tails prints the last lines of the logs of the given replicas (of all
// of them when ids is empty).
func (h *harness) tails(ids map[string]bool) {
	h.mu.Lock()
	reps := append([]*replica(nil), h.all...)
	h.mu.Unlock()
	for _, r := range reps {
		if len(ids) > 0 && !ids[r.id] {
			continue
		}
		data, err := os.ReadFile(r.stderr)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Printf("chaos: --- last lines of %s (%s)\n", r.id, r.stderr)
		for _, l := range lines {
			fmt.Println("    " + l)
		}
	}
}
