package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// This file is the deferred registration: the first start of a fleet
// on an app without tasks, with many tasks to register, does not wait
// for their rows. Writing a million rows with their unique and search
// indexes is the bulk of such a start at the databases' default
// durability, and there is nothing to read back: no row has an
// operator's status, override or pause yet. So BeginRegistration
// records on the app's row that the registration's rows are being
// written (RegPendingMs, the created_ms they get) and returns; each
// replica of that registration runs from its own registrations and
// writes the rows in chunks (WriteDeferred), each chunk its own
// transaction, until the last chunk is written. docs/architecture.md, "Deferred registration",
// has the whole of it.

// Registration is what a registration of an app's tasks left.
type Registration struct {
	// Gen is the task generation at which the rows hold the registered
	// definitions (RegisterTasks); 0 when Deferred.
	Gen int64
	// Deferred is set when the rows are not written yet: the caller
	// writes them with WriteDeferred.
	Deferred bool
	// CreatedMs is the created_ms and updated_ms of the deferred rows,
	// the same for every replica that registers the same tasks.
	CreatedMs int64
	// UniformMs, when not 0, is the created_ms of the rows that a deferred
	// registration of these very tasks (the same digest) wrote alike, and
	// that may still be as it wrote them: the reader of the rows' heads
	// may skip those (TaskHeadsBut). 0 when Deferred, or when the tasks are
	// not the ones of the app's last deferred registration.
	UniformMs int64
	// Digest names the registered tasks (digestOf) to WriteDeferred.
	Digest string
}

// BeginRegistration is RegisterTasks for a replica's Start, which may
// defer the rows' write: when the app has no task yet and defs are
// deferFrom tasks or more (deferFrom > 0), it writes no task row and
// returns a Deferred Registration; so it does to every replica that
// registers the same tasks (the same digest) while that write has not
// finished. Otherwise it is RegisterTasks, which also supersedes a
// deferred write of other tasks: it writes every row of defs itself.
func (s *Store) BeginRegistration(ctx context.Context, app string, defs []TaskDef, deferFrom int) (Registration, error) {
	return s.register(ctx, app, defs, regDefer, deferFrom)
}

// deferTx defers a registration of n tasks whose digest is digest if it
// may (BeginRegistration), the app's row locked (st). deferred is false
// when it may not: the caller writes the rows.
func (s *Store) deferTx(ctx context.Context, tx *gorm.DB, app string, st AppState, n int, digest string, deferFrom int) (reg Registration, deferred bool, err error) {
	if st.RegPendingMs != 0 {
		if st.RegDigest != digest {
			return Registration{}, false, nil // another registration's write: supersede it
		}
		return Registration{Deferred: true, CreatedMs: st.RegPendingMs, Digest: digest}, true, nil
	}
	if deferFrom <= 0 || n < deferFrom {
		return Registration{}, false, nil
	}
	var ids []int64
	err = tx.WithContext(ctx).Raw("SELECT id FROM xtimer_tasks WHERE app = ? LIMIT 1", app).Scan(&ids).Error
	if err != nil {
		return Registration{}, false, fmt.Errorf("store: look for tasks of app %q: %w", app, err)
	}
	if len(ids) > 0 {
		return Registration{}, false, nil
	}
	now := s.nowMs()
	// reg_gen is the generation the rows will hold the definitions at:
	// the deferred rows do not move it (see WriteDeferred), so a restart
	// after the write finished, with no task written meanwhile, finds the
	// digest current.
	err = tx.Model(&AppState{}).Where("app = ?", app).
		UpdateColumns(map[string]any{"reg_digest": digest, "reg_gen": st.TaskGen, "reg_pending_ms": now, "reg_written": "",
			"reg_uniform_ms": now, "reg_uniform_digest": digest}).Error
	if err != nil {
		return Registration{}, false, fmt.Errorf("store: record the deferred registration of app %q: %w", app, err)
	}
	return Registration{Deferred: true, CreatedMs: now, Digest: digest}, true, nil
}

// DeferredState is what the app's row says of a deferred registration
// (DeferredProgress, WriteDeferred).
type DeferredState int

