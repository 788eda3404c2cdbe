package store

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// UpsertTasks is UpsertTask for many tasks of one app at once, as a replica
// registering thousands of tasks at Start needs: the same promise per task
// (insert at version 1, active unless t.Status says paused; or update only
// the code-defined columns of the existing row, never status nor the
// override columns; version grows only when something changed), in a few
// round trips instead of one or more per task. It returns the stored rows
// in the order of tasks.
//
// Every task must name the same App, and a code may appear once. The call
// is one transaction (retried on a deadlock), so an error means nothing
// was written:
//
//   - one SELECT per insertChunk codes reads the rows that exist;
//   - the missing ones are inserted insertChunk rows per INSERT … ON
//     CONFLICT DO NOTHING, since another replica may insert the same codes
//     at the same moment, and read back with a locking read, the only read
//     that sees such a concurrent insert under MySQL's REPEATABLE READ;
//   - only rows whose definition differs are updated, one UPDATE each,
//     conditional on the version read, and read back;
//   - if a row was inserted or updated, one upsert bumps the app's task
//     generation (TaskGen).
//
// With nothing changed, the usual case of a redeploy, that is one SELECT
// per insertChunk tasks.
func (s *Store) UpsertTasks(ctx context.Context, tasks []*Task) ([]Task, error) {
	if len(tasks) == 0 {
		return nil, nil
	}
	want, codes, err := batchOfTasks(tasks)
	if err != nil {
		return nil, err
	}
	app := tasks[0].App
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var stored map[string]Task
	err = s.tx(ctx, func(tx *gorm.DB) error {
		stored = make(map[string]Task, len(codes))
		if err := readTasks(tx, app, codes, false, stored); err != nil {
			return err
		}
		var missing []string
		for _, code := range codes {
			if _, ok := stored[code]; !ok {
				missing = append(missing, code)
			}
		}
		wrote, err := s.insertTasks(tx, missing, want)
		if err != nil {
			return err
		}
		analyzeFresh(ctx, tx, "xtimer_tasks", &s.analyzedTasks, len(missing))
		if err := readTasks(tx, app, missing, true, stored); err != nil {
			return err
		}
		var changed []string
		for _, code := range codes {
			cur, ok := stored[code]
			if !ok {
				return fmt.Errorf("store: upsert task %q: row missing after insert", code)
			}
			def := defOf(want[code])
			if cur.Kind != def.kind {
				// An HTTP task created at runtime has the code: code must not
				// turn it into a Go task, nor the other way round.
				return fmt.Errorf("store: upsert task %q of kind %s: a task of kind %s has the code: %w", code, def.kind, cur.Kind, ErrExists)
			}
			if defOf(&cur) == def {
				continue
			}
			updated, err := s.updateDefinition(tx, cur, want[code])
			if err != nil {
				return err
			}
			wrote = wrote || updated
			changed = append(changed, code)
		}
		if err := readTasks(tx, app, changed, false, stored); err != nil {
			return err
		}
		if !wrote {
			return nil
		}
		return bumpTaskGen(tx, app)
	})
	if err != nil {
		return nil, err
	}
	out := make([]Task, len(tasks))
	for i, t := range tasks {
		out[i] = stored[t.Code]
	}
	return out, nil
}

// batchOfTasks validates a batch and returns its tasks by code and its
// codes sorted, so that concurrent callers lock index entries in the same
// order.
func batchOfTasks(tasks []*Task) (map[string]*Task, []string, error) {
	want := make(map[string]*Task, len(tasks))
	codes := make([]string, 0, len(tasks))
	first := map[string]int{}
	for i, t := range tasks {
		if t == nil {
			return nil, nil, fmt.Errorf("store: upsert tasks: row %d is nil", i)
		}
		if err := validTask(t); err != nil {
			return nil, nil, err
		}
		if t.App != tasks[0].App {
			return nil, nil, fmt.Errorf("store: upsert tasks: row %d app %q differs from row 0 app %q", i, t.App, tasks[0].App)
		}
		if j, dup := first[t.Code]; dup {
			return nil, nil, fmt.Errorf("store: upsert tasks: row %d code %q repeats row %d", i, t.Code, j)
		}
		first[t.Code] = i
		want[t.Code] = t
		codes = append(codes, t.Code)
	}
	slices.Sort(codes)
	return want, codes, nil
}

