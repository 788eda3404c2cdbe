package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/internal/store"
)

func TestParseDayTakesOnlyRealDatesWrittenYYYYMMDD(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int32{"2026-12-25": 20261225, "2028-02-29": 20280229, "0001-01-01": 10101, "9999-12-31": 99991231} {
		got, ok := ParseDay(s)
		require.True(t, ok, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "2026-13-01", "2026-02-29", "2026-1-05", "2026-01-5", " 2026-01-05", "2026-01-05 ",
		"2026/01/05", "20260105", "2026-01-05T00:00:00Z", "+2026-01-05", "２０２６-01-05"} {
		_, ok := ParseDay(s)
		require.False(t, ok, "%q", s)
	}
	sorted, bad := NormalizeDays([]string{"2026-12-25", "2026-01-01", "2026-12-25"})
	require.Equal(t, -1, bad)
	require.Equal(t, []string{"2026-01-01", "2026-12-25"}, sorted)
	_, bad = NormalizeDays([]string{"2026-12-25", "2026-12-32"})
	require.Equal(t, 1, bad)
}

// The excluding schedule skips whole days in the schedule's zone, a run
// of them at once, and a daylight-saving day like any other.
func TestExcludingScheduleSkipsWholeDaysInTheZone(t *testing.T) {
	t.Parallel()
	tokyo, santiago := mustZone(t, "Asia/Tokyo"), mustZone(t, "America/Santiago")
	minutely, err := cron.Parse("* * * * *", cron.In(tokyo))
	require.NoError(t, err)
	s := Excluding(minutely, DaysExcluder([]string{"2026-12-24", "2026-12-25"}, []string{"2026-12-26"}))
	next := s.Next(time.Date(2026, 12, 23, 23, 59, 0, 0, tokyo))
	require.Equal(t, time.Date(2026, 12, 27, 0, 0, 0, 0, tokyo), next, "three days skipped")
	require.Equal(t, time.Date(2026, 12, 27, 0, 1, 0, 0, tokyo), s.Next(next))
	require.Equal(t, minutely.String(), s.String())
	require.Equal(t, tokyo, s.Location())

	// Santiago's clocks skip from 00:00 to 01:00 on 2026-09-06: the day
	// after the excluded one starts at 01:00.
	daily, err := cron.Parse("30 1 * * *", cron.In(santiago))
	require.NoError(t, err)
	s = Excluding(daily, DaysExcluder([]string{"2026-09-05"}))
	got := s.Next(time.Date(2026, 9, 4, 12, 0, 0, 0, santiago))
	require.True(t, got.Equal(time.Date(2026, 9, 6, 1, 30, 0, 0, santiago)), "got %s", got)

	always := Excluding(daily, func(time.Time) bool { return true })
	require.True(t, always.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero(), "every day excluded: no fire")
	require.Nil(t, DaysExcluder(nil, []string{}), "nothing to exclude")
}

// Tasks defined alike share one exclusion; a task without any has none,
// and its calendar's days come and go with the calendar's versions.
func TestExclusionsAreSharedAndFollowTheirCalendar(t *testing.T) {
	t.Parallel()
	var b calendarBook
	require.Nil(t, b.exclusionLocked(&store.Definition{}))
	def := &store.Definition{ExcludeDays: "2026-12-25", Calendar: "holidays"}
	e := b.exclusionLocked(def)
	require.Same(t, e, b.exclusionLocked(&store.Definition{ExcludeDays: "2026-12-25", Calendar: "holidays", Spec: "other"}))
	christmas, boxing := time.Date(2026, 12, 25, 9, 0, 0, 0, time.UTC), time.Date(2026, 12, 26, 9, 0, 0, 0, time.UTC)
	require.True(t, e.excludes(christmas))
	require.False(t, e.excludes(boxing), "the calendar is missing: it excludes nothing")
	require.True(t, e.cal.missing())

	_, ok := e.cal.update(&calendarDays{version: 2, days: parseDaySet([]string{"2026-12-26"})})
	require.True(t, ok)
	require.True(t, e.excludes(boxing))
	_, ok = e.cal.update(&calendarDays{version: 1, days: nil})
	require.False(t, ok, "an older version does not replace a newer one")
	require.True(t, e.excludes(boxing))
}
