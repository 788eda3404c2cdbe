package admin

import (
	"context"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

func TestDailyStacksEachDaysStatuses(t *testing.T) {
	t.Parallel()
	v := newDaily([]DayView{
		{Day: "2026-11-28", Counts: map[string]int64{store.StatusSucceeded: 60, store.StatusFailed: 20}},
		{Day: "2026-11-29", Counts: map[string]int64{}},
		{Day: "2026-11-30", Counts: map[string]int64{store.StatusSucceeded: 100, store.StatusSkipped: 1}},
	})
	require.Equal(t, int64(101), v.Max, "the busiest day is the top of the chart")
	require.Equal(t, "2026-11-28", v.From)
	require.Equal(t, "2026-11-30", v.To)
	require.Equal(t, []statusCount{{store.StatusSucceeded, 160}, {store.StatusFailed, 20}, {store.StatusSkipped, 1}}, v.Totals)
	require.Len(t, v.Columns, 3)

	// 1200 units for 3 days: 400 each, a column 392 wide in the middle.
	c := v.Columns[0]
	require.Equal(t, []int{4, 392}, []int{c.X, c.W})
	require.Equal(t, int64(80), c.Total)
	require.Equal(t, []dailySegment{
		{Y: 41, H: 59, Fill: "#2f9e44", Status: store.StatusSucceeded}, // 60/101 of 100, on the baseline
		{Y: 21, H: 20, Fill: "#e03131", Status: store.StatusFailed},    // stacked on it
	}, c.Segments)
	require.Equal(t, "2026-11-28 UTC · succeeded 60, failed 20", c.Title)

	c = v.Columns[1]
	require.Equal(t, 404, c.X)
	require.Empty(t, c.Segments)
	require.Equal(t, "2026-11-29 UTC · no executions", c.Title)

	// One skip among 100 successes stays visible, inside the chart.
	c = v.Columns[2]
	require.Equal(t, 804, c.X)
	require.Equal(t, []dailySegment{
		{Y: 1, H: 99, Fill: "#2f9e44", Status: store.StatusSucceeded},
		{Y: 0, H: 1, Fill: "#adb5bd", Status: store.StatusSkipped},
	}, c.Segments)

	empty := newDaily(nil)
	require.Empty(t, empty.Columns)
	require.Zero(t, empty.Max)
}

// The task page's daily chart counts a day whose executions the retention
// deleted from its roll-up, and today live.
func TestTaskPageDailyChartOutlivesRetention(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	ctx := context.Background()
	at := func(daysAgo, hour int) int64 {
		return time.Date(2026, 11, 30-daysAgo, hour, 0, 0, 0, time.UTC).UnixMilli()
	}
	insertExecutions(t, f,
		store.Execution{TaskCode: "always.fails", RunTime: at(3, 1), Status: store.StatusFailed},
		store.Execution{TaskCode: "always.fails", RunTime: at(3, 2), Status: store.StatusFailed},
		store.Execution{TaskCode: "always.fails", RunTime: at(3, 3), Status: store.StatusSucceeded},
		store.Execution{TaskCode: "always.fails", RunTime: at(0, 7), Status: store.StatusTimedOut},
		store.Execution{TaskCode: "always.fails", RunTime: at(0, 8), Status: store.StatusRunning}, // not final: not counted
	)
	st := f.Store
	n, err := st.RollupDay(ctx, f.S.App(), store.DayOf(at(3, 0)))
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	deleted, _, err := st.DeleteExecutionsBefore(ctx, f.S.App(), math.MinInt64, at(2, 0), 100)
	require.NoError(t, err)
	require.Equal(t, int64(3), deleted)

	p := pagesGet(t, f, "tasks/always.fails")
	require.Equal(t, http.StatusOK, p.Status)
	daily := pagesSection(t, p.Body, "daily", "</svg>")
	days := pagesAttrs(daily, `g class="day"`, "data-day")
	require.Len(t, days, 30)
	require.Equal(t, "2026-11-01", days[0])
	require.Equal(t, "2026-11-30", days[29])
	totals := pagesAttrs(daily, `g class="day"`, "data-total")
	require.Equal(t, "3", totals[26], "3 days ago, from the roll-up")
	require.Equal(t, "1", totals[29], "today, live")
	require.Equal(t, []string{"succeeded", "failed", "timed_out"}, pagesAttrs(daily, `rect class="bar"`, "data-bar-status"))
	require.Contains(t, daily, "<title>2026-11-27 UTC · succeeded 1, failed 2</title>")
	require.Contains(t, p.Body, "<span>busiest day 3</span>")
	require.NotContains(t, daily, "style=", "no inline style: the CSP refuses it")
}
