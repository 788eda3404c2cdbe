package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

func openDB(dsn string) (*gorm.DB, error) {
	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dsn, err)
	}
	return db, nil
}

// fireKey names a fire, or one shard of a sharded or broadcast fire
// (shard 0 for a task that is not sharded).
type fireKey struct {
	code  string
	at    int64 // run time, Unix ms
	shard int
}

// id is the fire's Run.ID: "app/code/run_time_ms", with "/shard" after it
// for a shard.
func (k fireKey) id() string {
	s := app + "/" + k.code + "/" + strconv.FormatInt(k.at, 10)
	if isSharded(k.code) {
		s += "/" + strconv.Itoa(k.shard)
	}
	return s
}

// invocation is one line of a replica's invocation file.
type invocation struct {
	started int64 // Unix ms, real time
	replica string
	attempt int
	shards  int // Run.Shards: 1 for a task that is not sharded
}

func (i invocation) String() string {
	return fmt.Sprintf("%s@%s(attempt %d)", i.replica, time.UnixMilli(i.started).UTC().Format("15:04:05.000"), i.attempt)
}

// readInvocations reads every invocation file, of every process that ran:
// the handler calls, and the end of the buffer tasks' runs (Unix ms,
// real time). A line is "code run_time_ms shard shards unix_ms replica
// attempt", with "end" after it for the end of a run.
func (h *harness) readInvocations() (map[fireKey][]invocation, map[fireKey]int64, error) {
	out, ends := map[fireKey][]invocation{}, map[fireKey]int64{}
	for _, r := range h.all {
		f, err := os.Open(r.inv)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			end := len(fs) == 8 && fs[7] == "end"
			if len(fs) != 7 && !end {
				f.Close()
				return nil, nil, fmt.Errorf("%s: malformed line %q", r.inv, sc.Text())
			}
			at, err1 := strconv.ParseInt(fs[1], 10, 64)
			shard, err2 := strconv.Atoi(fs[2])
			shards, err3 := strconv.Atoi(fs[3])
			started, err4 := strconv.ParseInt(fs[4], 10, 64)
			attempt, err5 := strconv.Atoi(fs[6])
			if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("%s: malformed line %q: %w", r.inv, sc.Text(), err)
			}
			k := fireKey{fs[0], at, shard}
			if end {
				ends[k] = started
				continue
			}
			out[k] = append(out[k], invocation{started, fs[5], attempt, shards})
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, nil, err
		}
	}
	for _, inv := range out {
		sort.Slice(inv, func(i, j int) bool { return inv[i].started < inv[j].started })
	}
	return out, ends, nil
}

func rowText(r *store.Execution) string {
	if r == nil {
		return "no execution row"
	}
	s := fmt.Sprintf("row %d status=%s", r.ID, r.Status)
	if r.Reason != "" {
		s += fmt.Sprintf(" reason=%q", r.Reason)
	}
	s += fmt.Sprintf(" source=%s attempt=%d replica=%q", r.Source, r.Attempt, r.Replica)
	if r.Shards > 0 || r.Broadcast {
		s += fmt.Sprintf(" shard=%d/%d broadcast=%t", r.Shard, r.Shards, r.Broadcast)
	}
	if r.StartedMs != 0 {
		s += fmt.Sprintf(" started=%s", time.UnixMilli(r.StartedMs).UTC().Format("15:04:05.000"))
	}
	if r.Error != "" {
		s += fmt.Sprintf(" error=%q", r.Error)
	}
	return s
}

// broken collects the examples of one broken promise.
type broken struct {
	promise  string
	n        int
	examples []string
}

func (b *broken) add(s string) {
	b.n++
	if len(b.examples) < 5 {
		b.examples = append(b.examples, s)
	}
}

