package xtimer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/store"
)

// Exclusions: days on which a task does not run. A task excludes its own
// days (WithExclude) and those of a calendar of its app (WithCalendar),
// which SetCalendar writes at runtime and every replica reads within a
// tick. A fire whose instant falls on an excluded day, in the task's zone,
// is recorded skipped with reason "excluded", and alerts nobody; manual
// runs (Trigger) always run. docs/configuration.md, "Exclusion calendars",
// has the whole story; docs/architecture.md where the engine applies them.

// Limits of exclusions.
const (
	// MaxExcludeDays bounds the days of WithExclude, which the task's row
	// holds (2048 bytes); longer lists belong in a calendar.
	MaxExcludeDays = 180
	// MaxCalendarDays bounds the days of one calendar (SetCalendar).
	MaxCalendarDays = store.MaxCalendarDays
)

// ErrCalendarNotFound is returned, wrapped, for a calendar name the app
// does not have.
var ErrCalendarNotFound = errors.New("xtimer: calendar not found")

// CalendarError is SetCalendar's error for a name or a day it refuses.
type CalendarError struct {
	// Calendar is the calendar's name, as given.
	Calendar string
	// Field is "name", "days", or one day: "days[3]".
	Field string
	// Value is the refused value as given, or the count of days.
	Value string
	// Reason says what is wanted.
	Reason string
}

// Error reads like `xtimer: calendar "holidays": days[3] "2026-13-01":
// want a date YYYY-MM-DD`.
func (e *CalendarError) Error() string {
	return fmt.Sprintf("xtimer: calendar %q: %s %q: %s", e.Calendar, e.Field, e.Value, e.Reason)
}

// dayReason is why a day is refused.
const dayReason = "want a date YYYY-MM-DD"

// calendarNameReason is why a calendar's name is refused.
const calendarNameReason = "want 1-64 lower-case letters, digits and . _ : - starting with a letter or digit"

func validCalendarName(name string) bool { return validCode(name) && len(name) <= 64 }

// WithExclude skips the task's fires on these dates, YYYY-MM-DD, read in
// the task's zone (WithLocation, or a console edit of the zone): such a
// fire is recorded skipped, reason "excluded". Given more than once, the
// days add up. At most MaxExcludeDays (180) days: a longer list, or one
// that changes without a deploy, belongs in a calendar (WithCalendar).
func WithExclude(days ...string) TaskOption {
	return func(c *taskConfig) error {
		sorted, bad := engine.NormalizeDays(days)
		if bad >= 0 {
			return optionError("WithExclude", strconv.Quote(days[bad]), dayReason)
		}
		all, _ := engine.NormalizeDays(append(store.SplitDays(c.excludeDays), sorted...))
		if len(all) > MaxExcludeDays {
			return optionError("WithExclude", fmt.Sprintf("%d days", len(all)),
				fmt.Sprintf("at most %d days fit the task's row; put longer lists in a calendar (WithCalendar, Scheduler.SetCalendar)", MaxExcludeDays))
		}
		c.excludeDays = strings.Join(all, ",")
		return nil
	}
}

// WithCalendar skips the task's fires on the days of the app's calendar
// name, read in the task's zone, as WithExclude does for its own days
// (both may be given: their days add up). The calendar is stored in the
// database (SetCalendar) and may change at runtime: a change applies to
// the fires not started yet, on every replica within a second or so. A
// calendar the app does not have excludes nothing, and raises
// EventCalendarMissing.
func WithCalendar(name string) TaskOption {
	return func(c *taskConfig) error {
		if !validCalendarName(name) {
			return optionError("WithCalendar", strconv.Quote(name), calendarNameReason)
		}
		c.calendar = name
		return nil
	}
}

