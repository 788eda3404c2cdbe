package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"gorm.io/gorm"
)

// CodeSet names tasks by code: those in Codes, or with Except every task
// but those.
type CodeSet struct {
	Codes  []string
	Except bool
}

// ClaimFires hands replica the scheduled first attempts it should run
// although it did not record them: rows nobody owns (replica "": manual
// runs, fires whose recorder lacked the handler or stopped) due at dueMs,
// and rows whose owner is not in live and whose run time is older than
// orphanBeforeMs (the owner died between recording and running). Only
// tasks in codes, and for which runs is true, are claimed (codes narrows
// the query, runs decides). Each claim is a conditional update on the
// owner read, so two claimants never both win; the rows returned are the
// ones replica now owns.
func (s *Store) ClaimFires(ctx context.Context, app, replica string, codes CodeSet, runs func(code string) bool, live []string, dueMs, orphanBeforeMs int64, limit int) ([]Execution, error) {
	if len(codes.Codes) == 0 && !codes.Except {
		return nil, nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	// The bound on run_time repeats the one in each branch of the OR below,
	// where no planner finds it: with it, the (app, status, run_time) index
	// reads the fires due by now, not every fire recorded ahead (tens of
	// thousands when 1,000 tasks fire every second, each compared with up
	// to 1,000 codes).
	q := s.db.WithContext(ctx).Where("app = ? AND status = ? AND run_time <= ? AND attempt = 0 AND started_ms = 0",
		app, StatusScheduled, max(dueMs, orphanBeforeMs))
	switch {
	case !codes.Except:
		q = q.Where("task_code IN ?", codes.Codes)
	case len(codes.Codes) > 0:
		q = q.Where("task_code NOT IN ?", codes.Codes)
	}
	// A broadcast shard runs on its replica or not at all: it is never
	// an orphan to claim (TakeOverShards skips it when its replica is
	// gone), though one recorded with nobody to deal it to is unowned.
	orphan := s.db.Where("run_time <= ? AND broadcast = ?", orphanBeforeMs, false)
	if len(live) > 0 {
		orphan = orphan.Where("replica NOT IN ?", live)
	}
	q = q.Where(s.db.Where("replica = '' AND run_time <= ?", dueMs).Or(orphan))
	var candidates []Execution
	if err := q.Order("run_time, id").Limit(limit).Find(&candidates).Error; err != nil {
		return nil, fmt.Errorf("store: read claimable fires of app %q: %w", app, err)
	}
	candidates = slices.DeleteFunc(candidates, func(c Execution) bool { return !runs(c.TaskCode) })
	var mine []Execution
	for _, c := range candidates {
		res := s.db.WithContext(ctx).Model(&Execution{}).
			Where("id = ? AND status = ? AND attempt = 0 AND started_ms = 0 AND replica = ?", c.ID, StatusScheduled, c.Replica).
			UpdateColumns(map[string]any{"replica": replica, "updated_ms": s.nowMs()})
		if res.Error != nil {
			return mine, fmt.Errorf("store: claim execution %d: %w", c.ID, res.Error)
		}
		if res.RowsAffected == 1 {
			c.Replica = replica
			mine = append(mine, c)
		}
	}
	return mine, nil
}

// OwnedFires returns the unstarted first attempts replica owns whose
// planned start (Execution.Planned) is at or before plannedBeforeMs,
// oldest first, at most limit; shards, which their replica reads with
// ShardFires, are left out. A replica that is up holds each of its fires
// in memory from the moment it owns it to its start or skip: a row listed
// here long after its planned start is one it may no longer hold (a write
// that committed although its answer never came back, among others), and
// which nobody else will claim, since its owner lives. It reads the
// (app, status, run_time) index up to plannedBeforeMs, where the rows
// still scheduled are few.
func (s *Store) OwnedFires(ctx context.Context, app, replica string, plannedBeforeMs int64, limit int) ([]Execution, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var rows []Execution
	err := s.db.WithContext(ctx).
		Where("app = ? AND status = ? AND run_time <= ? AND "+plannedStart+" <= ? AND attempt = 0 AND started_ms = 0 AND replica = ? AND shards = 0 AND broadcast = ?",
			app, StatusScheduled, plannedBeforeMs, plannedBeforeMs, replica, false).
		Order("run_time, id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: read the unstarted fires of replica %q planned by %d: %w", replica, plannedBeforeMs, err)
	}
	return rows, nil
}