// check reads the invocation files and the execution rows and prints the
// summary line; it returns the exit code.
//
// The measured window is every whole second from h.start (3 s after every
// replica's first heartbeat) to 2 s before the final SIGTERM. For every
// task and every second in it, the fire must have been invoked exactly
// once, or recorded skipped with a reason. Duplicates are counted over
// every invocation, inside the window or not.
func (h *harness) check() int {
	invs, ends, err := h.readInvocations()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: read invocations:", err)
		return 2
	}
	var rows []store.Execution
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.db.WithContext(ctx).Where("app = ?", app).Find(&rows).Error; err != nil {
		fmt.Fprintln(os.Stderr, "chaos: read execution rows:", err)
		return 2
	}
	byFire := make(map[fireKey]*store.Execution, len(rows))
	for i := range rows {
		byFire[fireKey{rows[i].TaskCode, rows[i].RunTime, rows[i].Shard}] = &rows[i]
	}
	loss := h.failoverLoss(rows, invs)
	loss.trim(invs)

	from := h.start.UnixMilli()
	to := h.stopAt.Add(-2 * time.Second).Truncate(time.Second).UnixMilli()
	codes := []string{extraCode}
	for i := range h.prof.tasks {
		codes = append(codes, taskCode(i))
	}
	for code := range bufferSkips {
		codes = append(codes, code)
	}
	codes = append(codes, jitterTasks...)
	slices.Sort(codes)
	inOutage := func(at int64) bool {
		// A fire is in an outage from the stop until 20 s after the start:
		// catching up takes a few ticks once the database answers.
		for _, o := range h.outages {
			if at >= o.from.UnixMilli()-1000 && at <= o.to.Add(20*time.Second).UnixMilli() {
				return true
			}
		}
		return false
	}

	var (
		fires, once, skipped int
		queued               int // buffered fires still in line when the fleet stopped (bufferQueue)
		lateness             []int64
		dup                  = &broken{promise: "once: a fire was invoked more than once"}
		missed               = &broken{promise: "nothing lost: a fire was neither invoked nor recorded skipped"}
		stuck                = &broken{promise: "nothing lost: an execution row is not in a final status"}
		skippedOutside       = &broken{promise: "note: recorded skipped outside a database outage (missed with -strict)"}
		overlapped           = &broken{promise: "overlap: a buffer task's run started before the run before it ended"}
		mismatch             = &broken{promise: "note: invoked, but the row says otherwise"}
		claimed              = &broken{promise: "note: claimed by a replica when it was SIGKILLed, never started: settled failed, replica lost, by the retry policy"}
		involved             = map[string]bool{}
	)
	for k, inv := range invs {
		if len(inv) > 1 && !isSharded(k.code) { // shards: shardCheck
			var who []string
			for _, i := range inv {
				who = append(who, i.String())
				involved[i.replica] = true
			}
			dup.add(fmt.Sprintf("%s invoked %d times: %s; %s", k.id(), len(inv), strings.Join(who, ", "), rowText(byFire[k])))
		}
	}
	for _, code := range codes {
		step, end := int64(1000), to
		skips, buffer := bufferSkips[code]
		if buffer {
			step, end = 2000, to-bufferTail.Milliseconds()
		}
		if slices.Contains(jitterTasks, code) {
			step, end = jitterStep, to-jitterStep // a fire's start may fall after the final SIGTERM
		}
		queuedFrom := int64(math.MaxInt64)
		if buffer {
			queuedFrom = bufferQueue(code, (from+step-1)/step*step, end, step, invs, byFire)
		}
		for at := (from + step - 1) / step * step; at < end; at += step {
			k := fireKey{code: code, at: at}
			fires++
			inv, row := invs[k], byFire[k]
			if at >= queuedFrom {
				queued++
				continue
			}
			var kill string // the SIGKILL that left the fire claimed, not started
			if len(inv) == 0 {
				kill = h.claimedAtKill(row)
			}
			switch {
			case len(inv) == 1:
				once++
			case len(inv) == 0 && row != nil && skips && row.Status == store.StatusSkipped && row.Reason == store.ReasonOverlap:
				skipped++ // the policy's own skip
			case len(inv) == 0 && row != nil && row.Status == store.StatusSkipped && row.Reason != "" && (!h.strict || inOutage(at)):
				skipped++
				if !inOutage(at) {
					skippedOutside.add(k.id() + ": " + rowText(row))
				}
			case len(inv) == 0 && loss.excused(k):
				// counted by loss
			case kill != "":
				claimed.add(k.id() + ": " + kill + "; " + rowText(row))
			case len(inv) == 0:
				missed.add(k.id() + ": " + rowText(row))
				if row != nil && row.Replica != "" {
					involved[row.Replica] = true
				}
			}
			if len(inv) > 0 && !buffer { // a buffered fire waits by design
				due := at
				if row != nil {
					due = row.Planned() // a jittered fire is due at its planned start
				}
				lateness = append(lateness, inv[0].started-due)
			}
			if len(inv) > 0 {
				if row != nil && row.Status != store.StatusSucceeded && row.Status != store.StatusRunning {
					mismatch.add(k.id() + ": invoked by " + inv[0].String() + "; " + rowText(row))
				}
			}
			if row != nil && !final(row.Status) && !loss.excused(k) {
				stuck.add(k.id() + ": " + rowText(row))
				if row.Replica != "" {
					involved[row.Replica] = true
				}
			}
		}
	}

	h.checkBuffered(invs, ends, overlapped)
	sc := newShardCheck(invs, rows, byFire)
	sc.from, sc.to, sc.strict, sc.inOutage = from, to, h.strict, inOutage
	sc.stuck, sc.skippedOutside, sc.mismatch, sc.claimed, sc.involved = stuck, skippedOutside, mismatch, claimed, involved
	sc.claimedAtKill = h.claimedAtKill
	sc.run()
	p99 := percentile(lateness, 0.99)
	failover, perKind := h.maxFailover(invs)

	faults := make([]string, len(faultOrder))
	for i, f := range faultOrder {
		faults[i] = fmt.Sprintf("%s:%d", f, h.counts[f])
	}
	var exit int
	for _, b := range []*broken{dup, missed, stuck, overlapped, sc.dup, sc.missed, sc.twice, sc.elsewhere, sc.shape} {
		if b.n > 0 {
			exit = 1
			fmt.Printf("chaos: BROKEN %s: %d, e.g.\n", b.promise, b.n)
			for _, e := range b.examples {
				fmt.Println("    " + e)
			}
		}
	}
	if b := h.clockLateness(lateness); b != nil {
		exit = 1
		fmt.Printf("chaos: BROKEN %s: %d, e.g.\n", b.promise, b.n)
		for _, e := range b.examples {
			fmt.Println("    " + e)
		}
	}
	if failover > failoverBound.Seconds() {
		exit = 1
		fmt.Printf("chaos: BROKEN failover: max_failover_s=%.1f > %.1f\n", failover, failoverBound.Seconds())
		for _, k := range h.failovers {
			if k.bounded {
				fmt.Printf("    %s %s at %s: %s\n", k.kind, k.victim, k.at.UTC().Format("15:04:05.000"), k.detail)
				involved[k.victim] = true
			}
		}
	}
	for _, b := range []*broken{skippedOutside, mismatch, claimed} {
		if b.n > 0 {
			fmt.Printf("chaos: %s: %d, e.g.\n", b.promise, b.n)
			for _, e := range b.examples {
				fmt.Println("    " + e)
			}
		}
	}
	if queued > 0 {
		fmt.Printf("chaos: buffered fires still in line, handed back, when the fleet stopped: %d\n", queued)
	}
	fmt.Printf("chaos: lateness of invoked fires: p50=%dms p99=%dms max=%dms (negative: started early)\n",
		percentile(lateness, 0.5), p99, percentile(lateness, 1))
	fmt.Printf("chaos: shards of %s (%d per fire): %s\n", shardTask, shardCount, &sc.sharded)
	fmt.Printf("chaos: shards of %s (one per replica): %s\n", broadcastTask, &sc.broadcast)
	h.logVolume()
	loss.print(h)
	if exit != 0 {
		h.tails(involved)
	}
	fmt.Printf("chaos: seed=%d profile=%s fires=%d invoked_once=%d duplicates=%d missed=%d skipped=%d claimed_at_kill=%d stuck=%d late_p99_ms=%d max_failover_s=%.1f failover_s=%s %s %s faults=%s%s\n",
		h.seed, h.prof.name, fires, once, dup.n, missed.n, skipped, claimed.n, stuck.n, p99, failover, perKind,
		sc.sharded.fields("sharded"), sc.broadcast.fields("broadcast"), strings.Join(faults, ","), loss.fields())
	return exit
}

