package store

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"
)

// This file holds the queries of sharded and broadcast fires
// (docs/architecture.md, "Sharded and broadcast fires"): each shard is a
// row of its own, owned by the replica it was dealt to, which may not be
// the replica that recorded it.

// ShardFires returns the unstarted first attempts of shards of tasks
// codes that replica owns, due by dueMs, oldest first, at most limit: the
// shards dealt to it, which it arms (it may not have recorded them). Like
// ClaimFires, it reads the (app, status, run_time) index up to dueMs,
// where the rows still scheduled are few.
func (s *Store) ShardFires(ctx context.Context, app, replica string, codes []string, dueMs int64, limit int) ([]Execution, error) {
	if len(codes) == 0 {
		return nil, nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []Execution
	for from := 0; from < len(codes) && len(out) < limit; from += insertChunk {
		var rows []Execution
		err := s.db.WithContext(ctx).
			Where("app = ? AND status = ? AND run_time <= ? AND attempt = 0 AND started_ms = 0 AND replica = ? AND (shards > 0 OR broadcast = ?) AND task_code IN ?",
				app, StatusScheduled, dueMs, replica, true, codes[from:min(from+insertChunk, len(codes))]).
			Order("run_time, id").Limit(limit - len(out)).Find(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("store: read the shards of replica %q due by %d: %w", replica, dueMs, err)
		}
		out = append(out, rows...)
	}
	return out, nil
}

// LateShardOwners returns the replicas, other than replica, that own an
// unstarted shard of tasks codes whose planned start is at or before
// lateMs: those to ask whether they live.
func (s *Store) LateShardOwners(ctx context.Context, app, replica string, codes []string, lateMs int64) ([]string, error) {
	if len(codes) == 0 {
		return nil, nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var owners []string
	for from := 0; from < len(codes); from += insertChunk {
		var got []string
		err := s.db.WithContext(ctx).Model(&Execution{}).
			Where("app = ? AND status = ? AND run_time <= ? AND attempt = 0 AND started_ms = 0 AND replica <> ? AND replica <> '' AND (shards > 0 OR broadcast = ?) AND task_code IN ? AND "+plannedStart+" <= ?",
				app, StatusScheduled, lateMs, replica, true, codes[from:min(from+insertChunk, len(codes))], lateMs).
			Distinct("replica").Pluck("replica", &got).Error
		if err != nil {
			return nil, fmt.Errorf("store: read the owners of late shards of app %q: %w", app, err)
		}
		for _, o := range got {
			if !slices.Contains(owners, o) {
				owners = append(owners, o)
			}
		}
	}
	slices.Sort(owners)
	return owners, nil
}

// TakeOverShards gives replica the unstarted shards of tasks codes that
// owner holds, due by dueMs, but for broadcast ones: the caller found
// owner dead (its liveness lock was free). The conditional update on
// the owner makes the old owner's start find nothing (StartFires), and
// of two replicas taking over at once, each row goes to one. Broadcast
// shards of owner whose planned start is at or before nowMs are recorded
// skipped, reason ReasonReplicaLost, instead: they run on their replica
// or not at all. It returns the rows replica now owns, and how many
// broadcast shards it skipped.
func (s *Store) TakeOverShards(ctx context.Context, app, owner string, codes []string, dueMs, nowMs int64, replica string) (rows []Execution, skipped int64, err error) {
	if len(codes) == 0 || owner == "" || owner == replica {
		return nil, 0, nil
	}
	claim, err := nonce()
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err = s.rowTx(ctx, func(tx *gorm.DB) error {
		rows, skipped = nil, 0
		var taken int64
		for from := 0; from < len(codes); from += insertChunk {
			chunk := codes[from:min(from+insertChunk, len(codes))]
			unstarted := func() *gorm.DB {
				return tx.Model(&Execution{}).Where("app = ? AND status = ? AND attempt = 0 AND started_ms = 0 AND replica = ? AND task_code IN ?",
					app, StatusScheduled, owner, chunk)
			}
			res := unstarted().Where("shards > 0 AND broadcast = ? AND run_time <= ?", false, dueMs).
				UpdateColumns(map[string]any{"replica": replica, "claim": claim, "updated_ms": s.nowMs()})
			if res.Error != nil {
				return fmt.Errorf("store: take over the shards of replica %q: %w", owner, res.Error)
			}
			taken += res.RowsAffected
			res = unstarted().Where("broadcast = ? AND "+plannedStart+" <= ?", true, nowMs).
				UpdateColumns(map[string]any{"status": StatusSkipped, "reason": ReasonReplicaLost, "finished_ms": nowMs, "updated_ms": s.nowMs()})
			if res.Error != nil {
				return fmt.Errorf("store: skip the broadcast shards of replica %q: %w", owner, res.Error)
			}
			skipped += res.RowsAffected
		}
		if taken == 0 {
			return nil
		}
		return tx.Where("app = ? AND claim = ? AND replica = ? AND status = ?", app, claim, replica, StatusScheduled).
			Order("run_time, id").Find(&rows).Error
	})
	if err != nil {
		return nil, 0, err
	}
	return rows, skipped, nil
}

// ReplicaHandlers returns the handler codes of the replicas ids of app,
// as their rows list them (Replica.Handlers, sorted, or their chunks), by
// replica ID: a replica whose row lists none yet is absent. Each list is
// reduced to the codes in keep, which the caller asks about: a replica of
// a million tasks lists a million codes.
func (s *Store) ReplicaHandlers(ctx context.Context, app string, ids []string, keep map[string]bool) (map[string][]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var rows []Replica
	if err := s.db.WithContext(ctx).Select("id", "handlers", "handler_chunks").Where("app = ? AND id IN ?", app, ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: read the handlers of %d replicas of app %q: %w", len(ids), app, err)
	}
	kept := func(c string) bool { return keep[c] }
	if err := s.fillChunkedHandlers(ctx, app, rows, kept); err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(rows))
	for _, r := range rows {
		if r.Handlers == nil {
			continue
		}
		out[r.ID] = slices.DeleteFunc([]string(r.Handlers), func(c string) bool { return !keep[c] })
	}
	return out, nil
}
