package admin

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
)

// Sharded and broadcast fires in the console (docs/architecture.md,
// "Sharded and broadcast fires"): such a fire is several rows, one per
// shard, but the listings show it as one line, with its outcome and the
// progress of its shards, and the execution page of any shard lists them
// all.
//
// Paging stays that of the rows (store.ListExecutions): a page is the
// rows after the cursor, and a sharded fire is shown once, at the first
// of its rows the listing selects (the filter may select only some of its
// shards), with a summary of all its shards. Further rows of the same
// fire on the page are left out, and so are the rows of a fire that a
// row at or before the cursor already showed (store.FiresListedBefore),
// which only a fire at the cursor's run time can have. So no fire is lost
// or shown twice however the page boundaries fall, but a page may hold
// fewer lines than its limit, even none while the next cursor is set.

// FireView is a sharded or broadcast fire as the listings show it, on the
// line of its first shard: its outcome and its shards by status.
type FireView struct {
	// Status is the fire's outcome, by fireOutcome's rule.
	Status string `json:"status"`
	// Shards is how many shard rows the fire has.
	Shards    int  `json:"shards"`
	Broadcast bool `json:"broadcast"`
	// Counts are the shards by status; Progress says the same in words,
	// "3/8 running, 4 succeeded, 1 failed".
	Counts   map[string]int `json:"counts"`
	Progress string         `json:"progress"`
	// StartedAt is the first shard's start; FinishedAt the last one's
	// finish once every shard is final, and DurationMs the time between.
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	DurationMs int64      `json:"duration_ms"`
}

// fireOutcome is the status of a sharded fire as a whole, from its shards
// by status (counts) and how many there are (n):
//
//   - scheduled while every shard is scheduled;
//   - running while any shard is scheduled, running or retrying and not
//     every shard is scheduled: the fire is under way;
//   - once every shard is final: failed when any shard failed (after its
//     retries, as a row is final only then), else timed_out when any
//     timed out, else succeeded when every shard succeeded, else skipped
//     when every shard was skipped;
//   - a mix of succeeded and skipped shards is succeeded for a broadcast
//     fire, whose shard is skipped by design when its replica is gone
//     before it starts, and skipped for a WithShards fire, whose skipped
//     shards' part of the work was not done (a pause between shards).
func fireOutcome(counts map[string]int, n int, broadcast bool) string {
	live := counts[store.StatusScheduled] + counts[store.StatusRunning] + counts[store.StatusRetrying]
	switch {
	case counts[store.StatusScheduled] == n:
		return store.StatusScheduled
	case live > 0:
		return store.StatusRunning
	case counts[store.StatusFailed] > 0:
		return store.StatusFailed
	case counts[store.StatusTimedOut] > 0:
		return store.StatusTimedOut
	case counts[store.StatusSucceeded] == n:
		return store.StatusSucceeded
	case broadcast && counts[store.StatusSucceeded] > 0:
		return store.StatusSucceeded
	}
	return store.StatusSkipped
}

// fireProgress writes counts as the listings show them: the statuses in
// the order of the filter's list, those in progress first, the first with
// the number of shards, "3/8 running, 4 succeeded, 1 failed".
func fireProgress(counts map[string]int, n int) string {
	order := []string{store.StatusRunning, store.StatusRetrying, store.StatusScheduled,
		store.StatusSucceeded, store.StatusFailed, store.StatusTimedOut, store.StatusSkipped}
	var parts []string
	for _, s := range order {
		k := counts[s]
		if k == 0 {
			continue
		}
		num := strconv.Itoa(k)
		if len(parts) == 0 {
			num += "/" + strconv.Itoa(n)
		}
		parts = append(parts, num+" "+strings.ReplaceAll(s, "_", " "))
	}
	return strings.Join(parts, ", ")
}

