package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Alerts are damped and delivered through xtimer_alerts, one row per app,
// kind and subject (a task code, a replica ID, or "" for the app). The row
// is the state every replica shares, so that whichever replica sees an
// event, each alert is sent by exactly one of them:
//
//   - WindowMs starts the damping window: the instant the last alert of the
//     row was claimed. An event inside the window only adds to Suppressed.
//   - The first event after the window claims the row (a conditional
//     UPDATE that one replica wins): the event becomes Pending, to be
//     delivered with PendingSuppressed, the events damped since the alert
//     before. At the window's end a row with Suppressed events and no new
//     event is claimed as a digest of them (ClaimAlert).
//   - Pending is cleared once delivered (AlertDone). A replica that dies
//     with an alert pending leaves it to another: after LeaseUntilMs any
//     replica may claim it again (ClaimAlert), and it is delivered with
//     the same content, so a receiver deduplicates on the event's ID.
//   - Occurrence names what an event is about (a replica's last heartbeat,
//     a task's last missed fire): several replicas raising the same
//     occurrence count once.

// Alert is one row of xtimer_alerts.
type Alert struct {
	ID      int64  `gorm:"column:id;primaryKey;autoIncrement"`
	App     string `gorm:"column:app;size:64;not null;uniqueIndex:xtimer_alerts_key,priority:1"`
	Kind    string `gorm:"column:kind;size:32;not null;uniqueIndex:xtimer_alerts_key,priority:2"`
	Subject string `gorm:"column:subject;size:128;not null;default:'';uniqueIndex:xtimer_alerts_key,priority:3"`
	// Occurrence is the occurrence of the latest event counted.
	Occurrence string `gorm:"column:occurrence;size:64;not null;default:''"`
	WindowMs   int64  `gorm:"column:window_ms;not null;default:0"`
	Suppressed int64  `gorm:"column:suppressed;not null;default:0"`
	LastMs     int64  `gorm:"column:last_ms;not null;default:0"`
	// LastEvent is the latest event counted, as the caller encoded it: a
	// digest delivers it.
	LastEvent string `gorm:"column:last_event;type:text;not null"`
	// Pending is the alert being delivered, "" when none.
	Pending           string `gorm:"column:pending;type:text;not null"`
	PendingSuppressed int64  `gorm:"column:pending_suppressed;not null;default:0"`
	PendingDigest     bool   `gorm:"column:pending_digest;not null;default:false"`
	// PendingSinceMs is the window the pending alert's count covers began:
	// when the alert before it was claimed; 0 for a row's first.
	PendingSinceMs int64 `gorm:"column:pending_since_ms;not null;default:0"`
	// Lease names the replica delivering Pending, until LeaseUntilMs.
	Lease        string `gorm:"column:lease;size:128;not null;default:''"`
	LeaseUntilMs int64  `gorm:"column:lease_until_ms;not null;default:0"`
	// Tries counts the deliveries of Pending begun.
	Tries int `gorm:"column:tries;not null;default:0"`
}

// TableName is xtimer_alerts, whatever the caller's naming strategy.
func (Alert) TableName() string { return "xtimer_alerts" }

// AlertRaise is one event, or several of one kind and subject coalesced.
type AlertRaise struct {
	App, Kind, Subject string
	// Occurrence, when not "", makes a raise of the same occurrence as the
	// row's latest count nothing.
	Occurrence string
	// Count is how many events the raise stands for; at least 1.
	Count int64
	// Event is the latest of them, encoded by the caller.
	Event string
	AtMs  int64
	// WindowMs is the damping window.
	WindowMs int64
	// Replica claims the alert, if there is one to send, until LeaseUntilMs.
	Replica      string
	LeaseUntilMs int64
}

// AlertClaim is an alert the claiming replica delivers.
type AlertClaim struct {
	ID    int64
	Event string
	// Suppressed counts the events of the row damped since the alert
	// before this one, claimed at SinceMs (0 for a row's first alert).
	Suppressed int64
	SinceMs    int64
	// Digest: the alert stands for the Suppressed events, Event being the
	// latest of them, sent at the end of their window.
	Digest bool
	// Tries counts this delivery: 1 the first time.
	Tries int
}

// raiseRounds bounds RaiseAlert's optimistic retries: each lost round is
// another replica's write to the same row, of which there are few.
const raiseRounds = 20

