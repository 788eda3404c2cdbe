package cron

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	robfigcron "github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}

// nextN returns n successive fires after from, formatted in the schedule's
// zone with its offset, so a table shows both the wall time and the instant.
func nextN(s Schedule, from time.Time, n int) []string {
	var out []string
	for range n {
		from = s.Next(from)
		if from.IsZero() {
			out = append(out, "none")
			break
		}
		out = append(out, from.Format(time.RFC3339))
	}
	return out
}

type nextCase struct {
	spec   string
	quartz bool
	zone   string
	from   string
	want   []string
}

func runNextCases(t *testing.T, cases []nextCase) {
	t.Helper()
	for _, c := range cases {
		name := c.spec + " in " + c.zone + " after " + c.from
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := []Option{In(mustZone(t, c.zone))}
			if c.quartz {
				opts = append(opts, Quartz())
			}
			s, err := Parse(c.spec, opts...)
			require.NoError(t, err)
			require.Equal(t, c.want, nextN(s, mustTime(t, c.from), len(c.want)))
		})
	}
}

func TestNextFieldsAndExtensions(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		// Steps across a year end.
		{"*/15 * * * *", false, "UTC", "2026-12-31T23:40:00Z", []string{"2026-12-31T23:45:00Z", "2027-01-01T00:00:00Z", "2027-01-01T00:15:00Z"}},
		{"*/20 * * * * *", false, "UTC", "2026-11-30T10:00:50Z", []string{"2026-11-30T10:01:00Z", "2026-11-30T10:01:20Z", "2026-11-30T10:01:40Z"}},
		{"10/15 * * * *", false, "UTC", "2026-11-30T10:00:00Z", []string{"2026-11-30T10:10:00Z", "2026-11-30T10:25:00Z", "2026-11-30T10:40:00Z", "2026-11-30T10:55:00Z", "2026-11-30T11:10:00Z"}},
		{"1-30/7 0 1 * *", false, "UTC", "2026-11-30T00:00:00Z", []string{"2026-12-01T00:01:00Z", "2026-12-01T00:08:00Z", "2026-12-01T00:15:00Z", "2026-12-01T00:22:00Z", "2026-12-01T00:29:00Z", "2027-01-01T00:01:00Z"}},
		// Strictly after, with sub-second input.
		{"* * * * * *", false, "UTC", "2026-11-30T10:00:00.5Z", []string{"2026-11-30T10:00:01Z", "2026-11-30T10:00:02Z"}},
		// Leap days and month ends.
		{"0 0 29 2 *", false, "UTC", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"0 0 L 2 *", false, "UTC", "2028-02-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"}},
		{"0 0 31 * *", false, "UTC", "2026-11-30T00:00:00Z", []string{"2026-12-31T00:00:00Z", "2027-01-31T00:00:00Z", "2027-03-31T00:00:00Z"}},
		{"0 0 L-2 * *", false, "UTC", "2026-02-01T00:00:00Z", []string{"2026-02-26T00:00:00Z", "2026-03-29T00:00:00Z"}},
		// LW: Jan 31 2026 is a Saturday, Feb 28 2026 a Saturday, May 31 2026 a Sunday.
		{"0 0 LW 1,2,5 *", false, "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-05-29T00:00:00Z"}},
		// W stays in the month: Aug 1 2026 is a Saturday (-> Monday 3rd), May 31 a Sunday (-> Friday 29th).
		{"0 0 1W 8 *", false, "UTC", "2026-01-01T00:00:00Z", []string{"2026-08-03T00:00:00Z"}},
		{"0 0 31W 5 *", false, "UTC", "2026-01-01T00:00:00Z", []string{"2026-05-29T00:00:00Z"}},
		{"0 0 15W * *", false, "UTC", "2026-11-01T00:00:00Z", []string{"2026-11-16T00:00:00Z", "2026-12-15T00:00:00Z"}},
		{"0 0 L-1W 11 *", false, "UTC", "2026-01-01T00:00:00Z", []string{"2026-11-30T00:00:00Z"}}, // Nov 29 2026 is a Sunday
		// Last and n-th weekdays.
		{"0 0 * * 5L", false, "UTC", "2026-11-01T00:00:00Z", []string{"2026-11-27T00:00:00Z", "2026-12-25T00:00:00Z"}},
		{"0 0 * * FRIL", false, "UTC", "2026-11-01T00:00:00Z", []string{"2026-11-27T00:00:00Z", "2026-12-25T00:00:00Z"}},
		{"0 0 * * MON#1", false, "UTC", "2026-11-30T00:00:00Z", []string{"2026-12-07T00:00:00Z", "2027-01-04T00:00:00Z"}},
		{"0 0 * * 6#5", false, "UTC", "2026-11-01T00:00:00Z", []string{"2027-01-30T00:00:00Z", "2027-05-29T00:00:00Z"}},
		// Day of week 7 and 0 are Sunday; names in any case.
		{"0 0 * * 7", false, "UTC", "2026-11-27T00:00:00Z", []string{"2026-11-29T00:00:00Z", "2026-12-06T00:00:00Z"}},
		{"0 0 * dec sun", false, "UTC", "2026-11-27T00:00:00Z", []string{"2026-12-06T00:00:00Z", "2026-12-13T00:00:00Z"}},
		{"0 0 * * 5-7", false, "UTC", "2026-11-27T00:00:00Z", []string{"2026-11-28T00:00:00Z", "2026-11-29T00:00:00Z", "2026-12-04T00:00:00Z"}},
		// Vixie: both day fields restricted, either matches; one "*", only the other counts.
		{"0 0 1 * MON", false, "UTC", "2026-11-27T00:00:00Z", []string{"2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z", "2026-12-07T00:00:00Z"}},
		{"0 0 ? * MON", false, "UTC", "2026-11-27T00:00:00Z", []string{"2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"}},
		{"0 0 1 * ?", false, "UTC", "2026-11-27T00:00:00Z", []string{"2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		// Descriptors.
		{"@weekly", false, "UTC", "2026-11-27T00:00:00Z", []string{"2026-11-29T00:00:00Z"}},
		{"@yearly", false, "UTC", "2026-11-27T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@hourly", false, "UTC", "2026-11-27T00:00:00Z", []string{"2026-11-27T01:00:00Z"}},
		{"@every 90s", false, "UTC", "2026-11-27T00:00:10Z", []string{"2026-11-27T00:01:30Z", "2026-11-27T00:03:00Z"}},
		// Quartz: 2-6 is Monday-Friday, L alone is Saturday, wrap-around ranges, years.
		{"0 0 12 ? * 2-6", true, "UTC", "2026-11-27T13:00:00Z", []string{"2026-11-30T12:00:00Z", "2026-12-01T12:00:00Z"}},
		{"0 0 0 ? * L", true, "UTC", "2026-11-27T00:00:00Z", []string{"2026-11-28T00:00:00Z", "2026-12-05T00:00:00Z"}},
		{"0 0 22-1 * * ?", true, "UTC", "2026-11-27T12:00:00Z", []string{"2026-11-27T22:00:00Z", "2026-11-27T23:00:00Z", "2026-11-28T00:00:00Z", "2026-11-28T01:00:00Z", "2026-11-28T22:00:00Z"}},
		{"0 0 0 ? * FRI-MON", true, "UTC", "2026-11-26T00:00:00Z", []string{"2026-11-27T00:00:00Z", "2026-11-28T00:00:00Z", "2026-11-29T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-04T00:00:00Z"}},
		{"0 0 0 1 1 ? 2027/2", true, "UTC", "2026-11-27T00:00:00Z", []string{"2027-01-01T00:00:00Z", "2029-01-01T00:00:00Z"}},
		{"0 0 0 1 1 ? 2020-2026", true, "UTC", "2026-11-27T00:00:00Z", []string{"none"}},
		{"0 15 10 ? * 6L", true, "UTC", "2026-11-01T00:00:00Z", []string{"2026-11-27T10:15:00Z"}},
		{"0 15 10 ? * 6#3", true, "UTC", "2026-11-01T00:00:00Z", []string{"2026-11-20T10:15:00Z", "2026-12-18T10:15:00Z"}},
		{"/20 0 0 1 * ?", true, "UTC", "2026-11-27T00:00:00Z", []string{"2026-12-01T00:00:00Z", "2026-12-01T00:00:20Z", "2026-12-01T00:00:40Z"}},
		// Rare and never.
		{"0 0 0 30 2 ?", true, "UTC", "2026-11-27T00:00:00Z", []string{"none"}},
		{"0 0 0 ? * 7#5 2199", true, "UTC", "2026-11-27T00:00:00Z", []string{"2199-03-30T00:00:00Z"}},
		{"0 0 0 ? * 7#5 2199", true, "UTC", "2199-12-01T00:00:00Z", []string{"none"}},
		// Sunday may end a range.
		{"0 0 * * MON-SUN", false, "UTC", "2026-11-27T00:00:00Z", []string{"2026-11-28T00:00:00Z", "2026-11-29T00:00:00Z", "2026-11-30T00:00:00Z"}},
		{"0 0 * * 5-0", false, "UTC", "2026-11-26T00:00:00Z", []string{"2026-11-27T00:00:00Z", "2026-11-28T00:00:00Z", "2026-11-29T00:00:00Z", "2026-12-04T00:00:00Z"}},
		// Past 2037 Go's ZoneBounds can end a zone period before the instant
		// on 31 December of leap years (golang/go#81583); Next must not stall.
		{"0 0 12 * * ?", true, "Europe/London", "2040-12-30T13:00:00Z", []string{"2040-12-31T12:00:00Z", "2041-01-01T12:00:00Z"}},
		{"0 0 0 1 1 ?", true, "America/New_York", "2043-06-01T00:00:00Z", []string{"2044-01-01T00:00:00-05:00", "2045-01-01T00:00:00-05:00", "2046-01-01T00:00:00-05:00"}},
		// Zones without daylight saving.
		{"0 0 9 * * *", false, "Asia/Shanghai", "2026-11-30T00:00:00Z", []string{"2026-11-30T09:00:00+08:00", "2026-12-01T09:00:00+08:00"}},
		{"CRON_TZ=Asia/Shanghai 0 8 * * *", false, "UTC", "2026-11-30T00:00:00Z", []string{"2026-12-01T08:00:00+08:00"}},
	})
}

