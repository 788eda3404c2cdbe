package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xtimer-go/xtimer/internal/localsvc"
	"github.com/xtimer-go/xtimer/internal/store"
)

// PostgreSQL failover (issue 24): the harness runs a streaming standby
// beside its primary, the replicas and the harness reach them through one
// multi-host DSN with target_session_attrs=read-write, and the
// pg_failover fault SIGKILLs the primary and promotes the standby, as an
// operator or Patroni would.
//
// With synchronous replication a commit returns only once the standby has
// flushed it, so nothing a replica was told is committed can be lost, and
// no fire runs twice: the check asserts it as for every other fault. With
// asynchronous replication the last commits of the old primary may never
// reach the standby; after the run the harness starts the old primary's
// data dir on a spare port (never in the DSN), compares its rows with the
// new primary's and reports what the failover lost and what that did to
// the fires (failoverLoss), without asserting it zero.

// faultPGFailover kills the primary and promotes its standby.
const faultPGFailover faultKind = "pg_failover"

// standbyName is the standby's application_name on the primary (its
// cluster_name, which the WAL receiver reports): what
// synchronous_standby_names names.
const standbyName = "xtimer_standby"

func init() {
	faultOrder = append(faultOrder, faultPGFailover)
	// On one machine an asynchronous standby is a millisecond behind and
	// a kill almost never finds a commit it has not received: pg-async's
	// standby is made a second behind, the lag a busy standby or a WAN
	// link has, so that the failover loses what asynchronous replication
	// can lose. No replica is killed: a SIGKILL that lands between the
	// claim of a second's fires and their handlers leaves them failed,
	// replica lost, never run, which the check counts as missed whatever
	// the database does.
	for mode, lag := range map[string]time.Duration{"sync": 0, "async": time.Second} {
		profiles["pg-"+mode] = profile{
			name: "pg-" + mode, replicas: 3, tasks: 50, length: 75 * time.Second,
			faults: []faultKind{faultRolling, faultPGFailover},
			gapMin: 6 * time.Second, gapMax: 8 * time.Second,
			dbDown: 10 * time.Second, killWait: 3 * time.Second, rollWait: 4 * time.Second,
			standby: mode, promoteAfter: 2 * time.Second, standbyLag: lag,
		}
	}
}

// pgFailover is the standby of a run whose profile asks for one, and what
// its failover did.
type pgFailover struct {
	standby    *postgresServer
	killedAt   time.Time // zero until the fault
	promotedAt time.Time
	// replayed is the last WAL position the standby had replayed when it
	// was promoted.
	replayed string
}

// dsn is the database URL the replicas and the harness use: the primary,
// or, with a standby, both servers in one multi-host URL. pgx (under
// GORM's postgres driver) tries the hosts in order and, with
// target_session_attrs=read-write, keeps only a server that accepts
// writes: the primary, then, once the primary is gone and the standby
// promoted, the standby.
func (h *harness) dsn() string {
	if h.pgha == nil {
		return h.pg.dsn()
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		h.pg.port, h.pgha.standby.port)
}

// replicationPrimary configures the primary for a standby before its
// first start: WAL for replication, WAL senders, a replication entry in
// pg_hba.conf, and, for synchronous replication, commits that wait for
// the standby. A no-op without a standby.
func (h *harness) replicationPrimary() error {
	switch h.prof.standby {
	case "":
		return nil
	case "sync", "async":
	default:
		return fmt.Errorf("profile %s: standby %q: want \"\", \"sync\" or \"async\"", h.prof.name, h.prof.standby)
	}
	if err := h.pg.allowReplication(); err != nil {
		return fmt.Errorf("primary pg_hba.conf: %w", err)
	}
	// synchronous_commit=on in both modes: a commit is flushed locally
	// before it returns (as in production); sync also waits for the
	// standby's flush.
	h.pg.settings = "-c wal_level=replica -c max_wal_senders=4 -c wal_keep_size=256MB -c synchronous_commit=on"
	if h.prof.standby == "sync" {
		h.pg.settings += " -c synchronous_standby_names=" + standbyName
	}
	return nil
}

