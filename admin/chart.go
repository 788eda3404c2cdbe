package admin

import (
	"fmt"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The task page's chart of recent executions: one bar per execution,
// oldest on the left, its height proportional to the duration and its
// colour the status. It is inline SVG so that it needs no script, no
// library and nothing the page's Content-Security-Policy refuses. This
// file only lays the bars out; web/templates/task.html writes them, so
// every value in the SVG goes through html/template's escaping.
//
// The SVG stretches to its box (preserveAspectRatio="none"): the bars
// span the card's width at any screen size, and its text (the axis hint,
// "no executions yet") is HTML beside it, which a phone does not shrink.

// Chart geometry, in SVG user units.
const (
	chartWidth  = 1200
	chartHeight = 100
	// chartMaxBar keeps a few runs from becoming slabs; below it a bar
	// takes chartBarShare of its slot.
	chartMaxBar   = 48
	chartBarShare = 0.7
	// chartMinBar keeps a bar of a zero-length run (a skip, a run still
	// going) visible among longer ones.
	chartMinBar = 4
)

// statusColors are the bars' fills, the same hues as the badges of
// app.css: green done, red failed, blue running, amber waiting to retry,
// grey skipped or not started.
var statusColors = map[string]string{
	store.StatusSucceeded: "#2f9e44",
	store.StatusFailed:    "#e03131",
	store.StatusTimedOut:  "#c2255c",
	store.StatusRunning:   "#1c7ed6",
	store.StatusRetrying:  "#f08c00",
	store.StatusSkipped:   "#adb5bd",
	store.StatusScheduled: "#ced4da",
}

// chartBar is one execution's bar.
type chartBar struct {
	X, Y, W, H int
	Fill       string
	Status     string
	ID         int64
	// Title is the tooltip: id, status, duration and run time.
	Title string
}

// chartView is what the template draws.
type chartView struct {
	Width, Height int
	Bars          []chartBar
	// Max is the axis hint: the longest duration, which the top of the
	// chart stands for.
	Max string
	// Flat: every run took 0 ms, so heights say nothing. The bars are
	// drawn full height in a short strip that shows their statuses only.
	Flat bool
}

// newChart lays out recent executions, given newest first as TaskDetail
// has them, for display in loc.
func newChart(recent []ExecutionView, loc *time.Location) chartView {
	v := chartView{Width: chartWidth, Height: chartHeight, Bars: []chartBar{}}
	var longest int64
	for _, e := range recent {
		longest = max(longest, e.DurationMs)
	}
	v.Max, v.Flat = millis(longest), longest == 0
	if len(recent) == 0 {
		return v
	}
	slot := float64(chartWidth) / float64(len(recent))
	w := max(1, min(chartMaxBar, int(slot*chartBarShare)))
	for i := range recent {
		e := recent[len(recent)-1-i] // oldest first, left to right
		h := chartHeight
		if longest > 0 {
			h = max(chartMinBar, int(float64(chartHeight)*float64(e.DurationMs)/float64(longest)+0.5))
		}
		fill, ok := statusColors[e.Outcome()]
		if !ok {
			fill = statusColors[store.StatusScheduled]
		}
		v.Bars = append(v.Bars, chartBar{
			X: int(float64(i)*slot + (slot-float64(w))/2 + 0.5), Y: chartHeight - h, W: w, H: h,
			Fill: fill, Status: e.Outcome(), ID: e.ID,
			Title: fmt.Sprintf("#%d %s · %s · %s", e.ID, e.Outcome(), millis(e.DurationMs), e.RunTime.In(loc).Format(layoutDay)),
		})
	}
	return v
}