// The daylight-saving rule of the package doc: fixed-time specs keep their
// wall time (gap: once at the first instant after it; repeat: the first
// occurrence); wildcard specs follow elapsed time.
func TestNextDaylightSaving(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		// New York, spring forward 2026-03-08 02:00 EST -> 03:00 EDT.
		{"0 30 2 * * *", false, "America/New_York", "2026-03-07T12:00:00Z", []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"0 0,30 2,3 * * *", false, "America/New_York", "2026-03-07T12:00:00Z", []string{"2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-09T02:00:00-04:00"}},
		{"0 0 12 ? * SUN", true, "America/New_York", "2026-03-07T12:00:00Z", []string{"2026-03-08T12:00:00-04:00"}},
		{"*/30 * * * *", false, "America/New_York", "2026-03-08T06:00:00Z", []string{"2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}},
		{"*/10 2 * * *", false, "America/New_York", "2026-03-08T06:00:00Z", []string{"2026-03-09T02:00:00-04:00"}},
		// New York, fall back 2026-11-01 02:00 EDT -> 01:00 EST.
		{"0 30 1 * * *", false, "America/New_York", "2026-10-31T12:00:00Z", []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"0 0 * * * *", false, "America/New_York", "2026-11-01T04:30:00Z", []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"0 30 1 * * *", false, "America/New_York", "2026-11-01T05:30:00Z", []string{"2026-11-02T01:30:00-05:00"}},
		{"0 30 1 ? * *", true, "America/New_York", "2026-11-01T05:45:00Z", []string{"2026-11-02T01:30:00-05:00"}},
		// London, spring forward 2026-03-29 01:00 GMT -> 02:00 BST; fall back 2026-10-25 02:00 BST -> 01:00 GMT.
		{"30 1 * * *", false, "Europe/London", "2026-03-28T12:00:00Z", []string{"2026-03-29T02:00:00+01:00", "2026-03-30T01:30:00+01:00"}},
		{"30 1 * * *", false, "Europe/London", "2026-10-24T12:00:00Z", []string{"2026-10-25T01:30:00+01:00", "2026-10-26T01:30:00Z"}},
		{"*/20 1 * * *", false, "Europe/London", "2026-10-24T23:50:00Z", []string{"2026-10-25T01:00:00+01:00", "2026-10-25T01:20:00+01:00", "2026-10-25T01:40:00+01:00", "2026-10-25T01:00:00Z", "2026-10-25T01:20:00Z", "2026-10-25T01:40:00Z", "2026-10-26T01:00:00Z"}},
		// Lord Howe moves by half an hour: forward 2026-10-04 02:00 -> 02:30, back 2026-04-05 02:00 -> 01:30.
		{"0 15 2 * * *", false, "Australia/Lord_Howe", "2026-10-03T00:00:00Z", []string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		{"0 45 1 * * *", false, "Australia/Lord_Howe", "2026-04-04T00:00:00Z", []string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
		{"0 */15 * * * *", false, "Australia/Lord_Howe", "2026-04-04T14:20:00Z", []string{"2026-04-05T01:30:00+11:00", "2026-04-05T01:45:00+11:00", "2026-04-05T01:30:00+10:30", "2026-04-05T01:45:00+10:30", "2026-04-05T02:00:00+10:30"}},
		// @every ignores the wall clock entirely.
		{"@every 1h", false, "America/New_York", "2026-11-01T04:30:00Z", []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00"}},
	})
}

func TestParseScheduleErrorsNameTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		spec   string
		quartz bool
		want   string
	}{
		{"60 * * * *", false, `minute field "60": value 60 out of range 0-59`},
		{"60 * * * * *", false, `second field "60": value 60 out of range 0-59`},
		{"0 24 * * *", false, `hour field "24": value 24 out of range 0-23`},
		{"0 0 32 * *", false, `day-of-month field "32": value 32 out of range 1-31`},
		{"0 0 0 * *", false, `day-of-month field "0": value 0 out of range 1-31`},
		{"0 0 * 13 *", false, `month field "13": value 13 out of range 1-12`},
		{"0 0 * * 8", false, `day-of-week field "8": value 8 out of range 0-7`},
		{"0 0 * FOO *", false, `month field "FOO": "FOO" is not a number or a three-letter name`},
		{"0 0 * * 1,,2", false, `day-of-week field "1,,2": empty item in list`},
		{"* * * *", false, `4 fields; want 5`},
		{"0 0 0 * * * 2027", false, `7 fields; want 5`},
		{"", false, `empty spec`},
		{"*/0 * * * *", false, `minute field "*/0": step 0 out of range 1-59`},
		{"*/x * * * *", false, `minute field "*/x": step "X" is not a number`},
		{"5-1 * * * *", false, `minute field "5-1": range start 5 is after its end 1`},
		{"? * * * *", false, `minute field "?": "?" is only allowed in day-of-month and day-of-week`},
		{"0 0 1,? * *", false, `day-of-month field "1,?": "?" must stand alone`},
		{"0 0 * * MON#6", false, `day-of-week field "MON#6": "6" after # must be a number 1-5`},
		{"0 0 L-31 * *", false, `day-of-month field "L-31": offset 31 from the last day must be 0-30`},
		{"0 0 32W * *", false, `day-of-month field "32W": W needs a single day 1-31`},
		{"0 0 1-5W * *", false, `day-of-month field "1-5W": W needs a single day 1-31`},
		{"0 0 * * L", false, `day-of-week field "L": "L" needs a day before it`},
		{"0 0 * L *", false, `month field "L": "L" is not a number or a three-letter name`},
		{"0 0 * * 15W", false, `day-of-week field "15W": "15W" is not a number or a three-letter name`},
		{"5L * * * *", false, `minute field "5L": "5L" is not a number`},
		{"0 0 -5 * *", false, `day-of-month field "-5": missing value`},
		{"TZ=", false, `time zone field "": empty zone name`},
		{"TZ= * * * * *", false, `time zone field "": empty zone name`},
		{"CRON_TZ=Mars/Base * * * * *", false, `time zone field "Mars/Base": unknown zone`},
		{"CRON_TZ=Local * * * * *", false, `time zone field "Local": the machine's local zone differs`},
		{"CRON_TZ=UTC", false, `nothing after the time-zone prefix CRON_TZ=UTC`},
		{"@every 500ms", false, `@every field "500ms": duration must be at least 1s`},
		{"@every 1.5s", false, `@every field "1.5s": duration must be a whole number of seconds`},
		{"@every", false, `@every field "": missing duration`},
		{"@every soon", false, `@every field "soon": not a Go duration`},
		{"@fortnightly", false, `descriptor field "@fortnightly": unknown descriptor`},
		// Quartz.
		{"0 0 12 * * 2-6", true, `quartz: day-of-month and day-of-week both set; one must be "?"`},
		{"0 0 12 ? * ?", true, `quartz: day-of-month and day-of-week are both "?"`},
		{"0 0 12 * *", true, `quartz: 5 fields; want 6`},
		{"0 0 0 1 1 ? 2027 x", true, `quartz: 8 fields; want 6`},
		{"0 0 0 ? * 0", true, `day-of-week field "0": value 0 out of range 1-7`},
		{"0 0 0 ? * 8", true, `day-of-week field "8": value 8 out of range 1-7`},
		{"0 0 0 1,L * ?", true, `day-of-month field "1,L": quartz: L and W cannot be combined`},
		{"0 0 0 ? * 1,6L", true, `day-of-week field "1,6L": quartz: L and # cannot be combined`},
		{"0 0 0 1 1 ? 1969", true, `year field "1969": value 1969 out of range 1970-2199`},
		{"0 0 0 1 1 ? 2200", true, `year field "2200": value 2200 out of range 1970-2199`},
		{"0 0 0 1 1 ? 2030-2020", true, `year field "2030-2020": range start 2030 is after its end 2020`},
		{"0 */60 * ? * *", true, `minute field "*/60": step 60 out of range 1-59`},
		{"@daily", true, `descriptor field "@daily": descriptors are not part of the Quartz dialect`},
		{"0 0 0 1 JAN/3 ?", true, `month field "JAN/3": quartz: a step after a name is ignored by Quartz`},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			t.Parallel()
			var opts []Option
			if c.quartz {
				opts = append(opts, Quartz())
			}
			s, err := Parse(c.spec, opts...)
			require.Nil(t, s)
			require.ErrorIs(t, err, ErrBadSpec)
			require.Contains(t, err.Error(), c.want)
			require.True(t, strings.HasPrefix(err.Error(), "xtimer: "), err.Error())
			var se *SpecError
			require.True(t, errors.As(err, &se))
			require.Equal(t, c.spec, se.Spec)
		})
	}
}

