package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// SetCalendar creates a calendar at version 1 and replaces its days at
// the next version, bumping the app's task generation each time, so that
// every replica reads the calendars again at its next tick.
func TestSetCalendarReplacesTheDaysAndBumpsTheTaskGen(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		_, err := b.store.Calendar(b.ctx, b.app, "holidays")
		require.ErrorIs(t, err, store.ErrNotFound)

		c, err := b.store.SetCalendar(b.ctx, b.app, "holidays", []string{"2026-12-25", "2026-12-26"})
		require.NoError(t, err)
		require.Equal(t, store.Calendar{App: b.app, Name: "holidays", Days: store.Days{"2026-12-25", "2026-12-26"},
			UpdatedMs: t0, Version: 1}, c)
		require.Equal(t, int64(1), taskGen(t, b, b.app))

		b.set(t0 + 1000)
		c, err = b.store.SetCalendar(b.ctx, b.app, "holidays", []string{"2027-01-01"})
		require.NoError(t, err)
		require.Equal(t, store.Days{"2027-01-01"}, c.Days)
		require.Equal(t, int64(2), c.Version)
		require.Equal(t, t0+1000, c.UpdatedMs)
		require.Equal(t, int64(2), taskGen(t, b, b.app))

		_, err = b.store.SetCalendar(b.ctx, b.app, "empty", nil)
		require.NoError(t, err)
		got, err := b.store.Calendar(b.ctx, b.app, "empty")
		require.NoError(t, err)
		require.Empty(t, got.Days)

		heads, err := b.store.CalendarHeads(b.ctx, b.app)
		require.NoError(t, err)
		require.Equal(t, []store.CalendarHead{
			{Name: "empty", DayCount: 0, UpdatedMs: t0 + 1000, Version: 1},
			{Name: "holidays", DayCount: 1, UpdatedMs: t0 + 1000, Version: 2},
		}, heads)
		other, err := b.store.CalendarHeads(b.ctx, b.app+"x")
		require.NoError(t, err)
		require.Empty(t, other, "calendars belong to their app")
	})
}

// A calendar of MaxCalendarDays days, more than MySQL's TEXT holds, is
// stored and read back whole; one day more is refused.
func TestACalendarHoldsMaxCalendarDays(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		days := make([]string, store.MaxCalendarDays)
		for i := range days {
			days[i] = fmt.Sprintf("%04d-%02d-%02d", 2000+i/336, 1+i/28%12, 1+i%28)
		}
		_, err := b.store.SetCalendar(b.ctx, b.app, "long", days)
		require.NoError(t, err)
		got, err := b.store.Calendar(b.ctx, b.app, "long")
		require.NoError(t, err)
		require.Equal(t, store.Days(days), got.Days)
		heads, err := b.store.CalendarHeads(b.ctx, b.app)
		require.NoError(t, err)
		require.Equal(t, store.MaxCalendarDays, heads[0].DayCount)

		_, err = b.store.SetCalendar(b.ctx, b.app, "long", append(days, "2999-01-01"))
		require.ErrorContains(t, err, "at most 10000 days")
	})
}