const (
	// DeferredPending is a registration whose rows are being written.
	DeferredPending DeferredState = iota
	// DeferredFinished is one whose rows a writer wrote, marking it
	// finished; since then only the writes that move the task generation
	// (an operator's, a Register after Start) changed them.
	DeferredFinished
	// DeferredSuperseded is one after which a registration of other
	// tasks wrote its rows; some of this one's rows may hold other
	// definitions, or be missing.
	DeferredSuperseded
)

// deferredState is what the app's row st says of reg.
func deferredState(st AppState, reg Registration) DeferredState {
	switch {
	case st.RegDigest != reg.Digest:
		return DeferredSuperseded
	case st.RegPendingMs == 0:
		return DeferredFinished
	case st.RegPendingMs != reg.CreatedMs:
		// Finished, then deferred again: the same tasks into an app
		// emptied meanwhile. This writer's rows are the new write's rows.
		return DeferredFinished
	}
	return DeferredPending
}

// MaxDeferredChunks bounds how many chunks a deferred registration's
// rows are written in (a byte each in xtimer_apps.reg_written).
const MaxDeferredChunks = 4096

// DeferredProgress reads, without a lock, what the app's row says of
// reg: its state, and while DeferredPending which of its chunks are
// written (written[k] is '1' for chunk k; shorter when none is).
func (s *Store) DeferredProgress(ctx context.Context, app string, reg Registration) (DeferredState, string, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var st AppState
	if err := s.db.WithContext(ctx).Where("app = ?", app).Take(&st).Error; err != nil {
		return 0, "", fmt.Errorf("store: read the deferred registration of app %q: %w", app, err)
	}
	return deferredState(st, reg), st.RegWritten, nil
}

// WriteDeferred writes chunk k of the chunks of reg, a deferred
// registration, whose rows are defs: it inserts the rows that are
// missing as reg has them (version 1, created and updated at
// reg.CreatedMs, active unless Paused) and marks the chunk written; the
// call that marks the last one marks the registration finished. Every
// replica of the registration must make the same chunks of the same
// tasks (catalog.go makes them by a hash of the code, whatever the
// order of registration). A row whose code exists is left as it is.
//
// It is one transaction behind the app's lock, which writes only while
// the registration is DeferredPending and the chunk not written; it
// returns the state it left, and whether it wrote.
//
// The rows do not move the task generation: every replica of the
// registration has these tasks in its view already, as the rows hold
// them, and reading every version a second while a million rows are
// written would cost them more than the write. A replica that does not
// register them finds them at its next check of the tasks' sums
// (TaskSums).
func (s *Store) WriteDeferred(ctx context.Context, app string, reg Registration, k, chunks int, defs []TaskDef) (state DeferredState, wrote bool, err error) {
	if chunks < 1 || chunks > MaxDeferredChunks || k < 0 || k >= chunks {
		return 0, false, fmt.Errorf("store: write the deferred registration of app %q: chunk %d of %d: want 0 <= chunk < chunks <= %d",
			app, k, chunks, MaxDeferredChunks)
	}
	for i := range defs {
		if bad := validDef(defs[i]); bad != nil {
			return 0, false, bad
		}
	}
	all := make([]int, len(defs))
	for i := range all {
		all[i] = i
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err = s.rowTx(ctx, func(tx *gorm.DB) error {
		wrote = false
		st, lockErr := lockApp(tx, app)
		if lockErr != nil {
			return lockErr
		}
		if state = deferredState(st, reg); state != DeferredPending {
			return nil
		}
		marks := []byte(st.RegWritten)
		if len(marks) != chunks {
			marks = []byte(strings.Repeat("0", chunks))
		}
		if marks[k] == '1' {
			return nil
		}
		if insertErr := insertDefs(ctx, tx, app, defs, all, reg.CreatedMs, true); insertErr != nil {
			return insertErr
		}
		analyzeFresh(ctx, tx, "xtimer_tasks", &s.analyzedTasks, len(defs))
		marks[k] = '1'
		set := map[string]any{"reg_written": string(marks)}
		if !slices.Contains(marks, '0') {
			set["reg_pending_ms"], set["reg_written"] = 0, ""
			state = DeferredFinished
		}
		if markErr := tx.Model(&AppState{}).Where("app = ?", app).UpdateColumns(set).Error; markErr != nil {
			return markErr
		}
		wrote = true
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: write %d tasks of the deferred registration of app %q: %w", len(defs), app, err)
	}
	return state, wrote, nil
}