// maxFailover measures, for each SIGKILL, SIGSTOP, cut and slow link, how late the
// fires the victim had recorded ahead started, on another replica or
// (cut or slow) on the victim itself: over the fires of the victim's
// tasks (those with rows it recorded ahead at the fault, i.e. its slots)
// whose run time falls between the fault and its record's until (15 s
// after a kill, the end of a cut or slow link) or the next fault, if
// sooner (a freeze right after a kill is not the kill's), the largest
// (first start - run time), in seconds; each shard of the sharded task's
// fires counts as a fire (the shards dealt to the victim are taken
// over), the broadcast task's do not (they never run elsewhere), nor do
// the fires a frozen victim had claimed before it froze
// (failoverRecord.ownUntil) and ran once it woke. A fire
// never invoked there is counted by the missed check instead. It returns
// the maximum over the faults whose figure is bounded (kills, stops and cuts),
// and the maximum per fault kind, slow links included.
func (h *harness) maxFailover(invs map[fireKey][]invocation) (float64, failoverFigures) {
	var worst float64
	perKind := failoverFigures{}
	for i := range h.failovers {
		k := &h.failovers[i]
		var kmax int64
		var at fireKey
		first := k.at.Truncate(time.Second).Add(time.Second).UnixMilli()
		until := k.until
		for _, b := range h.begun {
			if b.After(k.at) && b.Before(until) {
				until = b
			}
		}
		for code := range k.codes {
			if _, buffer := bufferSkips[code]; buffer || slices.Contains(jitterTasks, code) || code == broadcastTask {
				continue // its fires wait for its long runs, start late by design, or never run elsewhere
			}
			for t := first; t < until.UnixMilli(); t += 1000 {
				for shard := range shardsOf(code) {
					fk := fireKey{code, t, shard}
					inv := invs[fk]
					if len(inv) > 0 && inv[0].replica == k.victim && t <= k.ownUntil.UnixMilli() {
						continue // started by the frozen victim before it froze (ownUntil)
					}
					if len(inv) > 0 && inv[0].started-t > kmax {
						kmax, at = inv[0].started-t, fk
					}
				}
			}
		}
		k.gap = float64(kmax) / 1000
		k.detail = fmt.Sprintf("slowest takeover %.1fs (%s, tasks %d)", k.gap, at.id(), len(k.codes))
		if k.bounded {
			worst = math.Max(worst, k.gap-k.grace.Seconds())
		}
		if g, ok := perKind[k.kind]; !ok || k.gap > g {
			perKind[k.kind] = k.gap
		}
	}
	return worst, perKind
}

