package store

import (
	"context"
	"fmt"
)

// This file holds what encrypting the stored secrets of HTTP tasks needs
// of the database (internal/engine/secrets.go does the encrypting): a
// paged read of the targets that hold secrets, and a conditional write of
// one target.

// SecretTarget is the stored target of an HTTP task that holds a secret.
type SecretTarget struct {
	ID      int64
	Code    string
	Version int64
	Target  string
}

// secretMarker is in every stored target that holds a secret: the key of
// a secret header's flag or of the signing secret. JSON escapes a quote
// inside a value, so a value alone never matches it; a target that matches
// and holds no secret costs the caller a decode.
const secretMarker = `%"secret"%`

// SecretTargets returns, ordered by ID, at most limit targets of app's
// HTTP tasks whose ID is above afterID and that may hold a secret.
func (s *Store) SecretTargets(ctx context.Context, app string, afterID int64, limit int) ([]SecretTarget, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var rows []Task
	err := s.db.WithContext(ctx).Select("id", "code", "version", "http_target").
		Where("app = ? AND kind = ? AND id > ? AND http_target LIKE ?", app, KindHTTP, afterID, secretMarker).
		Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: read the targets of app %q's http tasks: %w", app, err)
	}
	out := make([]SecretTarget, 0, len(rows))
	for _, r := range rows {
		if r.HTTPTarget != nil {
			out = append(out, SecretTarget{ID: r.ID, Code: r.Code, Version: r.Version, Target: *r.HTTPTarget})
		}
	}
	return out, nil
}

// RewriteSecretTarget writes target over the stored target of the HTTP
// task of app and code, if the row is still at version and its target
// still old, byte for byte: it names what it replaces, and an edit made
// since wins. The stored target means the same before and after, so neither
// the version nor the app's task generation changes: replicas running with
// the old text keep running right. It reports whether the row was written.
func (s *Store) RewriteSecretTarget(ctx context.Context, app, code string, version int64, old, target string) (bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	same := "http_target = ?"
	if s.db.Dialector.Name() == "mysql" {
		same = "BINARY http_target = ?" // its default collation ignores case
	}
	res := s.db.WithContext(ctx).Model(&Task{}).
		Where("app = ? AND code = ? AND kind = ? AND version = ? AND "+same, app, code, KindHTTP, version, old).
		UpdateColumn("http_target", target)
	if res.Error != nil {
		return false, fmt.Errorf("store: rewrite the target of http task %q: %w", code, res.Error)
	}
	return res.RowsAffected == 1, nil
}