// ReleaseFires gives up the scheduled first attempts replica recorded but
// has not started (a graceful stop), so that another replica claims them
// with ClaimFires when they are due. It returns how many it released. Its
// broadcast shards, which no other replica may run, are recorded
// skipped, reason ReasonReplicaLost, instead.
func (s *Store) ReleaseFires(ctx context.Context, app, replica string) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var n int64
	err := s.rowTx(ctx, func(tx *gorm.DB) error {
		now := s.nowMs()
		unstarted := func() *gorm.DB {
			return tx.Model(&Execution{}).
				Where("app = ? AND replica = ? AND status = ? AND attempt = 0 AND started_ms = 0", app, replica, StatusScheduled)
		}
		if res := unstarted().Where("broadcast = ?", true).
			UpdateColumns(map[string]any{"status": StatusSkipped, "reason": ReasonReplicaLost, "finished_ms": now, "updated_ms": now}); res.Error != nil {
			return res.Error
		}
		res := unstarted().UpdateColumns(map[string]any{"replica": "", "updated_ms": now})
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return 0, fmt.Errorf("store: release fires of replica %q: %w", replica, err)
	}
	return n, nil
}

// UnclaimFires undoes StartFires for the given fires of replica, which it
// claimed ahead of their run time and never started (it stopped first):
// they are scheduled and unstarted again, for ReleaseFires to hand on. It
// returns how many it undid.
func (s *Store) UnclaimFires(ctx context.Context, app, replica string, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var n int64
	for from := 0; from < len(ids); from += insertChunk {
		res := s.db.WithContext(ctx).Model(&Execution{}).
			Where("app = ? AND id IN ? AND replica = ? AND status = ? AND attempt = 0", app, ids[from:min(from+insertChunk, len(ids))], replica, StatusScheduled).
			UpdateColumns(map[string]any{"started_ms": 0, "lateness_ms": 0, "claim": "", "updated_ms": s.nowMs()})
		if res.Error != nil {
			return n, fmt.Errorf("store: unclaim fires of replica %q: %w", replica, res.Error)
		}
		n += res.RowsAffected
	}
	return n, nil
}

// ScheduledRuns counts the fires of one task that its schedule created
// (sources schedule and catchup, skipped ones excluded), for WithMaxRuns:
// fires, not shards (shard 0 stands for its fire).
func (s *Store) ScheduledRuns(ctx context.Context, app, code string) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var n int64
	err := s.db.WithContext(ctx).Model(&Execution{}).
		Where("app = ? AND task_code = ? AND source IN ? AND status <> ? AND shard = 0", app, code, []string{SourceSchedule, SourceCatchup}, StatusSkipped).
		Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("store: count runs of task %q: %w", code, err)
	}
	return n, nil
}

// The start StartFires records: the fire's planned start (its run time,
// or planned_ms under jitter) when the claim is made ahead of it, the
// claim's instant otherwise; and its lateness, from the planned start.
// Both take the claim's instant twice.
const (
	plannedStart  = "(CASE WHEN planned_ms > 0 THEN planned_ms ELSE run_time END)"
	claimStart    = "CASE WHEN " + plannedStart + " > ? THEN " + plannedStart + " ELSE ? END"
	claimLateness = "CASE WHEN " + plannedStart + " > ? THEN 0 ELSE ? - " + plannedStart + " END"
)

