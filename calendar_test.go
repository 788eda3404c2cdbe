package xtimer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise checked here: a fire on a day its task excludes, its own
// (WithExclude) or its calendar's (WithCalendar), read in the task's zone,
// is recorded skipped with reason excluded and never runs; every other
// fire runs; a calendar changed at runtime on one replica applies on the
// others to the fires not started yet; manual runs are never excluded.

// days returns n distinct dates from 2027-01-01 on.
func days(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = time.Date(2027, 1, 1+i, 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
	}
	return out
}

func TestExclusionOptionsRefuseBadDaysAndNames(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, nil)
	noop := func(context.Context, *Run) error { return nil }
	for i, c := range []struct {
		opts    []TaskOption
		wantErr string // "" for none
	}{
		{[]TaskOption{WithExclude("2026-12-25", "2026-12-24", "2026-12-25")}, ""},
		{[]TaskOption{WithExclude()}, ""},
		{[]TaskOption{WithExclude(days(MaxExcludeDays)...)}, ""},
		{[]TaskOption{WithExclude(days(100)...), WithExclude(days(MaxExcludeDays)...)}, ""}, // the same days twice
		{[]TaskOption{WithExclude("2026-13-01")}, `WithExclude("2026-13-01"): want a date YYYY-MM-DD`},
		{[]TaskOption{WithExclude("2026-12-25", "2026-02-30")}, `WithExclude("2026-02-30"): want a date YYYY-MM-DD`},
		{[]TaskOption{WithExclude("2026-1-05")}, `WithExclude("2026-1-05"): want a date YYYY-MM-DD`},
		{[]TaskOption{WithExclude("")}, `WithExclude(""): want a date YYYY-MM-DD`},
		{[]TaskOption{WithExclude(" 2026-01-05")}, `WithExclude(" 2026-01-05"): want a date YYYY-MM-DD`},
		{[]TaskOption{WithExclude("2026-01-05T00:00:00Z")}, `WithExclude("2026-01-05T00:00:00Z"): want a date YYYY-MM-DD`},
		{[]TaskOption{WithExclude(days(MaxExcludeDays + 1)...)}, `WithExclude(181 days): at most 180 days fit the task's row; ` +
			`put longer lists in a calendar (WithCalendar, Scheduler.SetCalendar)`},
		{[]TaskOption{WithExclude(days(100)...), WithExclude(days(181)[100:]...)}, `WithExclude(181 days): at most 180 days`},
		{[]TaskOption{WithCalendar("holidays.fr")}, ""},
		{[]TaskOption{WithCalendar("holidays"), WithExclude("2026-12-24")}, ""},
		{[]TaskOption{WithCalendar("")}, `WithCalendar(""): want 1-64 lower-case letters, digits and . _ : - starting with a letter or digit`},
		{[]TaskOption{WithCalendar("Holidays")}, `WithCalendar("Holidays"): want 1-64 lower-case letters`},
		{[]TaskOption{WithCalendar(strings.Repeat("h", 65))}, `WithCalendar("` + strings.Repeat("h", 65) + `"): want 1-64`},
	} {
		code := fmt.Sprintf("task.%d", i)
		err := s.Register(code, "0 9 * * *", noop, c.opts...)
		if c.wantErr == "" {
			require.NoError(t, err, "case %d", i)
			continue
		}
		require.ErrorContains(t, err, `xtimer: task "`+code+`": `+c.wantErr, "case %d", i)
		var optErr *taskOptionError
		require.ErrorAs(t, err, &optErr, "case %d", i)
	}
}

func TestSetCalendarRefusesBadNamesAndDaysNamingThem(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, nil)
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		days    []string
		wantErr string
		field   string
	}{
		{"Holidays", nil, `xtimer: calendar "Holidays": name "Holidays": want 1-64 lower-case letters, digits and . _ : - starting with a letter or digit`, "name"},
		{"", nil, `xtimer: calendar "": name "": want 1-64`, "name"},
		{"holidays", []string{"2026-12-25", "2026-13-01"}, `xtimer: calendar "holidays": days[1] "2026-13-01": want a date YYYY-MM-DD`, "days[1]"},
		{"holidays", days(MaxCalendarDays + 1), `xtimer: calendar "holidays": days "10001 days": at most 10000 days; split them across calendars`, "days"},
	} {
		err := s.SetCalendar(ctx, c.name, c.days)
		require.ErrorContains(t, err, c.wantErr)
		var calErr *CalendarError
		require.ErrorAs(t, err, &calErr)
		require.Equal(t, c.field, calErr.Field)
	}
}