// failoverFigures are the slowest takeovers by fault kind, printed as
// kill:5.2,cut_db:1.3 in faultOrder ("none" without such faults).
type failoverFigures map[faultKind]float64

func (f failoverFigures) String() string {
	var parts []string
	for _, k := range faultOrder {
		if g, ok := f[k]; ok {
			parts = append(parts, fmt.Sprintf("%s:%.1f", k, g))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// checkBuffered adds to b each run of a buffer task that started before
// the run of the task before it ended: in start order, every run's start
// must follow the previous run's end. A run without an end line (its
// replica was killed in the handler) ends the chain there: the next run
// may start once the lost run is settled, which the rows tell.
func (h *harness) checkBuffered(invs map[fireKey][]invocation, ends map[fireKey]int64, b *broken) {
	type run struct {
		k          fireKey
		start, end int64 // end 0: none written
	}
	for code := range bufferSkips {
		var runs []run
		for k, inv := range invs {
			if k.code == code {
				for _, i := range inv {
					runs = append(runs, run{k, i.started, ends[k]})
				}
			}
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].start < runs[j].start })
		for i := 1; i < len(runs); i++ {
			prev, cur := runs[i-1], runs[i]
			if prev.end != 0 && cur.start < prev.end {
				b.add(fmt.Sprintf("%s started %d ms before %s ended", cur.k.id(), prev.end-cur.start, prev.k.id()))
			}
		}
	}
}

// final reports whether an execution status is final, as
// xtimer.Status.Final does.
func final(status string) bool { return xtimer.Status(status).Final() }

// percentile is the nearest-rank percentile of xs (q in (0, 1]).
func percentile(xs []int64, q float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// logVolume prints the most frequent warning and error messages of all
// replicas: an outage should be logged once when it starts and once when it
// ends, not once per tick or per slot.
func (h *harness) logVolume() {
	counts := map[string]int{}
	total := 0
	for _, r := range h.all {
		data, err := os.ReadFile(r.stderr)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			if !strings.Contains(l, "level=WARN") && !strings.Contains(l, "level=ERROR") {
				continue
			}
			msg := l
			if i := strings.Index(l, "msg="); i >= 0 {
				msg = l[i+4:]
				if strings.HasPrefix(msg, `"`) {
					if j := strings.Index(msg[1:], `"`); j >= 0 {
						msg = msg[:j+2]
					}
				} else if j := strings.IndexByte(msg, ' '); j >= 0 {
					msg = msg[:j]
				}
			}
			counts[msg]++
			total++
		}
	}
	type kv struct {
		msg string
		n   int
	}
	var top []kv
	for m, n := range counts {
		top = append(top, kv{m, n})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].n > top[j].n || top[i].n == top[j].n && top[i].msg < top[j].msg })
	var parts []string
	for i, t := range top {
		if i == 5 {
			break
		}
		parts = append(parts, fmt.Sprintf("%d× %s", t.n, t.msg))
	}
	fmt.Printf("chaos: replica warnings and errors: %d lines; most frequent: %s\n", total, strings.Join(parts, "; "))
}

// bufferQueue is the run time from which the fires of buffer task code
// in [first, end) were still waiting in line when the fleet stopped: the
// longest run of its last fires that no replica invoked and whose rows
// are scheduled, never started and owned by nobody (the final Stop hands
// a waiting fire back, persisted, for the next replica). A buffer policy
// runs a task's fires one after another, and a backlog (the database
// outage's) drains at the pace of their runs: such a tail is the queue,
// not a loss. A fire not invoked before the last one that was is still
// missed. math.MaxInt64 when there is no such tail.
func bufferQueue(code string, first, end, step int64, invs map[fireKey][]invocation, rows map[fireKey]*store.Execution) int64 {
	from := int64(math.MaxInt64)
	for at := (end - 1) / step * step; at >= first; at -= step {
		k := fireKey{code: code, at: at}
		r := rows[k]
		if len(invs[k]) > 0 || r == nil || r.Status != store.StatusScheduled || r.Attempt != 0 || r.StartedMs != 0 || r.Replica != "" {
			break
		}
		from = at
	}
	return from
}