// startStandby copies the running primary with pg_basebackup -R, starts
// the copy as a hot standby on a port of its own and waits until the
// primary reports it streaming (and, for synchronous replication, as its
// synchronous standby). A no-op without a standby.
func (h *harness) startStandby() error {
	if h.prof.standby == "" {
		return nil
	}
	port, err := localsvc.FreePort()
	if err != nil {
		return err
	}
	// Its own synchronous_standby_names is empty, said explicitly: once
	// promoted it has no standby, and a commit must not wait for one.
	sb := &postgresServer{bin: h.pg.bin, dir: filepath.Join(h.tmp, "pg-standby"), port: port,
		settings: "-c hot_standby=on -c cluster_name=" + standbyName +
			" -c synchronous_commit=on -c synchronous_standby_names=''"}
	if err = sb.basebackup(h.pg); err != nil {
		return err
	}
	if err = sb.start(); err != nil {
		return err
	}
	h.onCleanup(func() { _ = sb.stop("immediate") })
	h.pgha = &pgFailover{standby: sb}

	want := "async"
	if h.prof.standby == "sync" {
		want = "sync"
	}
	deadline := time.Now().Add(60 * time.Second)
	var state, got string
	for time.Now().Before(deadline) {
		state, got, err = replicationState(h.pg.dsn())
		if err == nil && state == "streaming" && got == want {
			h.logf("PostgreSQL standby on port %d streaming from the primary (%s replication)", port, want)
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err == nil {
		err = fmt.Errorf("state %q, sync_state %q", state, got)
	}
	return fmt.Errorf("the standby on port %d is not streaming %s after 60 s (see %s): %w",
		port, want, filepath.Join(sb.dir, "server.log"), err)
}

// replicationState is what the primary at dsn says of the standby in
// pg_stat_replication: its state and sync_state.
func replicationState(dsn string) (state, sync string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", "", err
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`,
		standbyName).Scan(&state, &sync)
	return state, sync, err
}

// pgFailover SIGKILLs the primary's postmaster and backends, waits the
// profile's promoteAfter (an operator's or Patroni's reaction time),
// promotes the standby and records the outage, from the kill to the end
// of the promotion, as dbDown does: fires due in it (and in the catch-up
// after) may run late or be recorded skipped by their misfire policy.
// The old primary is not started again: it would be a second primary.
func (h *harness) pgFailover() {
	if h.pgha == nil || !h.pgha.killedAt.IsZero() {
		h.logf("pg_failover: no standby to promote (profile %s)", h.prof.name)
		return
	}
	if h.prof.standbyLag > 0 {
		h.lagStandby()
	}
	from := time.Now()
	if err := h.pg.killGroup(); err != nil {
		h.logf("pg_failover: %v", err)
		return
	}
	h.pgha.killedAt = from
	h.logf("PostgreSQL primary (port %d) SIGKILLed; promoting the standby in %s", h.pg.port, h.prof.promoteAfter)
	time.Sleep(time.Until(from.Add(h.prof.promoteAfter)))
	sb := h.pgha.standby
	h.pgha.replayed = queryText(sb.dsn(), `SELECT pg_last_wal_replay_lsn()::text`)
	err := sb.promote()
	h.pgha.promotedAt = time.Now()
	h.mu.Lock()
	h.outages = append(h.outages, window{from, h.pgha.promotedAt})
	h.mu.Unlock()
	if err != nil {
		h.logf("pg_failover: promote: %v", err)
		return
	}
	h.logf("standby (port %d) promoted at WAL %s, %.1fs after the kill; recovery=%s synchronous_standby_names=%q",
		sb.port, h.pgha.replayed, h.pgha.promotedAt.Sub(from).Seconds(),
		queryText(sb.dsn(), `SELECT pg_is_in_recovery()::text`), queryText(sb.dsn(), `SHOW synchronous_standby_names`))
}

// lagStandby leaves the standby h.prof.standbyLag behind the primary:
// its primary_conninfo is pointed at a port nobody listens on and
// reloaded, so its WAL receiver stops (what it had not read is dropped)
// and cannot connect again, as when the link between the two is cut, and
// the WAL the primary writes meanwhile stays on the primary. (A SIGTERM
// to the WAL receiver would not do: the standby starts another at once.)
// Only for an asynchronous standby: a synchronous one would hold every
// commit instead.
func (h *harness) lagStandby() {
	if h.prof.standby != "async" {
		h.logf("pg_failover: standbyLag needs an asynchronous standby; not applied")
		return
	}
	if err := h.cutStandby(); err != nil {
		h.logf("pg_failover: cut the standby off: %v; no lag", err)
		return
	}
	h.logf("standby cut off from the primary; the primary is killed in %s", h.prof.standbyLag)
	time.Sleep(h.prof.standbyLag)
}

func (h *harness) cutStandby() error {
	dead, err := localsvc.FreePort()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, h.pgha.standby.dsn())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err = conn.Exec(ctx, fmt.Sprintf(`ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=%d user=postgres'`, dead)); err != nil {
		return err
	}
	if _, err = conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return err
	}
	for ctx.Err() == nil {
		var n int
		if err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the WAL receiver still streams 5 s after the reload: %w", ctx.Err())
}

// queryText is the one value query returns on the server at dsn, or the
// error's text.
func queryText(dsn, query string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "error: " + err.Error()
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, query).Scan(&s); err != nil {
		return "error: " + err.Error()
	}
	return s
}

