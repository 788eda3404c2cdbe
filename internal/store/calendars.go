package store

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// Exclusion calendars: named lists of dates per app (xtimer_calendars),
// which tasks name (Task.Calendar) and whose days their fires skip. A
// write bumps the app's task generation in its transaction, so that every
// replica, which reads that one row a second (TaskGen), reads the
// calendars again at its next tick (docs/architecture.md, "Exclusions").

// Calendar is one row of xtimer_calendars.
type Calendar struct {
	App  string `gorm:"column:app;size:64;primaryKey;autoIncrement:false"`
	Name string `gorm:"column:name;size:64;primaryKey;autoIncrement:false"`
	// Days are the calendar's dates, YYYY-MM-DD, sorted, without repeats;
	// each task reads them in its own zone.
	Days      Days  `gorm:"column:days;not null"`
	UpdatedMs int64 `gorm:"column:updated_ms;not null;default:0"`
	// Version grows by one on every write, from 1.
	Version int64 `gorm:"column:version;not null;default:0"`
}

// TableName is xtimer_calendars, whatever the caller's naming strategy.
func (Calendar) TableName() string { return "xtimer_calendars" }

// Days is a list of dates stored comma-separated ("2026-12-25,2026-12-26"),
// the form of Task.ExcludeDays. Its column is MEDIUMTEXT on MySQL/MariaDB,
// whose TEXT stops at 64 KiB (some 5,900 days), and TEXT elsewhere.
type Days []string

// GormDataType is the column's generic type, for GORM's schema.
func (Days) GormDataType() string { return "text" }

// GormDBDataType gives the column type per dialect.
func (Days) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == "mysql" {
		return "mediumtext"
	}
	return "text"
}

// Value joins the days with commas; none is "".
func (d Days) Value() (driver.Value, error) { return strings.Join(d, ","), nil }

// Scan splits a comma-separated list; "" and NULL are none.
func (d *Days) Scan(v any) error {
	var s string
	switch v := v.(type) {
	case nil:
	case []byte:
		s = string(v)
	case string:
		s = v
	default:
		return fmt.Errorf("store: days: cannot scan %T", v)
	}
	*d = SplitDays(s)
	return nil
}

// SplitDays splits a comma-separated list of days (Task.ExcludeDays,
// Calendar.Days); "" is none.
func SplitDays(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// MaxCalendarDays bounds the days of one calendar: what SetCalendar takes.
const MaxCalendarDays = 10_000

// SetCalendar replaces the days of app's calendar name, creating it at
// version 1 when missing, and bumps the app's task generation (TaskGen) in
// the same transaction. days are stored as given: the caller validates,
// sorts and dedupes them. It returns the row as stored.
func (s *Store) SetCalendar(ctx context.Context, app, name string, days []string) (Calendar, error) {
	if name == "" || len(name) > 64 || len(days) > MaxCalendarDays {
		return Calendar{}, fmt.Errorf("store: set calendar %q of app %q: want a name of 1-64 bytes and at most %d days, got %d",
			name, app, MaxCalendarDays, len(days))
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	now := s.nowMs()
	var stored Calendar
	err := s.tx(ctx, func(tx *gorm.DB) error {
		// The table-qualified column is the row's current value on every
		// backend (see bumpTaskGen).
		err := tx.Clauses(clause.OnConflict{
			Columns: []clause.Column{{Name: "app"}, {Name: "name"}},
			DoUpdates: clause.Assignments(map[string]any{"days": Days(days), "updated_ms": now,
				"version": gorm.Expr("xtimer_calendars.version + 1")}),
		}).Create(&Calendar{App: app, Name: name, Days: days, UpdatedMs: now, Version: 1}).Error
		if err != nil {
			return fmt.Errorf("store: set calendar %q of app %q: %w", name, app, err)
		}
		if stored, err = readCalendar(tx, app, name); err != nil {
			return err
		}
		return bumpTaskGen(tx, app)
	})
	if err != nil {
		return Calendar{}, err
	}
	return stored, nil
}

// Calendar returns one calendar of app, or an error wrapping ErrNotFound.
func (s *Store) Calendar(ctx context.Context, app, name string) (Calendar, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	return readCalendar(s.db.WithContext(ctx), app, name)
}

func readCalendar(db *gorm.DB, app, name string) (Calendar, error) {
	var c Calendar
	found, err := takeOne(db.Where("app = ? AND name = ?", app, name), &c)
	if err != nil {
		return Calendar{}, fmt.Errorf("store: read calendar %q of app %q: %w", name, app, err)
	}
	if !found {
		return Calendar{}, notFound("calendar %q of app %q", name, app)
	}
	return c, nil
}

// CalendarHead is a calendar without its days: what a listing shows and
// what tells a replica which calendars changed.
type CalendarHead struct {
	Name      string
	DayCount  int
	UpdatedMs int64
	Version   int64
}

// CalendarHeads lists app's calendars by name, without their days, which
// may be long.
func (s *Store) CalendarHeads(ctx context.Context, app string) ([]CalendarHead, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var rows []struct {
		Name               string
		Length             int
		UpdatedMs, Version int64
	}
	err := s.db.WithContext(ctx).Model(&Calendar{}).Select("name, LENGTH(days) AS length, updated_ms, version").
		Where("app = ?", app).Order("name").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: list the calendars of app %q: %w", app, err)
	}
	out := make([]CalendarHead, len(rows))
	for i, r := range rows {
		// Every day is 10 bytes, and a comma before each but the first.
		out[i] = CalendarHead{Name: r.Name, DayCount: (r.Length + 1) / 11, UpdatedMs: r.UpdatedMs, Version: r.Version}
	}
	return out, nil
}