func TestParseScheduleOptions(t *testing.T) {
	t.Parallel()
	_, err := Parse("* * * * *", In(nil))
	require.ErrorContains(t, err, `location field "": time zone is nil`)
	_, err = Parse("* * * * *", In(time.Local))
	require.ErrorContains(t, err, `location field "Local": the machine's local zone`)
	_, err = Parse("* * * * *", WithDialect("vixie"))
	require.ErrorContains(t, err, `dialect field "vixie": unknown dialect`)

	// The spec's own zone wins over In.
	s, err := Parse("TZ=Asia/Shanghai 0 9 * * *", In(mustZone(t, "Europe/London")))
	require.NoError(t, err)
	require.Equal(t, "Asia/Shanghai", s.Location().String())
	require.Equal(t, "0 9 * * *", s.String())

	s, err = Parse("  0   9 *\t* mon-fri ")
	require.NoError(t, err)
	require.Equal(t, "0 9 * * MON-FRI", s.String())
	require.Equal(t, "UTC", s.Location().String())
	require.Equal(t, DialectCron, s.Dialect())
	// One separator each, but a tab; lower case only; written as String
	// writes it already.
	for spec, want := range map[string]string{"0\t9 * * *": "0 9 * * *", "0 9 * * mon": "0 9 * * MON", "5 0 9 * * MON,WED": "5 0 9 * * MON,WED"} {
		s, err = Parse(spec)
		require.NoError(t, err, spec)
		require.Equal(t, want, s.String(), spec)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		spec   string
		quartz bool
		want   string
	}{
		{"0 9 * * MON-FRI", false, "at 09:00 on Monday through Friday, UTC"},
		{"CRON_TZ=Asia/Shanghai 0 0 9 ? * MON-FRI", false, "at 09:00 on Monday through Friday, Asia/Shanghai"},
		{"0 0 12 ? * 2-6", true, "at 12:00 on Monday through Friday, UTC"},
		{"*/15 * * * *", false, "every 15 minutes, UTC"},
		{"*/10 * * * * *", false, "every 10 seconds, UTC"},
		{"0 * * * *", false, "at minute 0 of every hour, UTC"},
		{"* * * * *", false, "every minute, UTC"},
		{"30 2 1 * *", false, "at 02:30 on day 1 of the month, UTC"},
		{"0 0 1,15 * *", false, "at 00:00 on day 1, 15 of the month, UTC"},
		{"0 0 L * *", false, "at 00:00 on the last day of the month, UTC"},
		{"0 0 LW * *", false, "at 00:00 on the last weekday of the month, UTC"},
		{"0 0 15W * *", false, "at 00:00 on the weekday nearest day 15 of the month, UTC"},
		{"0 10 * * 5L", false, "at 10:00 on the last Friday of the month, UTC"},
		{"0 0 10 ? * 6#3", true, "at 10:00 on the third Friday of the month, UTC"},
		{"0 0 1 * MON", false, "at 00:00 on day 1 of the month or on Monday, UTC"},
		{"0 0 0 1 1,7 ? 2027", true, "at 00:00 on day 1 of the month in January, July in 2027, UTC"},
		{"0 9-17 * * *", false, "at minute 0 every hour from 9 through 17, UTC"},
		{"15 30 9 * * *", false, "at 09:30:15, UTC"},
		{"@every 90s", false, "every 1m30s (counted from 1970-01-01 00:00 UTC), UTC"},
		{"@daily", false, "at 00:00, UTC"},
		{"0 0 */3 * *", false, "at 00:00 on every 3rd from 1 through 31, UTC"},
	}
	for _, c := range cases {
		var opts []Option
		if c.quartz {
			opts = append(opts, Quartz())
		}
		s, err := Parse(c.spec, opts...)
		require.NoError(t, err, c.spec)
		require.Equal(t, c.want, s.Describe(), c.spec)
	}
}