// failoverLoss is what a failover lost: the execution rows whose last
// version on the old primary never reached the new one, and what became
// of their fires.
type failoverLoss struct {
	async bool
	lost  map[fireKey]string // the lost rows, each with what changed
	// Of the lost rows' fires: invoked more than once (the extra
	// invocations are taken out of the duplicate check with asynchronous
	// replication); invoked once, but the new primary's row does not say
	// it started; never invoked nor recorded skipped (missed).
	repeated, unrecorded, missed int
	examples                     []string
	err                          error
	// commits is how many transactions the old primary committed after
	// the WAL position the standby was promoted at, read from its WAL.
	commits    int
	commitsErr error
}

// commitsAfter counts the commit records in p's WAL (p stopped) after
// lsn, with pg_waldump: the transactions a standby promoted at lsn never
// saw. pg_waldump ends with an error at the end of the WAL, which is
// where it is meant to stop; any other error leaves no record read.
func (p *postgresServer) commitsAfter(lsn string) (int, error) {
	if _, _, ok := strings.Cut(lsn, "/"); !ok {
		return 0, fmt.Errorf("no promotion position (%q)", lsn)
	}
	cmd := p.asServerUser("pg_waldump", "-p", filepath.Join(p.dir, "data", "pg_wal"), "-s", lsn, "-r", "Transaction")
	out, err := cmd.Output()
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "desc: COMMIT") {
			n++
		}
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && (strings.Contains(string(exit.Stderr), "error in WAL record") ||
		strings.Contains(string(exit.Stderr), "could not find a valid record")) {
		err = nil // the end of the WAL, or nothing after lsn
	}
	if err != nil {
		return n, fmt.Errorf("pg_waldump -s %s: %w", lsn, err)
	}
	return n, nil
}

// failoverLoss starts the old primary's data dir, after the run, on a
// spare port (crash recovery gives back everything it had committed when
// it was killed) and compares its rows with the new primary's (rows). It
// returns nil when the run had no failover.
func (h *harness) failoverLoss(rows []store.Execution, invs map[fireKey][]invocation) *failoverLoss {
	if h.pgha == nil || h.pgha.killedAt.IsZero() {
		return nil
	}
	l := &failoverLoss{async: h.prof.standby == "async", lost: map[fireKey]string{}}
	// Before the old primary starts again (its recovery writes WAL).
	l.commits, l.commitsErr = h.pg.commitsAfter(h.pgha.replayed)
	old, err := h.oldPrimaryRows()
	if err != nil {
		l.err = err
		return l
	}
	now := make(map[fireKey]*store.Execution, len(rows))
	for i := range rows {
		now[fireKey{rows[i].TaskCode, rows[i].RunTime, rows[i].Shard}] = &rows[i]
	}
	for i := range old {
		o := &old[i]
		k := fireKey{o.TaskCode, o.RunTime, o.Shard}
		if why := lostVersion(o, now[k]); why != "" {
			l.lost[k] = why
		}
	}
	keys := slices.SortedFunc(maps.Keys(l.lost), func(a, b fireKey) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.code, b.code), cmp.Compare(a.shard, b.shard))
	})
	var others []string // examples after those of the fires that ran twice
	for _, k := range keys {
		inv, row := invs[k], now[k]
		switch {
		case len(inv) > 1:
			l.repeated++
		case len(inv) == 1 && (row == nil || row.StartedMs == 0):
			l.unrecorded++
		case len(inv) == 0 && (row == nil || row.Status != store.StatusSkipped):
			l.missed++
		}
		e := fmt.Sprintf("%s invoked %d times: %s; now %s", k.id(), len(inv), l.lost[k], rowText(row))
		if len(inv) > 1 {
			l.examples = append(l.examples, e)
		} else {
			others = append(others, e)
		}
	}
	l.examples = append(l.examples, others...)
	l.examples = l.examples[:min(len(l.examples), 8)]
	return l
}

// oldPrimaryRows starts the killed primary's data dir on a port no
// replica knows, reads its execution rows and stops it.
func (h *harness) oldPrimaryRows() ([]store.Execution, error) {
	port, err := localsvc.FreePort()
	if err != nil {
		return nil, err
	}
	old := &postgresServer{bin: h.pg.bin, dir: h.pg.dir, port: port, settings: "-c synchronous_standby_names=''"}
	if err = old.start(); err != nil {
		return nil, fmt.Errorf("start the old primary for comparison: %w", err)
	}
	defer func() { _ = old.stop("immediate") }()
	db, err := openDB(old.dsn())
	if err != nil {
		return nil, err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	var rows []store.Execution
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := db.WithContext(ctx).Where("app = ?", app).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the old primary's rows: %w", err)
	}
	return rows, nil
}