// RaiseAlert counts an event, and returns the alert to deliver when this
// call claimed one (the first event of a row, or the first after its
// window), nil when the event was damped or a repeated occurrence.
func (s *Store) RaiseAlert(ctx context.Context, r AlertRaise) (*AlertClaim, error) {
	if r.Count < 1 || r.Kind == "" || len(r.Kind) > 32 || len(r.Subject) > 128 || len(r.Occurrence) > 64 {
		return nil, fmt.Errorf("store: raise alert %q/%q: count %d, occurrence %q: want count >= 1, kind 1-32 bytes, subject <= 128, occurrence <= 64",
			r.Kind, r.Subject, r.Count, r.Occurrence)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	db := s.db.WithContext(ctx)
	fail := func(err error) (*AlertClaim, error) {
		return nil, fmt.Errorf("store: raise alert %q/%q of app %q: %w", r.Kind, r.Subject, r.App, err)
	}
	for range raiseRounds {
		var a Alert
		found, err := takeOne(db.Where("app = ? AND kind = ? AND subject = ?", r.App, r.Kind, r.Subject), &a)
		switch {
		case err != nil:
			return fail(err)
		case !found:
			row := Alert{App: r.App, Kind: r.Kind, Subject: r.Subject, Occurrence: r.Occurrence, WindowMs: r.AtMs,
				Suppressed: r.Count - 1, LastMs: r.AtMs, LastEvent: r.Event, Pending: r.Event,
				Lease: r.Replica, LeaseUntilMs: r.LeaseUntilMs, Tries: 1}
			if err = db.Create(&row).Error; err != nil {
				if duplicateKey(err) {
					continue // another replica's first event of the row
				}
				return fail(err)
			}
			return &AlertClaim{ID: row.ID, Event: r.Event, Tries: 1}, nil
		}
		if r.Occurrence != "" && a.Occurrence == r.Occurrence {
			return nil, nil
		}
		if r.AtMs-a.WindowMs >= r.WindowMs && a.Pending == "" {
			res := db.Model(&Alert{}).
				Where("id = ? AND window_ms = ? AND suppressed = ? AND pending = ''", a.ID, a.WindowMs, a.Suppressed).
				Updates(map[string]any{"window_ms": r.AtMs, "suppressed": r.Count - 1, "last_ms": r.AtMs,
					"last_event": r.Event, "occurrence": r.Occurrence, "pending": r.Event,
					"pending_suppressed": a.Suppressed, "pending_digest": false, "pending_since_ms": a.WindowMs,
					"lease": r.Replica, "lease_until_ms": r.LeaseUntilMs, "tries": 1})
			if res.Error != nil {
				return fail(res.Error)
			}
			if res.RowsAffected == 1 {
				return &AlertClaim{ID: a.ID, Event: r.Event, Suppressed: a.Suppressed, SinceMs: a.WindowMs, Tries: 1}, nil
			}
			continue
		}
		q := db.Model(&Alert{}).Where("id = ? AND window_ms = ?", a.ID, a.WindowMs)
		if r.Occurrence != "" {
			q = q.Where("occurrence <> ?", r.Occurrence)
		}
		res := q.Updates(map[string]any{"suppressed": gorm.Expr("suppressed + ?", r.Count), "last_ms": r.AtMs,
			"last_event": r.Event, "occurrence": r.Occurrence})
		if res.Error != nil {
			return fail(res.Error)
		}
		if res.RowsAffected == 1 {
			return nil, nil
		}
	}
	return fail(fmt.Errorf("the row changed under %d rounds in a row", raiseRounds))
}

// DueAlerts returns up to limit rows of app with work for any replica:
// an alert pending whose lease ended before nowMs, or events suppressed in
// a window that ended (window_ms at or before nowMs - windowMs).
func (s *Store) DueAlerts(ctx context.Context, app string, nowMs, windowMs int64, limit int) ([]Alert, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []Alert
	err := s.db.WithContext(ctx).
		Where("app = ? AND ((pending <> '' AND lease_until_ms < ?) OR (pending = '' AND suppressed > 0 AND window_ms <= ?))",
			app, nowMs, nowMs-windowMs).
		Order("id").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("store: read due alerts of app %q: %w", app, err)
	}
	return out, nil
}

