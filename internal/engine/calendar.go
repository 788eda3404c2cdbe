package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"
	"time"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is the engine's side of exclusions (docs/architecture.md,
// "Exclusions"): the days a task's fires skip, its own (WithExclude,
// store.Task.ExcludeDays) and those of the app's calendar it names
// (WithCalendar, xtimer_calendars), read in the task's zone. A fire on
// such a day is recorded skipped, reason excluded (planner.appendRows); one
// recorded before its day was excluded is skipped at its start
// (dispatcher.dispatch). A task without exclusions has a nil
// taskState.excl and pays one nil check per fire.

// dayKey is a date as a number, 20261225 for 2026-12-25: cheap to
// compute from an instant and to compare.
type dayKey int32

// keyOf is the date of at, in at's location.
func keyOf(at time.Time) dayKey {
	y, m, d := at.Date()
	return dayKey(y*10000 + int(m)*100 + d) //nolint:gosec // G115: days are YYYY-MM-DD or a schedule's, before MaxYear
}

// ParseDay reads a date written YYYY-MM-DD, and nothing else: ok is false
// for "2026-13-01", "2026-02-30", "2026-1-05" or " 2026-01-05".
func ParseDay(s string) (key int32, ok bool) {
	if len(s) != len(time.DateOnly) {
		return 0, false
	}
	at, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0, false
	}
	return int32(keyOf(at)), true
}

// NormalizeDays returns days sorted and without repeats, or the index of
// the first that is not a date YYYY-MM-DD (bad is -1 when all are).
func NormalizeDays(days []string) (sorted []string, bad int) {
	for i, d := range days {
		if _, ok := ParseDay(d); !ok {
			return nil, i
		}
	}
	sorted = slices.Clone(days)
	slices.Sort(sorted) // YYYY-MM-DD sorts as text does
	return slices.Compact(sorted), -1
}

// daySet is a sorted set of days.
type daySet []dayKey

// parseDaySet reads stored days (validated when written); a day that does
// not parse is left out.
func parseDaySet(days []string) daySet {
	set := make(daySet, 0, len(days))
	for _, d := range days {
		if k, ok := ParseDay(d); ok {
			set = append(set, dayKey(k))
		}
	}
	slices.Sort(set)
	return slices.Compact(set)
}

func (s daySet) has(k dayKey) bool {
	_, found := slices.BinarySearch(s, k)
	return found
}

// exclusion is what a task's fires skip: its own days and its calendar's.
// Tasks defined alike share one (calendarBook.exclusionLocked).
type exclusion struct {
	days daySet
	cal  *calendarRef // nil when the task names no calendar
}

// excludes reports whether at, in the task's zone, falls on an excluded
// day.
func (e *exclusion) excludes(at time.Time) bool {
	k := keyOf(at)
	return e.days.has(k) || e.cal != nil && e.cal.has(k)
}

// calendarRef is one calendar of the app as this replica knows it. The
// view keeps one per name (calendarBook.refs) for as long as it runs, and
// the sync swaps its days, so that tasks point to it without a lock.
type calendarRef struct {
	name string
	days atomic.Pointer[calendarDays] // nil: the app has no calendar of that name
	// warned: this replica logged that the calendar is missing, since it
	// last was not.
	warned atomic.Bool
}

type calendarDays struct {
	version int64
	days    daySet
}

func (c *calendarRef) has(k dayKey) bool {
	d := c.days.Load()
	return d != nil && d.days.has(k)
}

func (c *calendarRef) missing() bool { return c.days.Load() == nil }

// calendarBook is the view's part for exclusions: the app's calendars and
// the exclusions of its tasks, guarded by view.mu, and when the calendars
// were last read (syncCalendars; the tick loop and Start only).
type calendarBook struct {
	refs       map[string]*calendarRef
	exclusions map[exclusionKey]*exclusion

	synced bool
	gen    int64
	at     time.Time
}

type exclusionKey struct{ days, calendar string }

// maxExclusions bounds calendarBook.exclusions as maxSharedDefs bounds
// view.defs.
const maxExclusions = 100_000

// refLocked returns the calendar of that name, known or not. view.mu is
// held.
func (b *calendarBook) refLocked(name string) *calendarRef {
	if b.refs == nil {
		b.refs = map[string]*calendarRef{}
	}
	c := b.refs[name]
	if c == nil {
		c = &calendarRef{name: name}
		b.refs[name] = c
	}
	return c
}

// exclusionLocked returns the exclusion of a task of definition def, nil
// when it excludes nothing. view.mu is held.
func (b *calendarBook) exclusionLocked(def *store.Definition) *exclusion {
	if def == nil || def.ExcludeDays == "" && def.Calendar == "" {
		return nil
	}
	k := exclusionKey{def.ExcludeDays, def.Calendar}
	if e := b.exclusions[k]; e != nil {
		return e
	}
	if b.exclusions == nil || len(b.exclusions) >= maxExclusions {
		b.exclusions = map[exclusionKey]*exclusion{}
	}
	e := &exclusion{days: parseDaySet(store.SplitDays(def.ExcludeDays))}
	if def.Calendar != "" {
		e.cal = b.refLocked(def.Calendar)
	}
	b.exclusions[k] = e
	return e
}

// excluded reports whether the fire of t at at falls on a day t excludes,
// in t's zone (the effective one, console overrides included). A manual
// run is never asked about.
func (t *taskState) excluded(at time.Time) bool {
	return t.excl != nil && t.excl.excludes(at.In(t.loc()))
}