// NextRuns leaves out the days a task excludes, its own and its
// calendar's, each read in the task's zone: 2026-12-01 is excluded for a
// task in Tokyo at 09:00 there, which is still 2026-11-30 in UTC.
func TestNextRunsSkipExcludedDaysInTheTaskZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := fakeclock.New(mustTime(t, "2026-11-30T12:00:00Z"))
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, nil)
	noop := func(context.Context, *Run) error { return nil }
	tokyo := mustZone(t, "Asia/Tokyo")
	require.NoError(t, s.Register("daily.utc", "0 9 * * *", noop, WithExclude("2026-12-02"), WithCalendar("holidays")))
	require.NoError(t, s.Register("daily.tokyo", "0 9 * * *", noop, WithLocation(tokyo), WithExclude("2026-12-01")))
	require.NoError(t, s.Register("daily.missing", "0 9 * * *", noop, WithCalendar("nope")))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	require.NoError(t, s.SetCalendar(ctx, "holidays", []string{"2026-12-03", "2026-12-04"}))

	next, err := s.NextRuns("daily.utc", 3)
	require.NoError(t, err)
	require.Equal(t, []time.Time{mustTime(t, "2026-12-01T09:00:00Z"), mustTime(t, "2026-12-05T09:00:00Z"),
		mustTime(t, "2026-12-06T09:00:00Z")}, next)

	next, err = s.NextRuns("daily.tokyo", 2)
	require.NoError(t, err)
	require.Equal(t, "2026-12-02 09:00:00 +0900 JST", next[0].String(), "2026-12-01 in Tokyo is excluded")
	require.Equal(t, "2026-12-03 09:00:00 +0900 JST", next[1].String())

	next, err = s.NextRuns("daily.missing", 1)
	require.NoError(t, err)
	require.Equal(t, []time.Time{mustTime(t, "2026-12-01T09:00:00Z")}, next, "a missing calendar excludes nothing")

	got, err := s.Calendar(ctx, "holidays")
	require.NoError(t, err)
	require.Equal(t, []string{"2026-12-03", "2026-12-04"}, got)
	_, err = s.Calendar(ctx, "nope")
	require.ErrorIs(t, err, ErrCalendarNotFound)
	names, err := s.Calendars(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"holidays"}, names)

	row, err := s.store.Task(ctx, s.App(), "daily.utc")
	require.NoError(t, err)
	require.Equal(t, "2026-12-02", row.ExcludeDays)
	require.Equal(t, "holidays", row.Calendar)
	tasks, err := s.Tasks(ctx, TaskFilter{CodePrefix: "daily.utc"})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Equal(t, []string{"2026-12-02"}, tasks[0].Exclude)
	require.Equal(t, "holidays", tasks[0].Calendar)
}

// newCloseFleet is an editFleet started at 14:59:00.5 UTC on 2026-11-30,
// a minute before midnight in Tokyo.
func newCloseFleet(t *testing.T, db *gorm.DB) *editFleet {
	f := newEditFleet(t, db)
	f.clock = fakeclock.NewLockstep(mustTime(t, "2026-11-30T14:59:00.5Z"))
	f.locker = NewLocalLocker(f.clock)
	return f
}

