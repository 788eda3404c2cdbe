package store_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// day0 is the Unix day of t0 (2025-03-01).
var day0 = store.DayOf(t0)

// dayRows records, on day day0+d, n executions of task code with status,
// one a minute from 01:00.
func dayRows(b *bundle, d int64, code, status string, n int) []store.Execution {
	var rows []store.Execution
	for i := range n {
		rows = append(rows, store.Execution{App: b.app, TaskCode: code, Status: status,
			RunTime: store.DayStartMs(day0+d) + 3_600_000 + int64(i)*60_000 + int64(len(status))*1000})
	}
	return rows
}

// rollups returns every row of xtimer_rollups of the app, markers
// included, as "task day status count" with days relative to day0.
func rollups(t *testing.T, b *bundle) []store.Rollup {
	t.Helper()
	var got []store.Rollup
	require.NoError(t, b.db.Where("app = ?", b.app).Order("task_code, day, status").Find(&got).Error)
	for i := range got {
		got[i].App = ""
		got[i].Day -= day0
	}
	return got
}

func TestDayOfIsTheUTCDay(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(20148), day0, "2025-03-01 is day 20148")
	require.Equal(t, int64(20148), store.DayOf(store.DayStartMs(20149)-1))
	require.Equal(t, int64(0), store.DayOf(0))
	require.Equal(t, int64(-1), store.DayOf(-1), "floor before 1970")
}

func TestRollupDayCountsFinalExecutionsOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		var rows []store.Execution
		rows = append(rows, dayRows(b, -1, "a", store.StatusSucceeded, 3)...)
		rows = append(rows, dayRows(b, -1, "a", store.StatusFailed, 1)...)
		rows = append(rows, dayRows(b, -1, "b", store.StatusTimedOut, 2)...)
		rows = append(rows, dayRows(b, -1, "b", store.StatusSkipped, 1)...)
		rows = append(rows, dayRows(b, 0, "a", store.StatusSucceeded, 5)...)      // another day
		rows = append(rows, store.Execution{App: b.app + "-other", TaskCode: "a", // another app
			RunTime: store.DayStartMs(day0 - 1), Status: store.StatusSucceeded})
		require.NoError(t, b.db.Create(&rows).Error)

		n, err := b.store.RollupDay(b.ctx, b.app, day0-1)
		require.NoError(t, err)
		require.Equal(t, int64(7), n)
		want := []store.Rollup{
			{TaskCode: "", Day: -1, Status: "", Count: 7}, // the marker
			{TaskCode: "a", Day: -1, Status: store.StatusFailed, Count: 1},
			{TaskCode: "a", Day: -1, Status: store.StatusSucceeded, Count: 3},
			{TaskCode: "b", Day: -1, Status: store.StatusSkipped, Count: 1},
			{TaskCode: "b", Day: -1, Status: store.StatusTimedOut, Count: 2},
		}
		require.Equal(t, want, rollups(t, b))

		// Again, and again once the executions are gone: nothing changes.
		n, err = b.store.RollupDay(b.ctx, b.app, day0-1)
		require.NoError(t, err)
		require.Equal(t, int64(7), n)
		deleted, _, err := b.store.DeleteExecutionsBefore(b.ctx, b.app, math.MinInt64, store.DayStartMs(day0), 100)
		require.NoError(t, err)
		require.Equal(t, int64(7), deleted)
		n, err = b.store.RollupDay(b.ctx, b.app, day0-1)
		require.NoError(t, err)
		require.Equal(t, int64(7), n)
		require.Equal(t, want, rollups(t, b), "deleting a rolled-up day's executions does not count them again")

		days, err := b.store.RolledUpDays(b.ctx, b.app, day0-10, day0+10)
		require.NoError(t, err)
		require.Equal(t, []int64{day0 - 1}, days)
	})
}

func TestRollupDayWaitsForLiveExecutions(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := dayRows(b, -1, "a", store.StatusSucceeded, 2)
		rows = append(rows, dayRows(b, -1, "a", store.StatusRetrying, 1)...)
		require.NoError(t, b.db.Create(&rows).Error)

		_, err := b.store.RollupDay(b.ctx, b.app, day0-1)
		require.ErrorIs(t, err, store.ErrDayNotFinal)
		require.ErrorContains(t, err, "1 not final")
		require.Empty(t, rollups(t, b), "nothing is written for a day that is not final")

		require.NoError(t, b.db.Model(&store.Execution{}).Where("app = ? AND status = ?", b.app, store.StatusRetrying).
			Update("status", store.StatusFailed).Error)
		n, err := b.store.RollupDay(b.ctx, b.app, day0-1)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
	})
}

