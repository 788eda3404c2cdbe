package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// This file holds the task writes and reads of pausing: the operator's
// note on a pause or a resume, and pause on failure (Task.PauseAfter),
// which the engine decides from the rows (internal/engine/pause.go).

// MaxPauseNote is the most bytes Task.PauseNote holds (its column).
const MaxPauseNote = 1024

// SetTaskStatusNote sets a task active or paused with note (which may be
// ""): the note replaces the one stored, so the row says why it was last
// paused or resumed. It bumps the version and the app's task generation
// (TaskGen).
func (s *Store) SetTaskStatusNote(ctx context.Context, app, code, status, note string) error {
	if status != TaskActive && status != TaskPaused {
		return fmt.Errorf("store: task %q status %q: want %q or %q", code, status, TaskActive, TaskPaused)
	}
	if len(note) > MaxPauseNote {
		return fmt.Errorf("store: task %q pause note of %d bytes: want at most %d", code, len(note), MaxPauseNote)
	}
	return s.updateTask(ctx, "set status of", app, code, map[string]any{"status": status, "pause_note": note})
}

// Streak is what FailureStreak read: how the last final fires of a task
// ended, newest first.
type Streak struct {
	// Active: the task is active; the other fields are zero otherwise.
	Active bool
	// Version is the task's version when read, which PauseFailing is
	// conditional on.
	Version int64
	// Failures counts the fires, newest first, that ended failed or
	// timed_out before one that did not; at most the n asked for.
	Failures int
	// Last is the newest of them (zero when Failures is 0): its ID, run
	// time and Error.
	Last Execution
}

// streakSources are the sources whose fires count in a streak: the
// schedule's own fires, run on time or caught up. Manual runs (and any
// other source) neither count nor break one.
var streakSources = []string{SourceSchedule, SourceCatchup}

// streakStatuses are the final statuses of fires that ran. Skipped fires
// did not run: they neither count nor break a streak.
var streakStatuses = []string{StatusSucceeded, StatusFailed, StatusTimedOut}

// FailureStreak reads the last n final fires of an active task, newest
// run time first: those of sources schedule and catchup that ran
// (succeeded, failed or timed_out), but runs stopped by the next fire
// (ReasonCancelled, the overlap policy's doing), and only those whose run
// time is after the task's row last changed (updated_ms): a resume, like
// any change to the task, starts the count afresh. It reads at most n
// rows along the index (app, task_code, run_time, shard), backwards; for
// a sharded or broadcast task, the shards of the last n fires, a fire
// counting as failed when any of its shards failed.
func (s *Store) FailureStreak(ctx context.Context, app, code string, n int) (Streak, error) {
	if n < 1 {
		return Streak{}, fmt.Errorf("store: failure streak of task %q: n %d: want at least 1", code, n)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	db := s.db.WithContext(ctx)
	var task Task
	found, err := takeOne(db.Select("status", "version", "updated_ms", "shards", "broadcast").Where("app = ? AND code = ?", app, code), &task)
	if err != nil {
		return Streak{}, fmt.Errorf("store: read task %q: %w", code, err)
	}
	if !found {
		return Streak{}, notFound("task %q of app %q", code, app)
	}
	if task.Status != TaskActive {
		return Streak{}, nil
	}
	final := func() *gorm.DB {
		return db.Model(&Execution{}).Where("app = ? AND task_code = ? AND run_time > ? AND source IN ? AND status IN ? AND reason <> ?",
			app, code, task.UpdatedMs, streakSources, streakStatuses, ReasonCancelled)
	}
	var rows []Execution
	if task.Shards > 0 || task.Broadcast {
		// Fires, not shards: the last n run times, then their shards. A
		// fire failed when any of its shards did.
		var times []int64
		if err = final().Distinct("run_time").Order("run_time DESC").Limit(n).Pluck("run_time", &times).Error; err == nil && len(times) > 0 {
			err = final().Select("id", "run_time", "shard", "status", "error").Where("run_time IN ?", times).
				Order("run_time DESC, shard").Find(&rows).Error
		}
	} else {
		err = final().Select("id", "run_time", "status", "error").Order("run_time DESC").Limit(n).Find(&rows).Error
	}
	if err != nil {
		return Streak{}, fmt.Errorf("store: read the last %d fires of task %q: %w", n, code, err)
	}
	st := Streak{Active: true, Version: task.Version}
	for i := 0; i < len(rows); {
		j, failed := i, -1 // the rows of the fire at rows[i].RunTime, and its first failure
		for ; j < len(rows) && rows[j].RunTime == rows[i].RunTime; j++ {
			if failed < 0 && (rows[j].Status == StatusFailed || rows[j].Status == StatusTimedOut) {
				failed = j
			}
		}
		if failed < 0 {
			break
		}
		if st.Failures == 0 {
			st.Last = rows[failed]
		}
		st.Failures++
		i = j
	}
	return st, nil
}

// PauseFailing pauses a task with note if it is still active at version
// (the one FailureStreak read), in one conditional update that bumps the
// version and the app's task generation, as every task write does. Of
// replicas racing to pause a task, one gets paused true and the row as
// stored; the others, and a task resumed or changed since the read, get
// false.
func (s *Store) PauseFailing(ctx context.Context, app, code string, version int64, note string) (row Task, paused bool, err error) {
	if len(note) > MaxPauseNote {
		return Task{}, false, fmt.Errorf("store: task %q pause note of %d bytes: want at most %d", code, len(note), MaxPauseNote)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err = s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Task{}).Where("app = ? AND code = ? AND status = ? AND version = ?", app, code, TaskActive, version).
			Updates(map[string]any{"status": TaskPaused, "pause_note": note, "version": version + 1, "updated_ms": s.nowMs()})
		if res.Error != nil {
			return fmt.Errorf("store: pause failing task %q: %w", code, res.Error)
		}
		if paused = res.RowsAffected == 1; !paused {
			return nil
		}
		var readErr error
		row, readErr = readBumped(tx, app, code)
		return readErr
	})
	if err != nil {
		return Task{}, false, err
	}
	return row, paused, nil
}