// robfig/cron's parser, nobody's code here, must agree with ours on every spec
// both accept: the same bits for every field, and the same fires in UTC.
func TestParserAgreesWithRobfig(t *testing.T) {
	t.Parallel()
	robfig := robfigcron.NewParser(robfigcron.Second | robfigcron.Minute | robfigcron.Hour | robfigcron.Dom | robfigcron.Month | robfigcron.Dow)
	rng := rand.New(rand.NewPCG(2, 7))
	names := [][]string{nil, nil, nil, nil, {"JAN", "FEB", "MAR", "JUN", "DEC"}, {"SUN", "MON", "WED", "FRI", "SAT"}}
	bounds := [][2]int{{0, 59}, {0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 6}}
	item := func(k int) string {
		lo, hi := bounds[k][0], bounds[k][1]
		a := lo + rng.IntN(hi-lo+1)
		b := a + rng.IntN(hi-a+1)
		switch rng.IntN(8) {
		case 0:
			return "*"
		case 1:
			return fmt.Sprintf("*/%d", 1+rng.IntN(hi/2+1))
		case 2:
			return fmt.Sprintf("%d-%d", a, b)
		case 3:
			return fmt.Sprintf("%d-%d/%d", a, b, 1+rng.IntN(5))
		case 4:
			return fmt.Sprintf("%d/%d", a, 1+rng.IntN(hi/2+1))
		case 5:
			if names[k] != nil {
				return names[k][rng.IntN(len(names[k]))]
			}
		}
		return fmt.Sprint(a)
	}
	const specs = 3000
	from := mustTime(t, "2026-11-30T10:00:00Z")
	compared := 0
	for range specs {
		var fields []string
		for k := range 6 {
			f := item(k)
			if extra := item(k); rng.IntN(4) == 0 && !strings.Contains(f+extra, "*") {
				f += "," + extra
			}
			fields = append(fields, f)
		}
		spec := strings.Join(fields, " ")
		want, err := robfig.Parse(spec)
		if err != nil {
			continue // e.g. "/0"-like items robfig refuses; ours is tested elsewhere
		}
		compared++
		got, err := Parse(spec)
		require.NoError(t, err, spec)
		ws, gs := want.(*robfigcron.SpecSchedule), got.(*cronSchedule)
		const star = 1 << 63
		require.Equal(t, ws.Second&^star, gs.second, spec)
		require.Equal(t, ws.Minute&^star, gs.minute, spec)
		require.Equal(t, ws.Hour&^star, gs.hour, spec)
		require.Equal(t, ws.Month&^star, gs.month, spec)
		require.Equal(t, ws.Dom&star != 0, gs.domAny, spec)
		require.Equal(t, ws.Dow&star != 0, gs.dowAny, spec)
		if !gs.domAny {
			require.Equal(t, ws.Dom, gs.dom, spec)
		}
		if !gs.dowAny {
			require.Equal(t, ws.Dow, gs.dow, spec)
		}
		w, g := from, from
		for range 5 {
			w, g = want.Next(w), got.Next(g)
			require.Equal(t, w.UTC(), g.UTC(), spec)
			if w.IsZero() {
				break
			}
		}
	}
	t.Logf("robfig agreement: %d random specs compared of %d generated", compared, specs)
	require.Greater(t, compared, specs/2)
}