// checkCalendar validates SetCalendar's arguments and returns the days
// sorted and without repeats.
func checkCalendar(name string, days []string) ([]string, error) {
	if !validCalendarName(name) {
		return nil, &CalendarError{Calendar: name, Field: "name", Value: name, Reason: calendarNameReason}
	}
	sorted, bad := engine.NormalizeDays(days)
	if bad >= 0 {
		return nil, &CalendarError{Calendar: name, Field: fmt.Sprintf("days[%d]", bad), Value: days[bad], Reason: dayReason}
	}
	if len(sorted) > MaxCalendarDays {
		return nil, &CalendarError{Calendar: name, Field: "days", Value: fmt.Sprintf("%d days", len(sorted)),
			Reason: fmt.Sprintf("at most %d days; split them across calendars", MaxCalendarDays)}
	}
	return sorted, nil
}

// SetCalendar replaces the days of the app's calendar name (creating it
// when missing): dates YYYY-MM-DD, which each task naming the calendar
// (WithCalendar) reads in its own zone. Days are sorted and repeats
// dropped; at most MaxCalendarDays. A bad name or day fails with a
// *CalendarError naming it, and nothing is stored. The change applies at
// once on this replica and within a tick on the others (the write bumps
// the app's task generation, which every replica reads each second), to
// every fire not started yet: a fire recorded before its day was excluded
// is skipped when due; one recorded skipped before its day was removed
// stays skipped. The tables must exist: Start creates them.
func (s *Scheduler) SetCalendar(ctx context.Context, name string, days []string) error {
	sorted, err := checkCalendar(name, days)
	if err != nil {
		return err
	}
	if _, err := s.store.SetCalendar(ctx, s.opts.App, name, sorted); err != nil {
		return fmt.Errorf("xtimer: set calendar %q: %w", name, err)
	}
	if err := s.eng.ReadCalendars(ctx); err != nil {
		// Stored: the tick reads it within a second.
		s.log.Warn("calendar stored but not read back here; the next tick reads it", "calendar", name, "err", err)
	}
	s.log.Info("calendar set", "calendar", name, "days", len(sorted))
	return nil
}

// Calendar returns the days of the app's calendar name, sorted; an
// unknown name is ErrCalendarNotFound.
func (s *Scheduler) Calendar(ctx context.Context, name string) ([]string, error) {
	c, err := s.store.Calendar(ctx, s.opts.App, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("%w: %q", ErrCalendarNotFound, name)
	case err != nil:
		return nil, fmt.Errorf("xtimer: read calendar %q: %w", name, err)
	}
	if c.Days == nil {
		return []string{}, nil
	}
	return c.Days, nil
}

// Calendars lists the names of the app's calendars, sorted.
func (s *Scheduler) Calendars(ctx context.Context) ([]string, error) {
	heads, err := s.store.CalendarHeads(ctx, s.opts.App)
	if err != nil {
		return nil, fmt.Errorf("xtimer: list calendars: %w", err)
	}
	names := make([]string, len(heads))
	for i, h := range heads {
		names[i] = h.Name
	}
	return names, nil
}

// checkHTTPExclusions validates the exclusions of an HTTP task, naming the
// field ("exclude[2]", "calendar"), and returns its days as the row keeps
// them.
func checkHTTPExclusions(t HTTPTask) (string, error) {
	sorted, bad := engine.NormalizeDays(t.Exclude)
	switch {
	case bad >= 0:
		return "", &FieldError{Task: t.Code, Field: fmt.Sprintf("exclude[%d]", bad), Value: t.Exclude[bad], Reason: dayReason}
	case len(sorted) > MaxExcludeDays:
		return "", &FieldError{Task: t.Code, Field: "exclude", Value: fmt.Sprintf("%d days", len(sorted)),
			Reason: fmt.Sprintf("at most %d days; put longer lists in a calendar", MaxExcludeDays)}
	case t.Calendar != "" && !validCalendarName(t.Calendar):
		return "", &FieldError{Task: t.Code, Field: "calendar", Value: t.Calendar, Reason: calendarNameReason}
	}
	return strings.Join(sorted, ","), nil
}