// Two replicas run four tasks every 20 seconds across midnight in Tokyo
// (15:00 UTC), with a third replica, which runs none of them, editing
// their calendars at 14:59:55, after the fires of 15:00 were recorded:
//
//   - close.tokyo excludes 2026-12-01 in Tokyo: its fires from 15:00 UTC
//     are skipped; close.utc excludes the same day in UTC: all run;
//   - close.cal's calendar moves from 2026-11-30 to 2026-12-01: its fires
//     before 15:00 are skipped, and so is the one of 15:00, recorded
//     before the edit, at its start, by a replica that learned of the edit
//     from the database;
//   - open.cal's calendar moves from 2026-12-01 to none: its fires of the
//     minute of 15:00, recorded skipped before the edit, stay skipped (a
//     record is final); those recorded after it run.
func TestExcludedDaysAreSkippedAndCalendarEditsReachEveryReplica(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx, end := context.Background(), mustTime(t, "2026-11-30T15:01:00Z")
		tokyo := mustZone(t, "Asia/Tokyo")
		f := newCloseFleet(t, db)
		f.opts = map[string][]TaskOption{
			"close.tokyo": {WithLocation(tokyo), WithExclude("2026-12-01")},
			"close.utc":   {WithExclude("2026-12-01")},
			"close.cal":   {WithLocation(tokyo), WithCalendar("closures")},
			"open.cal":    {WithLocation(tokyo), WithCalendar("openings")},
		}
		specs := map[string]string{}
		for code := range f.opts {
			specs[code] = "*/20 * * * * *"
		}
		first := f.start(specs)
		require.NoError(t, first.SetCalendar(ctx, "closures", []string{"2026-11-30"}))
		require.NoError(t, first.SetCalendar(ctx, "openings", []string{"2026-12-01"}))
		f.start(specs)
		editor := f.start(nil)

		f.runUntil(mustTime(t, "2026-11-30T14:59:55.5Z")) // the tick that records 15:00:00, recordAhead before it
		midnight := mustTime(t, "2026-11-30T15:00:00Z")   // in Tokyo
		f.waitRows("close.cal", midnight, "14:59:20 skipped schedule excluded", "14:59:40 skipped schedule excluded",
			"15:00:00 scheduled schedule")
		f.waitRows("open.cal", midnight, "14:59:20 succeeded schedule", "14:59:40 succeeded schedule",
			"15:00:00 skipped schedule excluded")
		require.NoError(t, editor.SetCalendar(ctx, "closures", []string{"2026-12-01"}))
		require.NoError(t, editor.SetCalendar(ctx, "openings", nil))
		f.runUntil(end.Add(time.Second))

		ran := []string{"14:59:20 succeeded schedule", "14:59:40 succeeded schedule"}
		excluded := fireLines(midnight, end, 20*time.Second, "skipped schedule excluded")
		f.waitRows("close.tokyo", end, append(ran, excluded...)...)
		require.Equal(t, once(ran), f.callsOf("close.tokyo"))
		all := fireLines(mustTime(t, "2026-11-30T14:59:20Z"), end, 20*time.Second, "succeeded schedule")
		f.waitRows("close.utc", end, all...)
		require.Equal(t, once(all), f.callsOf("close.utc"))
		f.waitRows("close.cal", end, append([]string{"14:59:20 skipped schedule excluded", "14:59:40 skipped schedule excluded"}, excluded...)...)
		require.Empty(t, f.callsOf("close.cal"))
		// 15:00:00 was recorded before the edit, skipped: a record is
		// final. The fires after it were recorded after the edit.
		after := fireLines(midnight.Add(20*time.Second), end, 20*time.Second, "succeeded schedule")
		f.waitRows("open.cal", end, append(append(ran, excluded[0]), after...)...)
		require.Equal(t, once(append(ran, after...)), f.callsOf("open.cal"))
	})
}

// Manual runs are the operator's own: they run on an excluded day.
func TestManualRunIsNeverExcluded(t *testing.T) {
	t.Parallel()
	f := newEditFleet(t, testsvc.SQLite(t))
	f.opts = map[string][]TaskOption{"adhoc": {WithExclude("2026-11-30")}}
	s := f.start(map[string]string{"adhoc": "*/30 * * * * *"})
	f.runUntil(hms(0, 10))
	exec, err := s.Trigger(context.Background(), "adhoc")
	require.NoError(t, err)
	f.runUntil(hms(1, 1))
	f.waitRows("adhoc", hms(1, 0), "12:00:10 succeeded manual", "12:00:30 skipped schedule excluded",
		"12:01:00 skipped schedule excluded")
	require.Equal(t, map[string]int{"12:00:10": 1}, f.callsOf("adhoc"))
	require.Equal(t, SourceManual, exec.Source)
}