// Next is on the hot path of every tick: it must not allocate.
func TestNextDoesNotAllocate(t *testing.T) {
	for _, c := range []struct{ spec, zone string }{
		{"0 */5 * * * *", "UTC"},
		{"0 0 9 * * MON-FRI", "America/New_York"},
		{"0 0 L * *", "Asia/Shanghai"},
		{"@every 30s", "UTC"},
	} {
		s, err := Parse(c.spec, In(mustZone(t, c.zone)))
		require.NoError(t, err)
		at := mustTime(t, "2026-11-30T10:00:00Z")
		allocs := testing.AllocsPerRun(200, func() { at = s.Next(at) })
		require.Zero(t, allocs, c.spec)
	}
}

func TestCivilConversionsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, day := range []string{"0001-01-01", "1969-12-31", "1970-01-01", "2000-02-29", "2028-02-29", "2199-12-31"} {
		at, err := time.Parse("2006-01-02", day)
		require.NoError(t, err)
		y, m, d, h, mi, s := civilFromWall(at.Unix() + 3723)
		require.Equal(t, []int{at.Year(), int(at.Month()), at.Day(), 1, 2, 3}, []int{y, m, d, h, mi, s}, day)
		require.Equal(t, at.Unix()+3723, wallFromCivil(y, m, d, 1, 2, 3))
		require.Equal(t, int(at.Weekday()), weekday(y, m, d), day)
	}
}