// runSchedule is the schedule whose fires run: t's, less the excluded
// days. NextRuns, the console and the dead man's switch read it; planning
// reads t.sched(), without them, so that an excluded fire is recorded skipped.
func (t *taskState) runSchedule() cron.Schedule {
	if t.excl == nil || t.sched() == nil {
		return t.sched()
	}
	return Excluding(t.sched(), t.excl.excludes)
}

// Excluding is sched without the fires on which excludes, given the fire
// in sched's location, is true: Next skips them a day at a time.
func Excluding(sched cron.Schedule, excludes func(at time.Time) bool) cron.Schedule {
	return excludingSchedule{sched, excludes}
}

// DaysExcluder is the excludes of Excluding for lists of days
// (YYYY-MM-DD; those that do not parse are left out), nil when they are
// all empty.
func DaysExcluder(lists ...[]string) func(time.Time) bool {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return nil
	}
	set := parseDaySet(all)
	return func(at time.Time) bool { return set.has(keyOf(at)) }
}

type excludingSchedule struct {
	cron.Schedule
	excludes func(at time.Time) bool
}

// maxSkippedDays bounds Next's walk over excluded days: more than any
// task's own days and its calendar's together.
const maxSkippedDays = store.MaxCalendarDays + 1000

func (s excludingSchedule) Next(after time.Time) time.Time {
	loc := s.Location()
	next := s.Schedule.Next(after)
	for skipped := 0; !next.IsZero() && s.excludes(next.In(loc)); skipped++ {
		if skipped == maxSkippedDays {
			return time.Time{}
		}
		// The first fire from the next midnight: an excluded day's other
		// fires are excluded too.
		y, m, d := next.In(loc).Date()
		next = s.Schedule.Next(time.Date(y, m, d+1, 0, 0, 0, 0, loc).Add(-time.Nanosecond))
	}
	return next
}

// syncCalendars reads the app's calendars again when the task generation
// moved since it last did (every calendar write bumps it), and at least
// every fullSyncEvery. The tick loop (syncTasks) and Start only.
func (v *view) syncCalendars(ctx context.Context, gen int64, now time.Time) error {
	b := &v.calendars
	if b.synced && gen == b.gen && now.Sub(b.at) < fullSyncEvery {
		return nil
	}
	if err := v.readCalendars(ctx); err != nil {
		return err
	}
	b.synced, b.gen, b.at = true, gen, now
	return nil
}

// readCalendars reads the versions of the app's calendars, and whole the
// ones whose version changed. A reader slower than another keeps the
// newer days.
func (v *view) readCalendars(ctx context.Context) error {
	b := &v.calendars
	heads, err := v.store.CalendarHeads(ctx, v.app)
	if err != nil {
		return err
	}
	stored := make(map[string]int64, len(heads))
	for _, h := range heads {
		stored[h.Name] = h.Version
	}
	v.mu.Lock()
	var changed []*calendarRef
	for name, version := range stored {
		if c := b.refLocked(name); c.version() < version {
			changed = append(changed, c)
		}
	}
	for name, c := range b.refs {
		if _, ok := stored[name]; !ok && c.days.Swap(nil) != nil {
			v.log.Info("calendar gone; its tasks exclude no day of it", "calendar", name)
		}
	}
	v.mu.Unlock()
	for _, c := range changed {
		row, err := v.store.Calendar(ctx, v.app, c.name)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since: the next sync sees it gone
		}
		if err != nil {
			return err
		}
		if old, ok := c.update(&calendarDays{version: row.Version, days: parseDaySet(row.Days)}); ok && old != nil {
			v.log.Info("calendar changed; it applies to the fires not started yet", "calendar", c.name,
				"days", len(row.Days), "version", row.Version)
		}
	}
	return nil
}

// version is the version of the days known, 0 for none.
func (c *calendarRef) version() int64 {
	if d := c.days.Load(); d != nil {
		return d.version
	}
	return 0
}

// update puts d in place of older days; ok is false when the days known
// are as new already.
func (c *calendarRef) update(d *calendarDays) (old *calendarDays, ok bool) {
	for {
		old = c.days.Load()
		if old != nil && old.version >= d.version {
			return old, false
		}
		if c.days.CompareAndSwap(old, d) {
			c.warned.Store(false)
			return old, true
		}
	}
}

// noteMissingCalendar raises EventCalendarMissing when t names a calendar
// the app does not have: its fires run, no day of it excluded. The
// occurrence is the day of the fire, so that the alert comes once a day
// across the replicas, damped further by the AlertWindow.
func (p *planner) noteMissingCalendar(t *taskState, at time.Time) {
	c := t.excl.cal
	if c == nil || !c.missing() {
		return
	}
	if c.warned.CompareAndSwap(false, true) {
		p.log.Warn("task names a calendar the app does not have; no day of it is excluded", "task", t.code, "calendar", c.name)
	}
	day := at.In(t.loc()).Format(time.DateOnly)
	h := fnv.New32a()
	_, _ = h.Write([]byte(c.name))
	p.alerts.raise(Event{Kind: EventCalendarMissing, Task: t.code, At: p.clock.Now(), ScheduledAt: at.UTC(), Reason: c.name,
		Message: fmt.Sprintf("task %s: calendar %q does not exist in app %s; its fires run, no day of it excluded (create it with SetCalendar)",
			t.code, c.name, p.opts.App)},
		t.code, fmt.Sprintf("%s:%08x", day, h.Sum32()))
}

// ReadCalendars reads the app's calendars now, on this replica: after a
// SetCalendar here, so that it applies here at once.
func (s *Engine) ReadCalendars(ctx context.Context) error { return s.view.readCalendars(ctx) }