// A task naming a calendar its app does not have runs every fire, and one
// alert says so, however many fires and replicas see it; once the
// calendar exists, its days are excluded.
func TestMissingCalendarAlertsOnceAndExcludesNothing(t *testing.T) {
	t.Parallel()
	f, log := alertFleet(t, func(o *Options) { o.AlertMissedRuns = -1 })
	f.opts = map[string][]TaskOption{"orphan": {WithCalendar("nope")}}
	s := f.start(map[string]string{"orphan": "*/10 * * * * *"})
	f.start(map[string]string{"orphan": "*/10 * * * * *"})
	f.runUntil(hms(2, 5))
	all := fireLines(hms(0, 10), hms(2, 0), 10*time.Second, "succeeded schedule")
	f.waitRows("orphan", hms(2, 0), all...)
	got := waitAlerts(log, EventCalendarMissing, "orphan", func(got []receivedAlert) bool { return len(got) > 0 })
	require.Len(t, got, 1, "alerts: %s", describeAlerts(got))
	require.Equal(t, "nope", got[0].Reason)
	require.Contains(t, got[0].Message, `calendar "nope" does not exist`)
	require.Equal(t, hms(0, 10), got[0].ScheduledAt)

	require.NoError(t, s.SetCalendar(context.Background(), "nope", []string{"2026-11-30"}))
	f.runUntil(hms(3, 5))
	f.waitRows("orphan", hms(3, 0), append(all[:len(all):len(all)],
		fireLines(hms(2, 10), hms(3, 0), 10*time.Second, "skipped schedule excluded")...)...)
	require.Len(t, log.of(EventCalendarMissing, "orphan"), 1, "no alert once the calendar exists")
}

// Fires on excluded days are not missed runs: a task whose last fires
// were excluded is not reported silent.
func TestExcludedFiresDoNotTripTheDeadMansSwitch(t *testing.T) {
	t.Parallel()
	f, log := alertFleet(t, nil)
	f.opts = map[string][]TaskOption{"holiday": {WithCalendar("off")}}
	s := f.start(map[string]string{"holiday": "*/10 * * * * *"})
	f.runUntil(hms(0, 35))
	require.NoError(t, s.SetCalendar(context.Background(), "off", []string{"2026-11-30"}))
	f.runUntil(hms(4, 0))
	f.waitRows("holiday", hms(0, 30), fireLines(hms(0, 10), hms(0, 30), 10*time.Second, "succeeded schedule")...)
	require.Empty(t, log.of(EventSilent, "holiday"))
	require.Empty(t, log.of(EventSkipped, "holiday"), "excluded fires alert nobody")
}

// An HTTP callback task keeps its exclusions as a Go task does, validated
// with the field named, and its next runs leave them out.
func TestHTTPTaskExclusionsAreValidatedStoredAndApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := fakeclock.New(mustTime(t, "2026-11-30T12:00:00Z"))
	s := startHTTP(t, func(o *Options) { o.Clock = clock })
	task := HTTPTask{Code: "cb.daily", Spec: "0 9 * * *", Zone: "Asia/Tokyo",
		Target:  HTTPTarget{Method: "GET", URL: "http://127.0.0.1:9/"},
		Exclude: []string{"2026-12-02", "2026-12-01", "2026-12-02"}, Calendar: "holidays"}
	for _, c := range []struct {
		field string
		mod   func(*HTTPTask)
	}{
		{"exclude[1]", func(t *HTTPTask) { t.Exclude = []string{"2026-12-01", "12/25/2026"} }},
		{"exclude", func(t *HTTPTask) { t.Exclude = days(MaxExcludeDays + 1) }},
		{"calendar", func(t *HTTPTask) { t.Calendar = "Holidays" }},
	} {
		bad := task
		c.mod(&bad)
		var fe *FieldError
		require.ErrorAs(t, s.CreateHTTPTask(ctx, bad), &fe, c.field)
		require.Equal(t, c.field, fe.Field)
	}
	require.NoError(t, s.CreateHTTPTask(ctx, task))
	got, err := s.HTTPTask(ctx, "cb.daily")
	require.NoError(t, err)
	require.Equal(t, []string{"2026-12-01", "2026-12-02"}, got.Exclude, "sorted, without repeats")
	require.Equal(t, "holidays", got.Calendar)
	require.NoError(t, s.SetCalendar(ctx, "holidays", []string{"2026-12-03"}))
	next, err := s.NextRuns("cb.daily", 1)
	require.NoError(t, err)
	require.Equal(t, "2026-12-04 09:00:00 +0900 JST", next[0].String())

	got.Exclude, got.Calendar = nil, ""
	require.NoError(t, s.UpdateHTTPTask(ctx, got))
	got, err = s.HTTPTask(ctx, "cb.daily")
	require.NoError(t, err)
	require.Empty(t, got.Exclude)
	require.Empty(t, got.Calendar)
	next, err = s.NextRuns("cb.daily", 1)
	require.NoError(t, err)
	require.Equal(t, "2026-12-01 09:00:00 +0900 JST", next[0].String())
}