func FuzzParseSchedule(f *testing.F) {
	for _, seed := range []string{
		"0 0 12 ? * 2-6", "*/15 * * * *", "0 0 L-3W * *", "0 0 * * 5L", "0 0 * * MON#2",
		"TZ=", "TZ=America/New_York 30 2 * * *", "@every 1h", "0 0 0 ? * 7#5 2199", "0 0 22-2 * * ?",
		"0 0 0 1W 1/2 ? 2027/3", "@daily", "0 0 0 L * ?", "1-5/0 * * * *",
	} {
		f.Add(seed, false, int64(1_796_000_000))
		f.Add(seed, true, int64(-1))
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, spec string, quartz bool, unix int64) {
		opts := []Option{In(ny)}
		if quartz {
			opts = append(opts, Quartz())
		}
		s, err := Parse(spec, opts...)
		if err != nil {
			if !errors.Is(err, ErrBadSpec) {
				t.Fatalf("error %v is not ErrBadSpec", err)
			}
			return
		}
		_ = s.Describe()
		again, err := Parse(s.String(), append(opts, In(s.Location()))...)
		if err != nil {
			t.Fatalf("String() %q does not parse again: %v", s.String(), err)
		}
		at := time.Unix(unix%(1<<36), 0)
		for range 3 {
			next := s.Next(at)
			if next.IsZero() {
				return
			}
			if !next.After(at) {
				t.Fatalf("%q: Next(%v) = %v, not after", spec, at, next)
			}
			if n2 := again.Next(at); !n2.Equal(next) {
				t.Fatalf("%q and its String %q disagree after %v: %v vs %v", spec, s.String(), at, next, n2)
			}
			at = next
		}
	})
}

