package store

import (
	"context"
	"fmt"

	"gorm.io/gorm/clause"
)

// MarkSlotsDone records slots of app as done: every fire in them is
// recorded. Marking a slot twice keeps the last owner and time.
func (s *Store) MarkSlotsDone(ctx context.Context, app string, slots []Slot) error {
	if len(slots) == 0 {
		return nil
	}
	now := s.nowMs()
	rows := make([]Slot, len(slots))
	for i, sl := range slots {
		if len(sl.Owner) > 128 {
			return fmt.Errorf("store: mark slot %d/%d done: owner %q: want at most 128 bytes", sl.Minute, sl.Bucket, sl.Owner)
		}
		sl.App, sl.Done = app, true
		if sl.DoneMs == 0 {
			sl.DoneMs = now
		}
		rows[i] = sl
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "app"}, {Name: "minute"}, {Name: "bucket"}},
		DoUpdates: clause.AssignmentColumns([]string{"done", "owner", "done_ms"}),
	}).CreateInBatches(rows, insertChunk).Error
	if err != nil {
		return fmt.Errorf("store: mark %d slots of app %q done: %w", len(rows), app, err)
	}
	return nil
}

// DoneSlots returns the slots of app marked done with fromMinute <= minute
// <= toMinute, ordered by minute then bucket. Catch-up reads it to find the
// slots nobody finished.
func (s *Store) DoneSlots(ctx context.Context, app string, fromMinute, toMinute int64) ([]Slot, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []Slot
	err := s.db.WithContext(ctx).
		Where("app = ? AND minute BETWEEN ? AND ? AND done = ?", app, fromMinute, toMinute, true).
		Order("minute, bucket").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("store: read done slots of app %q in minutes %d..%d: %w", app, fromMinute, toMinute, err)
	}
	return out, nil
}

// Heartbeat records that a replica is alive: it inserts the replica, or
// updates its host, pid, version, heartbeat and slots, and its handlers
// unless r.Handlers is nil (they did not change). StartedMs is kept from
// the first heartbeat.
func (s *Store) Heartbeat(ctx context.Context, r Replica) error {
	if r.App == "" || len(r.App) > 64 {
		return fmt.Errorf("store: heartbeat: app %q: want 1 to 64 bytes", r.App)
	}
	if r.ID == "" || len(r.ID) > 128 {
		return fmt.Errorf("store: heartbeat: replica id %q: want 1 to 128 bytes", r.ID)
	}
	if r.HeartbeatMs == 0 {
		r.HeartbeatMs = s.nowMs()
	}
	if r.StartedMs == 0 {
		r.StartedMs = r.HeartbeatMs
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	update := []string{"host", "pid", "version", "heartbeat_ms", "slots", "clock_offset_ms", "clock_refused"}
	if r.Handlers != nil {
		update = append(update, "handlers")
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "app"}, {Name: "id"}},
		DoUpdates: clause.AssignmentColumns(update),
	}).Create(&r).Error
	if err != nil {
		return fmt.Errorf("store: heartbeat of replica %q: %w", r.ID, err)
	}
	return nil
}

// SetReplicaHandlers writes the handler list of a replica's row, apart
// from its heartbeats (a replica of a million tasks writes them so). It
// reports whether the row was there: a replica whose first heartbeat has
// not landed yet, or whose row was pruned, writes them again later.
func (s *Store) SetReplicaHandlers(ctx context.Context, app, id string, codes Codes) (bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if codes == nil {
		codes = Codes{}
	}
	res := s.db.WithContext(ctx).Model(&Replica{}).Where("app = ? AND id = ?", app, id).UpdateColumn("handlers", codes)
	if res.Error != nil {
		return false, fmt.Errorf("store: write the handlers of replica %q: %w", id, res.Error)
	}
	if res.RowsAffected > 0 {
		return true, nil
	}
	// MySQL counts the rows changed, not those found: the same list again
	// changes none.
	var n int64
	if err := s.db.WithContext(ctx).Model(&Replica{}).Where("app = ? AND id = ?", app, id).Count(&n).Error; err != nil {
		return false, fmt.Errorf("store: read replica %q: %w", id, err)
	}
	return n > 0, nil
}

// LiveReplicas returns the replicas of app that heart-beat at or after
// sinceMs, ordered by ID.
func (s *Store) LiveReplicas(ctx context.Context, app string, sinceMs int64) ([]Replica, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []Replica
	err := s.db.WithContext(ctx).Where("app = ? AND heartbeat_ms >= ?", app, sinceMs).Order("id").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("store: read live replicas of app %q: %w", app, err)
	}
	return out, nil
}

// LiveReplicaIDs is LiveReplicas for the IDs only, as every heartbeat
// needs them: the rows' handler lists can hold a million codes each.
func (s *Store) LiveReplicaIDs(ctx context.Context, app string, sinceMs int64) ([]string, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var ids []string
	err := s.db.WithContext(ctx).Model(&Replica{}).Where("app = ? AND heartbeat_ms >= ?", app, sinceMs).Order("id").Pluck("id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("store: read live replicas of app %q: %w", app, err)
	}
	return ids, nil
}

// LiveAndClaiming is LiveReplicaIDs in one query with those of them
// that claim fires: all but the replicas whose clock is beyond their
// Options.MaxClockSkew (Replica.ClockRefused). Both lists are ordered by
// ID.
func (s *Store) LiveAndClaiming(ctx context.Context, app string, sinceMs int64) (live, claiming []string, err error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var rows []struct {
		ID           string
		ClockRefused bool
	}
	err = s.db.WithContext(ctx).Model(&Replica{}).Select("id", "clock_refused").
		Where("app = ? AND heartbeat_ms >= ?", app, sinceMs).Order("id").Scan(&rows).Error
	if err != nil {
		return nil, nil, fmt.Errorf("store: read live replicas of app %q: %w", app, err)
	}
	live, claiming = make([]string, 0, len(rows)), make([]string, 0, len(rows))
	for _, r := range rows {
		live = append(live, r.ID)
		if !r.ClockRefused {
			claiming = append(claiming, r.ID)
		}
	}
	return live, claiming, nil
}

// DeleteReplica removes a replica, as a stopping scheduler does. Deleting
// one that is not there is not an error.
func (s *Store) DeleteReplica(ctx context.Context, app, id string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.db.WithContext(ctx).Where("app = ? AND id = ?", app, id).Delete(&Replica{}).Error; err != nil {
		return fmt.Errorf("store: delete replica %q: %w", id, err)
	}
	return nil
}

// PruneReplicas deletes the replicas of app silent since before beforeMs
// (killed processes leave their row behind) and returns how many it deleted.
func (s *Store) PruneReplicas(ctx context.Context, app string, beforeMs int64) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	res := s.db.WithContext(ctx).Where("app = ? AND heartbeat_ms < ?", app, beforeMs).Delete(&Replica{})
	if res.Error != nil {
		return 0, fmt.Errorf("store: prune replicas of app %q: %w", app, res.Error)
	}
	return res.RowsAffected, nil
}
