package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The task page's daily chart: one column per UTC day of the last
// dailyDays, today on the right, its height the day's final executions and
// its segments, stacked from the baseline, the statuses. The counts come
// from store.DailyCounts: the roll-ups of days the retention sweep rolled
// up (their executions may be gone), live counts for the others. Like
// chart.go it is inline SVG drawn by web/templates/task.html: no script,
// no style attribute, colours as fill attributes, text as HTML beside it.
//
// Days are UTC days, whatever the display zone: they are what the
// roll-ups count, and the caption says so.

// dailyDays is how many days the chart shows, today included.
const dailyDays = 30

// dailyStatuses are the final statuses, in stacking order from the
// baseline: the usual first, the rare on top where they show.
var dailyStatuses = []string{store.StatusSucceeded, store.StatusFailed, store.StatusTimedOut, store.StatusSkipped}

// DayView is one UTC day of a task's final executions.
type DayView struct {
	// Day is the UTC date, "2026-11-30".
	Day string `json:"day"`
	// Counts are the day's final executions by status; statuses with none
	// are absent.
	Counts map[string]int64 `json:"counts"`
}

// dailyViews returns the last dailyDays UTC days of a task up to now's,
// oldest first, every day present.
func (c *console) dailyViews(ctx context.Context, app, code string, now time.Time) ([]DayView, error) {
	today := store.DayOf(now.UnixMilli())
	rows, err := c.st.DailyCounts(ctx, app, code, today-dailyDays+1, today)
	if err != nil {
		return nil, err
	}
	out := make([]DayView, dailyDays)
	for i := range out {
		day := today - dailyDays + 1 + int64(i)
		out[i] = DayView{Day: time.UnixMilli(store.DayStartMs(day)).UTC().Format(time.DateOnly), Counts: map[string]int64{}}
	}
	for _, r := range rows {
		if i := r.Day - (today - dailyDays + 1); i >= 0 && i < dailyDays {
			out[i].Counts[r.Status] = r.Count
		}
	}
	return out, nil
}

// Daily chart geometry, in SVG user units; it stretches like chart.go's.
const (
	dailyWidth  = 1200
	dailyHeight = 100
	// dailyGap is the space between two days' columns.
	dailyGap = 8
	// dailyMinSegment keeps one failure visible on a day of thousands of
	// successes.
	dailyMinSegment = 2
)

// dailySegment is one status's part of a day's column.
type dailySegment struct {
	Y, H   int
	Fill   string
	Status string
}

// dailyColumn is one day.
type dailyColumn struct {
	X, W     int
	Day      string
	Total    int64
	Segments []dailySegment
	// Title is the tooltip: the date and the counts by status.
	Title string
}

// dailyView is what the template draws.
type dailyView struct {
	Width, Height int
	Columns       []dailyColumn
	// Max is the axis hint: the busiest day's executions, which the top
	// of the chart stands for; 0 when no day has any.
	Max  int64
	From string
	To   string
	// Totals are the executions of all the days by status, for the
	// caption; statuses with none are absent.
	Totals []statusCount
}

// newDaily lays out days, oldest first as dailyViews returns them.
func newDaily(days []DayView) dailyView {
	v := dailyView{Width: dailyWidth, Height: dailyHeight, Columns: []dailyColumn{}}
	if len(days) == 0 {
		return v
	}
	v.From, v.To = days[0].Day, days[len(days)-1].Day
	for _, d := range days {
		v.Max = max(v.Max, dayTotal(d))
	}
	for _, s := range dailyStatuses {
		var n int64
		for _, d := range days {
			n += d.Counts[s]
		}
		if n > 0 {
			v.Totals = append(v.Totals, statusCount{s, n})
		}
	}
	slot := float64(dailyWidth) / float64(len(days))
	w := max(1, int(slot)-dailyGap)
	for i, d := range days {
		col := dailyColumn{X: int(float64(i)*slot + (slot-float64(w))/2 + 0.5), W: w, Day: d.Day, Total: dayTotal(d), Segments: []dailySegment{}}
		parts := []string{}
		y := dailyHeight
		for _, s := range dailyStatuses {
			n := d.Counts[s]
			if n == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
			h := max(dailyMinSegment, int(float64(dailyHeight)*float64(n)/float64(v.Max)+0.5))
			h = min(h, y) // the minimum heights never push a column out of the top
			y -= h
			col.Segments = append(col.Segments, dailySegment{Y: y, H: h, Fill: statusColors[s], Status: s})
		}
		if len(parts) == 0 {
			parts = append(parts, "no executions")
		}
		col.Title = d.Day + " UTC · " + strings.Join(parts, ", ")
		v.Columns = append(v.Columns, col)
	}
	return v
}

func dayTotal(d DayView) int64 {
	var n int64
	for _, s := range dailyStatuses {
		n += d.Counts[s]
	}
	return n
}