// fireSummaryView is the view of a fire's summary.
func fireSummaryView(s store.FireSummary) FireView {
	v := FireView{Status: fireOutcome(s.Counts, s.Rows, s.Broadcast), Shards: s.Rows, Broadcast: s.Broadcast,
		Counts: s.Counts, Progress: fireProgress(s.Counts, s.Rows), StartedAt: msTime(s.StartedMs)}
	if v.Status != store.StatusScheduled && v.Status != store.StatusRunning && s.FinishedMs > 0 {
		v.FinishedAt = msTime(s.FinishedMs)
		if s.StartedMs > 0 {
			v.DurationMs = s.FinishedMs - s.StartedMs
		}
	}
	return v
}

// summarize is the summary of a fire whose rows are all at hand.
func summarize(rows []store.Execution) store.FireSummary {
	s := store.FireSummary{Counts: map[string]int{}}
	for i, r := range rows {
		if i == 0 {
			s.FireKey = r.Fire()
		}
		s.Rows++
		s.Counts[r.Status]++
		s.Shards = max(s.Shards, r.Shards)
		s.Broadcast = s.Broadcast || r.Broadcast
		if r.StartedMs > 0 && (s.StartedMs == 0 || r.StartedMs < s.StartedMs) {
			s.StartedMs = r.StartedMs
		}
		s.FinishedMs = max(s.FinishedMs, r.FinishedMs)
	}
	return s
}

// executionLines turns a page of rows that ListExecutions(f) listed after
// the cursor after into the lines of a listing: a row each, but one line
// per sharded fire, as the comment at the top of this file says.
func (c *console) executionLines(ctx context.Context, f store.ExecutionFilter, after store.Cursor, rows []store.Execution, zone string) ([]ExecutionView, error) {
	var keys []store.FireKey
	var atCursor []string
	seen := map[store.FireKey]bool{}
	for _, r := range rows {
		k := r.Fire()
		if !r.Sharded() || seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
		if after != (store.Cursor{}) && r.RunTime == after.RunTime {
			atCursor = append(atCursor, r.TaskCode)
		}
	}
	out := make([]ExecutionView, 0, len(rows))
	if len(keys) == 0 {
		for _, r := range rows {
			out = append(out, executionView(r, zone, false))
		}
		return out, nil
	}
	shown, err := c.st.FiresListedBefore(ctx, f, after, atCursor)
	if err != nil {
		return nil, err
	}
	sums, err := c.st.FireSummaries(ctx, keys)
	if err != nil {
		return nil, err
	}
	done := map[store.FireKey]bool{}
	for _, r := range rows {
		v := executionView(r, zone, false)
		if r.Sharded() {
			k := r.Fire()
			if done[k] || (after != (store.Cursor{}) && k.RunTime == after.RunTime && shown[k.TaskCode]) {
				continue
			}
			done[k] = true
			sum, ok := sums[k]
			if !ok { // deleted since the page was read: the row is all there is
				sum = summarize([]store.Execution{r})
			}
			fv := fireSummaryView(sum)
			v.Fire = &fv
		}
		out = append(out, v)
	}
	return out, nil
}

// fireShardViews lists every shard of the fire of a sharded row, for its
// execution page and the API's execution; nil for an unsharded row.
func (c *console) fireShardViews(ctx context.Context, r store.Execution, zone string) ([]ExecutionView, *FireView, error) {
	if !r.Sharded() {
		return nil, nil, nil
	}
	rows, err := c.st.FireShards(ctx, r.Fire())
	if err != nil {
		return nil, nil, err
	}
	out := make([]ExecutionView, len(rows))
	for i, s := range rows {
		out[i] = executionView(s, zone, false)
	}
	fv := fireSummaryView(summarize(rows))
	return out, &fv, nil
}

// withLastFire gives the task's last execution, a shard, its fire f: the
// tasks list shows the fire's outcome, and the task is running while its
// fire is. A nil f changes nothing.
func (v *TaskView) withLastFire(f *FireView) {
	if f == nil || v.Last == nil {
		return
	}
	v.Last.Fire = f
	if f.Status == store.StatusRunning {
		v.State = StateRunning
	}
}

// Outcome is the status a line shows: the fire's outcome on a fire's line,
// the row's status otherwise.
func (v ExecutionView) Outcome() string {
	if v.Fire != nil {
		return v.Fire.Status
	}
	return v.Status
}