// lostVersion says how the new primary's row (nil: none) shows that the
// old primary's version of it, o, never reached the standby; "" when it
// is the same row, as it was or changed since. A row written again after
// the failover must descend from o: the same id, no fewer attempts, o's
// claim (the record that started the fire, store/claims.go) kept, or
// replaced with its start kept (a lost start promoted), and o's final
// status kept. A finish may rewrite started_ms with the handler's own
// start, so the claim, not started_ms alone, tells a start lost.
// (updated_ms cannot order the versions: the replica with the skewed
// clock writes it too.) A lost change of a row's owner alone is not
// seen: it does not change what a fire did. A claimed fire handed back
// at a replica's stop after the failover and claimed again elsewhere
// reads as lost: the figure can overcount by those.
func lostVersion(o, n *store.Execution) string {
	switch {
	case n == nil:
		return fmt.Sprintf("row %d (%s) is not on the new primary", o.ID, o.Status)
	case n.ID != o.ID:
		return fmt.Sprintf("row %d (%s) was written again as row %d", o.ID, o.Status, n.ID)
	case n.Attempt < o.Attempt:
		return fmt.Sprintf("row %d attempt %d (%s) fell back to attempt %d", o.ID, o.Attempt, o.Status, n.Attempt)
	case o.StartedMs != 0 && o.Claim != "" && n.Claim != o.Claim && n.StartedMs != o.StartedMs:
		return fmt.Sprintf("row %d claim %s at %s (%s) is not the new primary's", o.ID, o.Claim,
			time.UnixMilli(o.StartedMs).UTC().Format("15:04:05.000"), o.Status)
	case final(o.Status) && n.Status != o.Status:
		return fmt.Sprintf("row %d %s is %s on the new primary", o.ID, o.Status, n.Status)
	}
	return ""
}

// excused reports whether a missed or stuck fire is the failover's loss,
// which asynchronous replication does not promise against.
func (l *failoverLoss) excused(k fireKey) bool {
	if l == nil || !l.async {
		return false
	}
	_, ok := l.lost[k]
	return ok
}

// trim keeps, with asynchronous replication, only the first invocation of
// the lost rows' fires: the others are the failover's repeats, reported
// as such, not broken promises.
func (l *failoverLoss) trim(invs map[fireKey][]invocation) {
	if l == nil || !l.async {
		return
	}
	for k := range l.lost {
		if len(invs[k]) > 1 {
			invs[k] = invs[k][:1]
		}
	}
}

// fields are the loss's figures for the summary line; "" without a
// failover.
func (l *failoverLoss) fields() string {
	if l == nil {
		return ""
	}
	if l.err != nil {
		return " failover_lost_rows=? (" + strings.ReplaceAll(l.err.Error(), "\n", " ") + ")"
	}
	commits := strconv.Itoa(l.commits)
	if l.commitsErr != nil {
		commits = "?"
	}
	return " failover_lost_commits=" + commits + " failover_lost_rows=" + strconv.Itoa(len(l.lost)) + " failover_repeated=" + strconv.Itoa(l.repeated) +
		" failover_unrecorded=" + strconv.Itoa(l.unrecorded) + " failover_missed=" + strconv.Itoa(l.missed)
}

// print describes the loss before the summary line.
func (l *failoverLoss) print(h *harness) {
	if l == nil {
		return
	}
	if l.err != nil {
		fmt.Printf("chaos: failover: could not compare the old primary's rows: %v\n", l.err)
		return
	}
	commits := strconv.Itoa(l.commits)
	if l.commitsErr != nil {
		commits = "? (" + l.commitsErr.Error() + ")"
	}
	fmt.Printf("chaos: failover (%s replication, promoted at WAL %s, %.1fs after the kill): the old primary committed %s transactions after it; %d of its rows never reached the new primary; of their fires %d ran twice, %d ran with no start on record, %d never ran\n",
		h.prof.standby, h.pgha.replayed, h.pgha.promotedAt.Sub(h.pgha.killedAt).Seconds(),
		commits, len(l.lost), l.repeated, l.unrecorded, l.missed)
	for _, e := range l.examples {
		fmt.Println("    " + e)
	}
}

// groupAlive reports whether a process of group pgid other than a zombie
// is left (an unreaped zombie keeps its group, but holds no socket).
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return false
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			continue
		}
		fs := strings.Fields(string(data[i+1:]))
		if len(fs) >= 3 && fs[0] != "Z" && fs[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}