// ClaimAlert claims a row DueAlerts returned, as read: its pending alert
// again (the lease ended), or a digest of its suppressed events. It returns
// nil when another replica claimed it first or the row moved on.
func (s *Store) ClaimAlert(ctx context.Context, a Alert, nowMs int64, replica string, leaseUntilMs int64) (*AlertClaim, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.db.WithContext(ctx).Model(&Alert{})
	var res *gorm.DB
	var claim AlertClaim
	if a.Pending != "" {
		res = q.Where("id = ? AND pending <> '' AND lease = ? AND lease_until_ms = ?", a.ID, a.Lease, a.LeaseUntilMs).
			Updates(map[string]any{"lease": replica, "lease_until_ms": leaseUntilMs, "tries": a.Tries + 1})
		claim = AlertClaim{ID: a.ID, Event: a.Pending, Suppressed: a.PendingSuppressed, SinceMs: a.PendingSinceMs,
			Digest: a.PendingDigest, Tries: a.Tries + 1}
	} else {
		res = q.Where("id = ? AND window_ms = ? AND suppressed = ? AND pending = ''", a.ID, a.WindowMs, a.Suppressed).
			Updates(map[string]any{"window_ms": nowMs, "suppressed": 0, "pending": a.LastEvent,
				"pending_suppressed": a.Suppressed, "pending_digest": true, "pending_since_ms": a.WindowMs,
				"lease": replica, "lease_until_ms": leaseUntilMs, "tries": 1})
		claim = AlertClaim{ID: a.ID, Event: a.LastEvent, Suppressed: a.Suppressed, SinceMs: a.WindowMs, Digest: true, Tries: 1}
	}
	if res.Error != nil {
		return nil, fmt.Errorf("store: claim alert %d: %w", a.ID, res.Error)
	}
	if res.RowsAffected != 1 {
		return nil, nil
	}
	return &claim, nil
}

// AlertDone clears the pending alert that replica delivered (or gave up on).
func (s *Store) AlertDone(ctx context.Context, id int64, replica string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err := s.db.WithContext(ctx).Model(&Alert{}).Where("id = ? AND lease = ? AND pending <> ''", id, replica).
		Updates(map[string]any{"pending": "", "pending_suppressed": 0, "pending_digest": false, "lease": ""}).Error
	if err != nil {
		return fmt.Errorf("store: alert %d done: %w", id, err)
	}
	return nil
}

// AlertRetryAt keeps the pending alert replica failed to deliver for
// another try, by any replica, at atMs.
func (s *Store) AlertRetryAt(ctx context.Context, id int64, replica string, atMs int64) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err := s.db.WithContext(ctx).Model(&Alert{}).Where("id = ? AND lease = ? AND pending <> ''", id, replica).
		Update("lease_until_ms", atMs).Error
	if err != nil {
		return fmt.Errorf("store: alert %d retry at %d: %w", id, atMs, err)
	}
	return nil
}

// StatusesSince returns the statuses of up to limit executions of a task
// of app run at or after fromMs, in run-time order. It reads along
// xtimer_executions_shard from fromMs on: the fires of the window, not the
// task's history.
func (s *Store) StatusesSince(ctx context.Context, app, code string, fromMs int64, limit int) ([]string, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []string
	err := s.db.WithContext(ctx).Model(&Execution{}).
		Where("app = ? AND task_code = ? AND run_time >= ?", app, code, fromMs).
		Order("run_time").Limit(limit).Pluck("status", &out).Error
	if err != nil {
		return nil, fmt.Errorf("store: read statuses of %q/%q since %d: %w", app, code, fromMs, err)
	}
	return out, nil
}

// SilentReplicas returns the replicas of app whose last heartbeat is in
// [fromMs, beforeMs): gone without stopping (a stopping replica deletes its
// row), ordered by ID.
func (s *Store) SilentReplicas(ctx context.Context, app string, fromMs, beforeMs int64) ([]Replica, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []Replica
	err := s.db.WithContext(ctx).Where("app = ? AND heartbeat_ms >= ? AND heartbeat_ms < ?", app, fromMs, beforeMs).
		Order("id").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("store: read silent replicas of app %q: %w", app, err)
	}
	return out, nil
}
