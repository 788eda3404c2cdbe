package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"gorm.io/gorm"
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
		// The list is in the row again, not in chunks.
		r.HandlerChunks = 0
		update = append(update, "handlers", "handler_chunks")
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

// handlerChunkBytes bounds the JSON of one row of xtimer_handler_chunks,
// and so the statement that writes it: under the smallest default
// max_allowed_packet of the MySQL family (4 MiB on MySQL 5.7; MariaDB's is
// 16 MiB, MySQL 8's 64 MiB), which a list of a million long codes in one
// value goes over.
const handlerChunkBytes = 1 << 20

// errNoReplica aborts SetReplicaHandlers' transaction when the row is
// not there.
var errNoReplica = errors.New("store: no such replica")

// SetReplicaHandlers writes the handler list of a replica, apart from its
// heartbeats (a replica of a million tasks writes them so), as rows of
// xtimer_handler_chunks of at most handlerChunkBytes each (WithHandlerChunkBytes), and their
// count into the replica's row, in one transaction: a reader sees the
// old list or the new one, whole. It reports whether the row was there: a
// replica whose first heartbeat has not landed yet, or whose row was
// pruned, writes them again later.
func (s *Store) SetReplicaHandlers(ctx context.Context, app, id string, codes Codes) (bool, error) {
	chunks := chunkCodes(codes, s.handlerChunk)
	// Each chunk's JSON is made before the transaction begins: inside it,
	// a list of a million codes took the client longer than abandonAfter
	// between two statements on a loaded machine, and PostgreSQL ended the
	// session (the write failed with a broken pipe).
	docs := make([]string, len(chunks))
	for i, c := range chunks {
		if c == nil {
			c = Codes{} // none is [], not NULL
		}
		b, err := json.Marshal([]string(c))
		if err != nil {
			return false, fmt.Errorf("store: write the %d handlers of replica %q: chunk %d: %w", len(codes), id, i, err)
		}
		docs[i] = string(b)
	}
	// rowTx: the rows are named by key. At MySQL's REPEATABLE READ the
	// DELETE of chunks not yet written locked the gap the other replicas'
	// chunks go into, and a fleet's replicas, writing their lists at once,
	// deadlocked one another until the retries ran out.
	err := s.rowTx(ctx, func(tx *gorm.DB) error {
		// The row last: a heartbeat waits for its lock only until the commit.
		if err := tx.Where("app = ? AND replica = ?", app, id).Delete(&HandlerChunk{}).Error; err != nil {
			return err
		}
		for i, doc := range docs {
			row := map[string]any{"app": app, "replica": id, "seq": i, "codes": doc}
			if err := tx.Table(HandlerChunk{}.TableName()).Create(row).Error; err != nil {
				return fmt.Errorf("chunk %d of %d: %w", i, len(chunks), err)
			}
		}
		res := tx.Model(&Replica{}).Where("app = ? AND id = ?", app, id).
			UpdateColumns(map[string]any{"handlers": nil, "handler_chunks": len(chunks)})
		if res.Error != nil || res.RowsAffected > 0 {
			return res.Error
		}
		// MySQL counts the rows changed, not those found: the same count
		// again changes none.
		var n int64
		if err := tx.Model(&Replica{}).Where("app = ? AND id = ?", app, id).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return errNoReplica
		}
		return nil
	})
	switch {
	case errors.Is(err, errNoReplica):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: write the %d handlers of replica %q in %d chunks: %w", len(codes), id, len(chunks), err)
	}
	return true, nil
}

// chunkCodes splits codes into lists whose JSON takes at most limit
// bytes each (a code longer than that alone in its list): one empty list
// for none.
func chunkCodes(codes Codes, limit int) []Codes {
	out := []Codes{}
	size, from := 2, 0 // "[]"
	for i, c := range codes {
		n := jsonLen(c) + 1 // and a comma
		if i > from && size+n > limit {
			out = append(out, codes[from:i])
			size, from = 2, i
		}
		size += n
	}
	return append(out, codes[from:])
}

// jsonLen is the length of s as encoding/json writes it, or a little more.
func jsonLen(s string) int {
	n := 2
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			n += 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError:
			n += 6
		default:
			n += utf8.RuneLen(r)
		}
	}
	return n
}

// fillChunkedHandlers sets the handlers of the rows whose list is in
// xtimer_handler_chunks (Replica.HandlerChunks), each code passed
// through keep when it is not nil. A row whose chunks are gone (the
// replica deleted meanwhile) keeps none.
func (s *Store) fillChunkedHandlers(ctx context.Context, app string, rows []Replica, keep func(string) bool) error {
	var ids []string
	at := map[string]int{}
	for i, r := range rows {
		if r.HandlerChunks > 0 {
			ids = append(ids, r.ID)
			at[r.ID] = i
		}
	}
	if len(ids) == 0 {
		return nil
	}
	cur, err := s.db.WithContext(ctx).Model(&HandlerChunk{}).Select("replica", "codes").
		Where("app = ? AND replica IN ?", app, ids).Order("replica, seq").Rows()
	if err != nil {
		return fmt.Errorf("store: read the handler lists of %d replicas of app %q: %w", len(ids), app, err)
	}
	defer func() { _ = cur.Close() }()
	for cur.Next() {
		var id string
		var codes Codes
		if err := cur.Scan(&id, &codes); err != nil {
			return fmt.Errorf("store: read the handler lists of %d replicas of app %q: %w", len(ids), app, err)
		}
		if keep != nil {
			codes = slices.DeleteFunc(codes, func(c string) bool { return !keep(c) })
		}
		r := &rows[at[id]]
		if r.Handlers == nil {
			r.Handlers = Codes{}
		}
		r.Handlers = append(r.Handlers, codes...)
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("store: read the handler lists of %d replicas of app %q: %w", len(ids), app, err)
	}
	return nil
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
	if err := s.fillChunkedHandlers(ctx, app, out, nil); err != nil {
		return nil, err
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
	if err := s.db.WithContext(ctx).Where("app = ? AND replica = ?", app, id).Delete(&HandlerChunk{}).Error; err != nil {
		return fmt.Errorf("store: delete the handler list of replica %q: %w", id, err)
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
	// The handler lists of the replicas gone, pruned now or before.
	err := s.db.WithContext(ctx).Where("app = ? AND replica NOT IN (?)", app,
		s.db.Model(&Replica{}).Select("id").Where("app = ?", app)).Delete(&HandlerChunk{}).Error
	if err != nil {
		return res.RowsAffected, fmt.Errorf("store: prune the handler lists of app %q: %w", app, err)
	}
	return res.RowsAffected, nil
}
