package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/cron"
)

// firesAt, the check that keeps a fire of an old schedule from running,
// says yes to exactly the instants Next walks through: across daylight
// saving changes (cronie's rule for fixed-time specs, elapsed time for
// wildcard ones), in the Quartz dialect, and for @every.
func TestFiresAtAgreesWithNext(t *testing.T) {
	t.Parallel()
	newYork, london := mustZone(t, "America/New_York"), mustZone(t, "Europe/London")
	cases := []struct {
		spec string
		opts []cron.Option
		from time.Time
	}{
		{"30 2 * * *", []cron.Option{cron.In(newYork)}, time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC)},
		{"30 1 * * *", []cron.Option{cron.In(newYork)}, time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC)},
		{"*/15 * * * *", []cron.Option{cron.In(london)}, time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC)},
		{"*/15 * * * *", []cron.Option{cron.In(london)}, time.Date(2026, 10, 24, 0, 0, 0, 0, time.UTC)},
		{"0 30 1 ? * SUN", []cron.Option{cron.Quartz(), cron.In(london)}, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)},
		{"*/10 * * * * *", nil, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
		{"@every 90s", nil, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		sched, err := cron.Parse(c.spec, c.opts...)
		require.NoError(t, err, c.spec)
		task := &taskState{base: &taskBase{sched: sched}}
		prev := c.from
		for range 400 {
			at := sched.Next(prev)
			require.False(t, at.IsZero(), c.spec)
			require.True(t, task.firesAt(at), "%s: %s is a fire", c.spec, at)
			for _, d := range []time.Duration{-time.Second, -time.Millisecond, time.Millisecond, time.Second} {
				if other := at.Add(d); other.After(prev) && other.Before(sched.Next(at)) && !other.Equal(at) {
					require.False(t, task.firesAt(other), "%s: %s is not a fire", c.spec, other)
				}
			}
			prev = at
		}
	}
	require.False(t, (&taskState{}).firesAt(time.Now()), "a schedule that does not parse has no fires")
}