func BenchmarkNext(b *testing.B) {
	for _, c := range []struct{ spec, zone string }{
		{"0 */5 * * * *", "UTC"},
		{"0 0 9 * * MON-FRI", "Asia/Shanghai"},
		{"0 30 2 * * *", "America/New_York"},
		{"0 0 0 L * *", "UTC"},
		{"0 0 0 ? * 7#5 2199", "UTC"},
	} {
		s, err := Parse(c.spec, In(mustZone(b, c.zone)))
		if err != nil {
			s, err = Parse(c.spec, In(mustZone(b, c.zone)), Quartz())
		}
		require.NoError(b, err)
		b.Run(c.spec+" "+c.zone, func(b *testing.B) {
			at := mustTime(b, "2026-11-30T10:00:00Z")
			b.ReportAllocs()
			for b.Loop() {
				if n := s.Next(at); !n.IsZero() {
					at = n
				} else {
					at = mustTime(b, "2026-11-30T10:00:00Z")
				}
			}
		})
	}
}

// BenchmarkParseDailySpecs parses specs that each fire once a day at
// their own second, as tasks that each have their own time do (a replica
// keeps one schedule per such spec), past Parse's cache: retained-B/spec
// is the heap a parsed schedule keeps alive, measured after a
// collection.
func BenchmarkParseDailySpecs(b *testing.B) {
	const n = 4096
	specs := make([]string, n)
	for i := range specs {
		sec := i * 86_400 / n
		specs[i] = fmt.Sprintf("%d %d %d * * *", sec%60, sec/60%60, sec/3600)
	}
	cfg := config{dialect: DialectCron, loc: time.UTC}
	kept := make([]Schedule, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s, err := parse(specs[i%n], cfg)
		if err != nil {
			b.Fatal(err)
		}
		kept[i%n] = s
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "retained-B/spec")
	runtime.KeepAlive(kept)
}