// Executions deleted before their day is rolled up are counted by the
// deletion, and the roll-up adds the rest: each is counted once.
func TestDeletingBeforeTheRollupCountsTheDeletedExecutions(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		var rows []store.Execution
		rows = append(rows, dayRows(b, -2, "a", store.StatusSucceeded, 6)...)
		rows = append(rows, dayRows(b, -2, "a", store.StatusFailed, 2)...)
		rows = append(rows, dayRows(b, -1, "a", store.StatusSucceeded, 4)...)
		rows = append(rows, dayRows(b, -1, "a", store.StatusRunning, 1)...)
		require.NoError(t, b.db.Create(&rows).Error)

		// The per-task cap keeps the 5 newest, all of day -1: the 8 final
		// executions of day -2 go, before day -2 is rolled up.
		n, err := b.store.DeleteBeyondCount(b.ctx, b.app, "a", 5, 100)
		require.NoError(t, err)
		require.Equal(t, int64(8), n)
		require.Equal(t, []store.Rollup{
			{TaskCode: "a", Day: -2, Status: store.StatusFailed, Count: 2},
			{TaskCode: "a", Day: -2, Status: store.StatusSucceeded, Count: 6},
		}, rollups(t, b))

		daily, err := b.store.DailyCounts(b.ctx, b.app, "a", day0-3, day0)
		require.NoError(t, err)
		require.Equal(t, []store.Rollup{
			{App: b.app, TaskCode: "a", Day: day0 - 2, Status: store.StatusFailed, Count: 2},
			{App: b.app, TaskCode: "a", Day: day0 - 2, Status: store.StatusSucceeded, Count: 6},
			{App: b.app, TaskCode: "a", Day: day0 - 1, Status: store.StatusSucceeded, Count: 4},
		}, daily, "deleted and live executions, final ones only")

		// Day -2 has no executions left: rolling it up adds none.
		c, err := b.store.RollupDay(b.ctx, b.app, day0-2)
		require.NoError(t, err)
		require.Zero(t, c)
		daily2, err := b.store.DailyCounts(b.ctx, b.app, "a", day0-3, day0)
		require.NoError(t, err)
		require.Equal(t, daily, daily2, "the roll-up changes no count")
	})
}

func TestDailyCountsReadsARolledUpDayFromTheRollupOnly(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		var rows []store.Execution
		rows = append(rows, dayRows(b, -1, "a", store.StatusSucceeded, 3)...)
		rows = append(rows, dayRows(b, 0, "a", store.StatusSkipped, 2)...)
		rows = append(rows, dayRows(b, 0, "a", store.StatusScheduled, 1)...)
		rows = append(rows, dayRows(b, 0, "b", store.StatusSucceeded, 1)...)
		require.NoError(t, b.db.Create(&rows).Error)
		_, err := b.store.RollupDay(b.ctx, b.app, day0-1)
		require.NoError(t, err)
		// Half of the rolled-up day's executions are deleted: the roll-up
		// still says 3, not 3 plus what is left.
		n, _, err := b.store.DeleteExecutionsBefore(b.ctx, b.app, math.MinInt64, store.DayStartMs(day0), 2)
		require.NoError(t, err)
		require.Equal(t, int64(2), n)

		daily, err := b.store.DailyCounts(b.ctx, b.app, "a", day0-1, day0)
		require.NoError(t, err)
		require.Equal(t, []store.Rollup{
			{App: b.app, TaskCode: "a", Day: day0 - 1, Status: store.StatusSucceeded, Count: 3},
			{App: b.app, TaskCode: "a", Day: day0, Status: store.StatusSkipped, Count: 2},
		}, daily)

		_, err = b.store.DailyCounts(b.ctx, b.app, "a", day0, day0-1)
		require.ErrorContains(t, err, "want at most 367 days, in order")
	})
}

func TestNextExecutionDaySkipsEmptyDays(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows := dayRows(b, -5, "a", store.StatusSucceeded, 1)
		rows = append(rows, dayRows(b, -1, "a", store.StatusRunning, 1)...)
		require.NoError(t, b.db.Create(&rows).Error)
		for _, c := range []struct {
			from, want int64
			ok         bool
		}{{-30, -5, true}, {-5, -5, true}, {-4, -1, true}, {0, 0, false}} {
			day, ok, err := b.store.NextExecutionDay(b.ctx, b.app, day0+c.from)
			require.NoError(t, err)
			require.Equal(t, c.ok, ok, "from %d", c.from)
			if ok {
				require.Equal(t, day0+c.want, day, "from %d", c.from)
			}
		}
	})
}