// readTasks adds the rows of codes to into, one SELECT per insertChunk
// codes; locking reads take row locks and see rows committed after the
// transaction began.
func readTasks(tx *gorm.DB, app string, codes []string, locking bool, into map[string]Task) error {
	for start := 0; start < len(codes); start += insertChunk {
		q := tx.Where("app = ? AND code IN ?", app, codes[start:min(start+insertChunk, len(codes))])
		if locking {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"}) // ignored by SQLite, whose writers are serialized
		}
		var found []Task
		if err := q.Find(&found).Error; err != nil {
			return fmt.Errorf("store: read %d tasks of app %q: %w", len(codes), app, err)
		}
		for _, t := range found {
			into[t.Code] = t
		}
	}
	return nil
}

// insertTasks inserts the rows of codes as UpsertTask does, insertChunk
// rows per statement; a row another transaction inserted first is left
// alone. It reports whether it inserted a row.
func (s *Store) insertTasks(tx *gorm.DB, codes []string, want map[string]*Task) (bool, error) {
	inserted := false
	now := s.nowMs()
	for start := 0; start < len(codes); start += insertChunk {
		chunk := codes[start:min(start+insertChunk, len(codes))]
		rows := make([]Task, len(chunk))
		for i, code := range chunk {
			row := *want[code]
			row.ID, row.Version, row.CreatedMs, row.UpdatedMs = 0, 1, now, now
			row.SpecOverride, row.DialectOverride, row.TZOverride = nil, nil, nil
			if row.Status != TaskPaused {
				row.Status = TaskActive
			}
			rows[i] = row
		}
		// GORM writes guessed IDs back into rows; readTasks reads the truth.
		// The rows affected are the rows inserted: a conflict affects none
		// (on MySQL, onConflictDoNothing's update changes nothing).
		res := tx.Clauses(onConflictDoNothing(tx, "name")).Create(&rows)
		if res.Error != nil {
			return false, fmt.Errorf("store: insert %d tasks from %q: %w", len(rows), chunk[0], res.Error)
		}
		inserted = inserted || res.RowsAffected > 0
	}
	return inserted, nil
}

// updateDefinition writes t's code-defined columns over cur and bumps the
// version, conditional on the version read. A row changed since (an
// operator's pause) is read again under a lock and compared again. It
// reports whether it updated the row: not when another transaction wrote
// the same definition first.
func (s *Store) updateDefinition(tx *gorm.DB, cur Task, t *Task) (bool, error) {
	want := definition(t)
	for try := 0; try < maxUpsertTries; try++ {
		set := make(map[string]any, len(want)+2)
		for k, v := range want {
			set[k] = v
		}
		set["version"] = cur.Version + 1
		set["updated_ms"] = s.nowMs()
		res := tx.Model(&Task{}).Where("id = ? AND version = ?", cur.ID, cur.Version).Updates(set)
		if res.Error != nil {
			return false, fmt.Errorf("store: update task %q: %w", t.Code, res.Error)
		}
		if res.RowsAffected == 1 {
			return true, nil
		}
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", cur.ID).Take(&cur).Error; err != nil {
			return false, fmt.Errorf("store: read task %q: %w", t.Code, err)
		}
		if defOf(&cur) == defOf(t) {
			return false, nil
		}
	}
	return false, fmt.Errorf("store: upsert task %q: row kept changing under %d attempts", t.Code, maxUpsertTries)
}