// BenchmarkNextMillionTasks computes the next fire of 1,000,000 registered
// schedules (a mix of specs and zones) per iteration: the work of a replica
// planning a minute for a very large fleet.
func BenchmarkNextMillionTasks(b *testing.B) {
	specs := []string{"0 */5 * * * *", "0 0 9 * * MON-FRI", "*/10 * * * * *", "0 30 2 * * *", "0 0 L * *", "0 15 10 * * 5L", "@every 30s", "0 0 * * *"}
	zones := []string{"UTC", "Asia/Shanghai", "America/New_York", "Europe/London"}
	locs := make([]*time.Location, len(zones))
	for i, z := range zones {
		locs[i] = mustZone(b, z)
	}
	scheds := make([]Schedule, 1_000_000)
	for i := range scheds {
		s, err := Parse(specs[i%len(specs)], In(locs[i/len(specs)%len(zones)]))
		require.NoError(b, err)
		scheds[i] = s
	}
	at := mustTime(b, "2026-11-30T10:00:00Z")
	b.ResetTimer()
	for b.Loop() {
		for _, s := range scheds {
			s.Next(at)
		}
	}
}

// A fixed-time fire in a spring-forward gap runs at the first instant after
// the gap from every starting point before it, including the last seconds
// before the gap, where the first candidate is the transition itself (the
// planner probes each minute from just before it).
func TestNextGapFireFromTheLastSecondsBeforeTheGap(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	s, err := Parse("30 2 * * *", In(ny))
	require.NoError(t, err)
	gapEnd := time.Date(2026, 3, 8, 3, 0, 0, 0, ny) // 02:00 EST jumps to 03:00 EDT
	for back := 3600 * time.Second; back > 0; back -= 7 * time.Second {
		require.True(t, gapEnd.Equal(s.Next(gapEnd.Add(-back))), "from %s", gapEnd.Add(-back))
	}
	for _, from := range []time.Time{gapEnd.Add(-time.Second), gapEnd.Add(-time.Nanosecond), gapEnd.Add(-time.Millisecond)} {
		require.True(t, gapEnd.Equal(s.Next(from)), "from %s", from)
	}
	require.Equal(t, time.Date(2026, 3, 9, 2, 30, 0, 0, ny), s.Next(gapEnd), "once: not again at the gap's end")
	every, err := Parse("*/30 * * * *", In(ny)) // wildcard: nothing in the gap
	require.NoError(t, err)
	require.Equal(t, gapEnd, every.Next(gapEnd.Add(-time.Nanosecond)))
	require.Equal(t, gapEnd.Add(30*time.Minute), every.Next(gapEnd))
}