// StartFires claims the first attempts of the given executions for
// replica, in one round trip, and returns the IDs it claimed. A row is
// claimed only if it is still scheduled, not started (started_ms 0) and
// owned by replica: a fire another replica took over (TakeOverFires,
// ClaimFires) or already started is left alone, so a replica that slept
// past its lock can never start what another one runs. This is the fence
// of the fire path: a handler starts only after its row carries its start.
//
// Only columns outside every index change here (started_ms, lateness_ms,
// claim), so the databases update the rows in place (PostgreSQL's HOT
// updates): the claim stays a few milliseconds for hundreds of fires. The
// status moves to running afterwards, batched, with MarkRunning.
//
// The start recorded is claimMs, or the planned start of a fire claimed
// ahead of it (Execution.Planned): the replica starts it then.
func (s *Store) StartFires(ctx context.Context, app string, ids []int64, replica string, claimMs int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	claim, err := nonce()
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var started []int64
	name := s.db.Dialector.Name()
	if name == "postgres" {
		// One statement, one round trip and one commit, whatever the
		// count: this is on the fire path. The IDs go as one array, not a
		// statement per insertChunk of them: at default durability each
		// statement's commit waited for its own WAL flush, and the 3,333
		// fires of a replica's share of a burst were claimed in seven.
		got, claimErr := scanIDs(s.db.WithContext(ctx), startFiresPostgres,
			claimMs, claimMs, claimMs, claimMs, claim, s.nowMs(), pgBigints(ids), StatusScheduled, replica)
		if claimErr != nil {
			return nil, fmt.Errorf("store: start fires: %w", claimErr)
		}
		return got, nil
	}
	if name == "sqlite" {
		// A statement per insertChunk of IDs (SQLite's bound parameters),
		// each answering with the rows it claimed.
		for from := 0; from < len(ids); from += insertChunk {
			got, scanErr := scanIDs(s.db.WithContext(ctx), startFiresSQLite,
				claimMs, claimMs, claimMs, claimMs, claim, s.nowMs(),
				ids[from:min(from+insertChunk, len(ids))], StatusScheduled, replica)
			if scanErr != nil {
				return started, fmt.Errorf("store: start fires: %w", scanErr)
			}
			started = append(started, got...)
		}
		return started, nil
	}
	// MySQL/MariaDB have no UPDATE ... RETURNING: the rows this call changed
	// are the ones carrying its nonce.
	err = s.rowTx(ctx, func(tx *gorm.DB) error {
		started = started[:0]
		for from := 0; from < len(ids); from += insertChunk {
			chunk := ids[from:min(from+insertChunk, len(ids))]
			res := tx.Model(&Execution{}).
				Where("id IN ? AND status = ? AND attempt = 0 AND started_ms = 0 AND replica = ?", chunk, StatusScheduled, replica).
				UpdateColumns(map[string]any{
					"lateness_ms": gorm.Expr(claimLateness, claimMs, claimMs),
					"started_ms":  gorm.Expr(claimStart, claimMs, claimMs),
					"claim":       claim, "updated_ms": s.nowMs(),
				})
			if res.Error != nil {
				return fmt.Errorf("store: start fires: %w", res.Error)
			}
			if res.RowsAffected == 0 {
				continue
			}
			var got []int64
			if err = tx.Model(&Execution{}).Where("id IN ? AND claim = ?", chunk, claim).
				Pluck("id", &got).Error; err != nil {
				return fmt.Errorf("store: read started fires: %w", err)
			}
			started = append(started, got...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return started, nil
}

// TakeOverFires gives replica ("" for nobody) the scheduled first attempts of one slot
// (tasks codes, run times in [fromMs, toMs)) that another replica recorded:
// the caller has just won the slot's lock after its owner stopped
// refreshing it (killed, frozen, cut off). The old owner can no longer
// start them: StartFires checks the owner. It returns the fires taken and
// the replicas that held them. Shards are left alone: they belong to the
// replicas they were dealt to, not to the slot, and move only when their
// own replica is gone (TakeOverShards).
func (s *Store) TakeOverFires(ctx context.Context, app string, codes []string, fromMs, toMs int64, replica string) (rows []Execution, from []string, err error) {
	if len(codes) == 0 {
		return nil, nil, nil
	}
	claim, err := nonce()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	// On PostgreSQL each statement is planned for its own values
	// (customPlanTx): a chunk's codes are then one constant list, which a
	// row's code is looked up in by hash. The plan cached for parameters
	// compared each row of the time range with every code of the chunk,
	// one after the other; at a fleet's start, the range holds the fires
	// of the next seconds of every slot, thousands of rows for each
	// statement of each slot won.
	err = s.customPlanTx(ctx, func(tx *gorm.DB) error {
		rows, from = nil, nil
		var taken int64
		// A bucket of a million tasks has tens of thousands of codes:
		// insertChunk of them per statement keeps within every database's
		// limit on bound parameters.
		for i := 0; i < len(codes); i += insertChunk {
			q := func() *gorm.DB {
				return tx.Model(&Execution{}).
					Where("app = ? AND task_code IN ? AND run_time >= ? AND run_time < ? AND status = ? AND attempt = 0 AND started_ms = 0 AND replica <> ? AND shards = 0 AND broadcast = ?",
						app, codes[i:min(i+insertChunk, len(codes))], fromMs, toMs, StatusScheduled, replica, false)
			}
			var owners []string
			if err = q().Distinct("replica").Pluck("replica", &owners).Error; err != nil {
				return fmt.Errorf("store: read owners of fires to take over: %w", err)
			}
			if len(owners) == 0 {
				continue
			}
			res := q().UpdateColumns(map[string]any{"replica": replica, "claim": claim, "updated_ms": s.nowMs()})
			if res.Error != nil {
				return fmt.Errorf("store: take over fires: %w", res.Error)
			}
			if res.RowsAffected == 0 {
				continue // started or taken by another meanwhile
			}
			taken += res.RowsAffected
			for _, o := range owners {
				if !slices.Contains(from, o) {
					from = append(from, o)
				}
			}
		}
		if taken == 0 {
			return nil
		}
		if err = tx.Where("app = ? AND run_time >= ? AND run_time < ? AND claim = ?", app, fromMs, toMs, claim).
			Order("run_time, id").Find(&rows).Error; err != nil {
			return fmt.Errorf("store: read taken-over fires: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(from)
	return rows, from, nil
}

// SkipFire settles a first attempt that will not run (paused, overlap,
// misfire) as skipped with reason, if the row is still scheduled, at
// attempt 0, and owned by replica: a fire taken over meanwhile is left to
// its new owner. It reports whether it did.
func (s *Store) SkipFire(ctx context.Context, id int64, replica, reason string, atMs int64) (bool, error) {
	if reason == "" || len(reason) > 64 {
		return false, fmt.Errorf("store: skip execution %d: reason %q: want 1 to 64 bytes", id, reason)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	res := s.db.WithContext(ctx).Model(&Execution{}).
		Where("id = ? AND status = ? AND attempt = 0 AND started_ms = 0 AND replica = ?", id, StatusScheduled, replica).
		UpdateColumns(map[string]any{"status": StatusSkipped, "reason": reason, "finished_ms": atMs, "updated_ms": s.nowMs()})
	if res.Error != nil {
		return false, fmt.Errorf("store: skip execution %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Start is one item of MarkRunning: a first attempt that StartFires claimed.
type Start struct {
	ID        int64
	Replica   string
	StartedMs int64
	// Finish, when set, is how the attempt already ended: start and end are
	// written in one update.
	Finish *Result
}

// MarkRunning moves claimed first attempts (StartFires) to running, or
// straight to how they ended, batched off the fire path. oks[i] is false
// when the row is no longer this claim's (it cannot be, short of someone
// editing rows by hand).
func (s *Store) MarkRunning(ctx context.Context, starts []Start) (oks []bool, err error) {
	rows := make([]rowUpdate, len(starts))
	now := s.nowMs()
	for i, st := range starts {
		r := &rows[i]
		r.id = st.ID
		r.match.num(colStartedMs, st.StartedMs)
		r.match.text(colReplica, st.Replica)
		if st.Finish == nil {
			r.set.text(colStatus, StatusRunning)
		} else {
			if err = finishSet(&r.set, Finish{ID: st.ID, Attempt: 1, Result: *st.Finish}, now); err != nil {
				return nil, err
			}
			if st.Finish.StartedMs == 0 {
				r.set.num(colDurationMs, st.Finish.FinishedMs-st.StartedMs)
			}
		}
		r.set.num(colAttempt, 1)
		r.set.num(colUpdatedMs, now)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err = s.rowTx(ctx, func(tx *gorm.DB) error {
		done, updateErr := s.updateRows(tx, "status = ? AND attempt = 0", []any{StatusScheduled}, rows)
		if updateErr != nil {
			return fmt.Errorf("store: mark %d executions running: %w", len(starts), updateErr)
		}
		oks = markDone(starts, func(st Start) int64 { return st.ID }, done)
		// First attempts that ended before their start was written and
		// that recordAttempts writes: a fire that ended for good stays on
		// its row alone, and is not copied here either.
		var ended []Finish
		for i, st := range starts {
			if !oks[i] || st.Finish == nil {
				continue
			}
			if f := (Finish{ID: st.ID, Attempt: 1, Result: *st.Finish}); f.recordsAttempt() {
				ended = append(ended, f)
			}
		}
		if recordErr := s.recordAttempts(tx, ended, nil); recordErr != nil {
			return fmt.Errorf("store: mark %d executions running: %w", len(starts), recordErr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return oks, nil
}

// markDone tells, for each item, whether its id is in done.
func markDone[T any](items []T, id func(T) int64, done []int64) []bool {
	in := make(map[int64]bool, len(done))
	for _, d := range done {
		in[d] = true
	}
	oks := make([]bool, len(items))
	for i, it := range items {
		oks[i] = in[id(it)]
	}
	return oks
}

// lostStartSkew is how far ahead of this replica's clock PromoteLostStarts
// looks for claimed fires.
const lostStartSkew = 10 * time.Second

// PromoteLostStarts marks running, and returns, the first attempts that
// were claimed (StartFires) but never marked running: by a replica not in
// live (it died in between), or claimed before staleBeforeMs (the claim
// committed but its replica never learned it, e.g. a timeout at commit).
// The caller settles them by the retry policy, like any lost attempt.
func (s *Store) PromoteLostStarts(ctx context.Context, app string, live []string, staleBeforeMs int64) ([]Execution, error) {
	claim, err := nonce()
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	// A fire is claimed at most maxClaimLead before its run time, so
	// claimed fires are due by now, give or take the claimer's clock. The
	// bound reads the (app, status, run_time) index up to lostStartSkew
	// ahead: since fires are recorded 5 s ahead (the engine's
	// recordAhead), that is every scheduled row of the app. A claimer
	// whose clock is more than lostStartSkew ahead has its lost starts
	// promoted that much later, not never.
	lost := func(tx *gorm.DB) *gorm.DB {
		q := tx.Model(&Execution{}).Where("app = ? AND status = ? AND run_time <= ? AND attempt = 0 AND started_ms > 0",
			app, StatusScheduled, s.nowMs()+lostStartSkew.Milliseconds())
		if len(live) > 0 {
			q = q.Where(tx.Where("replica NOT IN ?", live).Or("started_ms < ?", staleBeforeMs))
		}
		return q
	}
	// Read first, without a lock: nearly always nothing is lost, and an
	// UPDATE with this condition locks every row it looks at on MySQL and
	// MariaDB (every fire due in the next lostStartSkew, thousands), at
	// every call of every replica, against the starts of those same rows.
	var ids []int64
	if err = lost(s.db.WithContext(ctx)).Order("id").Pluck("id", &ids).Error; err != nil {
		return nil, fmt.Errorf("store: read lost starts of app %q: %w", app, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []Execution
	err = s.rowTx(ctx, func(tx *gorm.DB) error {
		rows = nil
		var n int64
		for from := 0; from < len(ids); from += insertChunk {
			res := lost(tx).Where("id IN ?", ids[from:min(from+insertChunk, len(ids))]).
				UpdateColumns(map[string]any{"status": StatusRunning, "attempt": 1, "claim": claim, "updated_ms": s.nowMs()})
			if res.Error != nil {
				return fmt.Errorf("store: promote lost starts of app %q: %w", app, res.Error)
			}
			n += res.RowsAffected
		}
		if n == 0 {
			return nil
		}
		return tx.Where("app = ? AND claim = ? AND status = ? AND attempt = 1", app, claim, StatusRunning).Find(&rows).Error
	})
	return rows, err
}

// StartFires' claim on PostgreSQL (the IDs as one array) and SQLite (a
// list of them), whose UPDATE answers with the rows it changed.
var (
	startFiresPostgres = startFiresSQL("id = ANY(?::bigint[])")
	startFiresSQLite   = startFiresSQL("id IN ?")
)

// startFiresSQL is the claim of StartFires' rows whose IDs idCond names.
//
// The other conditions are one test, (...) IS TRUE, that no index
// serves: the rows are found by their IDs, never along the status or
// replica index, which the statistics of a table that grew since it was
// analyzed can make look cheaper (one row, they say, where there are
// thousands).
func startFiresSQL(idCond string) string {
	return `UPDATE xtimer_executions SET lateness_ms = ` + claimLateness + `,
		started_ms = ` + claimStart + `, claim = ?, updated_ms = ?
		WHERE ` + idCond + ` AND (status = ? AND attempt = 0 AND started_ms = 0 AND replica = ?) IS TRUE RETURNING id`
}

// pgBigints is ids as a PostgreSQL array literal, for a ?::bigint[]
// parameter: one parameter however many IDs.
func pgBigints(ids []int64) string {
	b := make([]byte, 0, 2+len(ids)*8)
	b = append(b, '{')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, '}'))
}
