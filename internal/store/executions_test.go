package store_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// fires returns one scheduled fire per run time, all of one task.
func fires(app, code string, runTimes ...int64) []store.Execution {
	out := make([]store.Execution, len(runTimes))
	for i, rt := range runTimes {
		out[i] = store.Execution{App: app, TaskCode: code, RunTime: rt, MaxAttempts: 3}
	}
	return out
}

// insertOne records one fire and returns its row.
func insertOne(t *testing.T, b *bundle, code string, runTime int64) store.Execution {
	t.Helper()
	got, err := b.store.InsertFires(b.ctx, fires(b.app, code, runTime))
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

func TestInsertFiresReturnsOnlyTheRowsItInserted(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		first, err := b.store.InsertFires(b.ctx, fires(b.app, "a", t0, t0+1000, t0+2000))
		require.NoError(t, err)
		require.Len(t, first, 3)
		for i, e := range first {
			require.NotZero(t, e.ID)
			require.Equal(t, t0+int64(i)*1000, e.RunTime)
			require.Equal(t, store.StatusScheduled, e.Status)
			require.Equal(t, store.SourceSchedule, e.Source)
			require.Equal(t, 0, e.Attempt)
			require.Equal(t, 3, e.MaxAttempts)
			require.Equal(t, t0, e.ScheduledMs)
			require.Len(t, e.Claim, 32)
		}

		second, err := b.store.InsertFires(b.ctx, fires(b.app, "a", t0+2000, t0+1000, t0+3000, t0+3000))
		require.NoError(t, err)
		require.Len(t, second, 1)
		require.Equal(t, t0+3000, second[0].RunTime)
		require.NotEqual(t, first[0].Claim, second[0].Claim)

		again, err := b.store.Execution(b.ctx, first[1].ID)
		require.NoError(t, err)
		require.Equal(t, first[1].Claim, again.Claim, "a conflicting insert must not touch the existing row")
	})
}

// A task code travels in the statement's document of fires (JSON on
// MySQL, MariaDB and SQLite, an array on PostgreSQL) and comes back in
// what the database answers: any code arrives as it is, and is known
// again as one this call inserted. Of two rows of one fire in a call,
// the first is recorded.
func TestInsertFiresKeepsEveryCharacterOfTaskCodes(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		codes := []string{`say "hi"`, `C:\reports\daily`, `\`, `"`, `a\"b`, `<&>`, "tab\there", "line\nbreak",
			"bell\x07", `café, 日本`, "🙂", `{a,b}`, `NULL`, `[1,2]`, "plain.code-1"}
		var batch []store.Execution
		for i, code := range codes {
			batch = append(batch, fires(b.app, code, t0+int64(i)*1000)...)
		}
		first := batch[3]
		twice := first
		twice.MaxAttempts = 7
		batch = append(batch, twice)
		got, err := b.store.InsertFires(b.ctx, batch)
		require.NoError(t, err)
		require.Len(t, got, len(codes))
		for _, e := range got {
			require.NotZero(t, e.ID, e.TaskCode)
			stored, readErr := b.store.Execution(b.ctx, e.ID)
			require.NoError(t, readErr)
			require.Equal(t, e.TaskCode, stored.TaskCode)
			require.Equal(t, e.RunTime, stored.RunTime, e.TaskCode)
			require.Equal(t, t0+int64(slices.Index(codes, e.TaskCode))*1000, e.RunTime, e.TaskCode)
			if e.TaskCode == first.TaskCode {
				require.Equal(t, 3, stored.MaxAttempts, "the first row of a fire is the one recorded")
			}
		}

		again, err := b.store.InsertFires(b.ctx, batch)
		require.NoError(t, err)
		require.Empty(t, again, "every fire was there")
	})
}

func TestConcurrentInsertFiresReportEveryFireExactlyOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		// Four replicas insert overlapping windows of 3 tasks x 400 seconds;
		// each call is 1,200 rows, more than one INSERT chunk.
		const callers, window, step = 4, 400, 100
		results := make([][]store.Execution, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for c := range callers {
			var batch []store.Execution
			for s := c * step; s < c*step+window; s++ {
				for _, code := range []string{"a", "b", "c"} {
					batch = append(batch, store.Execution{App: b.app, TaskCode: code, RunTime: t0 + int64(s)*1000})
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[c], errs[c] = b.store.InsertFires(b.ctx, batch)
			}()
		}
		wg.Wait()

		reported := map[string]int64{}
		for c := range callers {
			require.NoError(t, errs[c])
			for _, e := range results[c] {
				key := fmt.Sprintf("%s@%d", e.TaskCode, e.RunTime)
				_, twice := reported[key]
				require.False(t, twice, "fire %s reported by two calls", key)
				reported[key] = e.ID
			}
		}
		want := 3 * ((callers-1)*step + window)
		var rows []store.Execution
		require.NoError(t, b.db.Where("app = ?", b.app).Find(&rows).Error)
		require.Equal(t, want, len(rows), "rows in the table")
		var unreported []string
		for _, r := range rows {
			key := fmt.Sprintf("%s@%d", r.TaskCode, r.RunTime)
			if reported[key] != r.ID {
				unreported = append(unreported, fmt.Sprintf("%s id %d (reported id %d)", key, r.ID, reported[key]))
			}
		}
		require.Empty(t, unreported, "rows no call reported, or reported with another id")
		require.Equal(t, want, len(reported), "fires reported")
	})
}

// A call of more fires than one statement takes, over more tasks than one
// read-back takes, of two shapes (fires to run, and misfires recorded
// skipped, owned by another replica), some already recorded: it returns
// exactly the fires it inserted, each equal to its row as stored.
func TestInsertFiresOfManyTasksReturnsTheRowsAsStored(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		b.set(t0 - 5000)
		var batch []store.Execution
		for task := range 600 {
			for sec := range 20 {
				f := store.Execution{App: b.app, TaskCode: fmt.Sprintf("t%03d", task), RunTime: t0 + int64(sec)*1000,
					MaxAttempts: task%3 + 1, Replica: "r2"}
				if (task+sec)%7 == 0 {
					f.Status, f.Reason, f.Replica = store.StatusSkipped, store.ReasonMisfire, "r1"
				}
				batch = append(batch, f)
			}
		}
		before, err := b.store.InsertFires(b.ctx, batch[:1000:1000])
		require.NoError(t, err)
		require.Len(t, before, 1000)

		got, err := b.store.InsertFires(b.ctx, batch)
		require.NoError(t, err)
		require.Len(t, got, len(batch)-1000, "the fires not recorded before")
		var stored []store.Execution
		require.NoError(t, b.db.Where("app = ?", b.app).Find(&stored).Error)
		require.Len(t, stored, len(batch))
		byID := map[int64]store.Execution{}
		for _, r := range stored {
			byID[r.ID] = r
		}
		for _, r := range before {
			delete(byID, r.ID)
		}
		for i, r := range got {
			require.Equal(t, byID[r.ID], r, "fire %d returned", i)
			delete(byID, r.ID)
		}
		require.Empty(t, byID, "rows inserted and not returned")
	})
}

func TestInsertFiresRejectsBadRowsWithoutInsertingAny(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		batch := fires(b.app, "a", t0, t0+1000)
		batch[1].Status = store.StatusRunning
		_, err := b.store.InsertFires(b.ctx, batch)
		require.EqualError(t, err, fmt.Sprintf(`store: insert fires: row 1 (a at %d) status "running": want "scheduled" or "skipped"`, t0+1000))

		batch = fires(b.app, "a", t0, t0+1000)
		batch[1].App = "other"
		_, err = b.store.InsertFires(b.ctx, batch)
		require.EqualError(t, err, fmt.Sprintf(`store: insert fires: row 1 app "other" differs from row 0 app %q`, b.app))

		var n int64
		require.NoError(t, b.db.Model(&store.Execution{}).Count(&n).Error)
		require.Zero(t, n)
	})
}

func TestInsertFiresRecordsSkippedMisfires(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		got, err := b.store.InsertFires(b.ctx, []store.Execution{{
			App: b.app, TaskCode: "a", RunTime: t0 - 60000, Status: store.StatusSkipped,
			Reason: store.ReasonMisfire, Source: store.SourceCatchup,
		}})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, store.StatusSkipped, got[0].Status)
		require.Equal(t, store.ReasonMisfire, got[0].Reason)
		require.Equal(t, store.SourceCatchup, got[0].Source)
		require.Equal(t, t0, got[0].FinishedMs)
	})
}

func TestOnlyOneReplicaStartsAFire(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		e := insertOne(t, b, "a", t0)
		const racers = 8
		won := make([]bool, racers)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				won[i], errs[i] = b.store.StartAttempt(b.ctx, e.ID, 1, fmt.Sprintf("r%d", i), t0+7)
			}()
		}
		wg.Wait()
		winners := 0
		winner := ""
		for i := range racers {
			require.NoError(t, errs[i])
			if won[i] {
				winners++
				winner = fmt.Sprintf("r%d", i)
			}
		}
		require.Equal(t, 1, winners)

		got, err := b.store.Execution(b.ctx, e.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusRunning, got.Status)
		require.Equal(t, 1, got.Attempt)
		require.Equal(t, winner, got.Replica)
		require.Equal(t, t0+7, got.StartedMs)
		require.Equal(t, int64(7), got.LatenessMs)
	})
}

func TestFailedAttemptRetriesOnAnyReplicaThenSucceeds(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		e := insertOne(t, b, "a", t0)
		ok, err := b.store.StartAttempt(b.ctx, e.ID, 1, "r1", t0+5)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.FinishAttempt(b.ctx, e.ID, 1, store.Result{
			Status: store.StatusRetrying, Error: "boom", FinishedMs: t0 + 205, NextAttemptMs: t0 + 2000,
		})
		require.NoError(t, err)
		require.True(t, ok)

		due, err := b.store.DueRetries(b.ctx, b.app, t0+1999, 10)
		require.NoError(t, err)
		require.Empty(t, due)
		due, err = b.store.DueRetries(b.ctx, b.app, t0+2000, 10)
		require.NoError(t, err)
		require.Len(t, due, 1)
		require.Equal(t, e.ID, due[0].ID)
		require.Equal(t, 1, due[0].Attempt)
		require.Equal(t, "boom", due[0].Error)
		require.Equal(t, int64(200), due[0].DurationMs)

		// A replica that read the row before attempt 2 started loses.
		ok, err = b.store.StartAttempt(b.ctx, e.ID, 2, "r2", t0+2010)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.StartAttempt(b.ctx, e.ID, 2, "r3", t0+2011)
		require.NoError(t, err)
		require.False(t, ok)
		// The late result of attempt 1 is ignored.
		ok, err = b.store.FinishAttempt(b.ctx, e.ID, 1, store.Result{Status: store.StatusSucceeded, FinishedMs: t0 + 2020})
		require.NoError(t, err)
		require.False(t, ok)

		ok, err = b.store.FinishAttempt(b.ctx, e.ID, 2, store.Result{Status: store.StatusSucceeded, Output: "done", FinishedMs: t0 + 2060})
		require.NoError(t, err)
		require.True(t, ok)
		got, err := b.store.Execution(b.ctx, e.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusSucceeded, got.Status)
		require.Equal(t, 2, got.Attempt)
		require.Equal(t, "r2", got.Replica)
		require.Equal(t, int64(10), got.LatenessMs, "a retry's lateness counts from next_attempt_ms")
		require.Equal(t, int64(50), got.DurationMs)
		require.Equal(t, "done", got.Output)
		require.Equal(t, "", got.Error)
		require.Zero(t, got.NextAttemptMs)
	})
}

func TestFinishAttemptsSettlesABatchInOneCall(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows, err := b.store.InsertFires(b.ctx, fires(b.app, "a", t0, t0+1000, t0+2000))
		require.NoError(t, err)
		for _, r := range rows[:2] {
			ok, startErr := b.store.StartAttempt(b.ctx, r.ID, 1, "r1", r.RunTime)
			require.NoError(t, startErr)
			require.True(t, ok)
		}
		oks, err := b.store.FinishAttempts(b.ctx, []store.Finish{
			{ID: rows[0].ID, Attempt: 1, Result: store.Result{Status: store.StatusSucceeded, FinishedMs: t0 + 10}},
			{ID: rows[1].ID, Attempt: 1, Result: store.Result{Status: store.StatusTimedOut, Error: "deadline", FinishedMs: t0 + 1500}},
			{ID: rows[2].ID, Attempt: 1, Result: store.Result{Status: store.StatusFailed, FinishedMs: t0 + 2500}}, // never started
		})
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false}, oks)

		want := map[int64]string{rows[0].ID: store.StatusSucceeded, rows[1].ID: store.StatusTimedOut, rows[2].ID: store.StatusScheduled}
		for id, status := range want {
			got, err := b.store.Execution(b.ctx, id)
			require.NoError(t, err)
			require.Equal(t, status, got.Status)
		}
	})
}

func TestBadFinishNamesFieldAndValue(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		_, err := b.store.FinishAttempt(b.ctx, 42, 1, store.Result{Status: store.StatusRetrying})
		require.EqualError(t, err, "store: finish execution 42 attempt 1: status retrying needs next_attempt_ms, got 0")
		_, err = b.store.FinishAttempt(b.ctx, 42, 1, store.Result{Status: "done"})
		require.EqualError(t, err, `store: finish execution 42 attempt 1: status "done": want succeeded, failed, timed_out or retrying`)
		_, err = b.store.StartAttempt(b.ctx, 42, 0, "r1", t0)
		require.EqualError(t, err, "store: start execution 42: attempt 0: want 1 or more")
		_, err = b.store.Execution(b.ctx, 42)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

func TestOutputIsStoredCleanAndCapped(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		e := insertOne(t, b, "a", t0)
		_, err := b.store.StartAttempt(b.ctx, e.ID, 1, "r1", t0)
		require.NoError(t, err)
		long := strings.Repeat("é", store.MaxTextBytes) // 2 bytes each
		ok, err := b.store.FinishAttempt(b.ctx, e.ID, 1, store.Result{
			Status: store.StatusFailed, Output: long, Error: "bad\x00byte \xff here", FinishedMs: t0 + 1,
		})
		require.NoError(t, err)
		require.True(t, ok)
		got, err := b.store.Execution(b.ctx, e.ID)
		require.NoError(t, err)
		require.Equal(t, "badbyte \uFFFD here", got.Error)
		require.Equal(t, strings.Repeat("é", store.MaxTextBytes/2), got.Output)
	})
}

func TestRunsOfALostReplicaAreFoundAndSettledOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows, err := b.store.InsertFires(b.ctx, fires(b.app, "a", t0, t0+1000))
		require.NoError(t, err)
		for i, r := range rows {
			ok, startErr := b.store.StartAttempt(b.ctx, r.ID, 1, []string{"alive", "dead"}[i], r.RunTime)
			require.NoError(t, startErr)
			require.True(t, ok)
		}
		n, err := b.store.RunningCount(b.ctx, b.app, "a", -1)
		require.NoError(t, err)
		require.Equal(t, int64(2), n)

		lost, err := b.store.LostExecutions(b.ctx, b.app, []string{"alive"}, 10)
		require.NoError(t, err)
		require.Len(t, lost, 1)
		require.Equal(t, rows[1].ID, lost[0].ID)
		require.Equal(t, "dead", lost[0].Replica)

		all, err := b.store.LostExecutions(b.ctx, b.app, nil, 10)
		require.NoError(t, err)
		require.Len(t, all, 2)

		settle := store.Result{Status: store.StatusRetrying, Reason: store.ReasonReplicaLost, FinishedMs: t0 + 5000, NextAttemptMs: t0 + 6000}
		ok, err := b.store.FinishAttempt(b.ctx, lost[0].ID, lost[0].Attempt, settle)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.FinishAttempt(b.ctx, lost[0].ID, lost[0].Attempt, settle) // a second rescuer
		require.NoError(t, err)
		require.False(t, ok)

		lost, err = b.store.LostExecutions(b.ctx, b.app, []string{"alive"}, 10)
		require.NoError(t, err)
		require.Empty(t, lost)
		n, err = b.store.RunningCount(b.ctx, b.app, "a", -1)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		got, err := b.store.Execution(b.ctx, rows[1].ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusRetrying, got.Status)
		require.Equal(t, store.ReasonReplicaLost, got.Reason)
	})
}

func TestSkipExecutionOnlyBeforeStart(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		paused := insertOne(t, b, "a", t0)
		started := insertOne(t, b, "a", t0+1000)
		ok, err := b.store.StartAttempt(b.ctx, started.ID, 1, "r1", t0+1000)
		require.NoError(t, err)
		require.True(t, ok)

		ok, err = b.store.SkipExecution(b.ctx, paused.ID, 0, store.ReasonPaused, t0+1)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.SkipExecution(b.ctx, started.ID, 1, store.ReasonPaused, t0+1001)
		require.NoError(t, err)
		require.False(t, ok)

		got, err := b.store.Execution(b.ctx, paused.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusSkipped, got.Status)
		require.Equal(t, store.ReasonPaused, got.Reason)
		require.Equal(t, t0+1, got.FinishedMs)
		ok, err = b.store.StartAttempt(b.ctx, paused.ID, 1, "r1", t0+2)
		require.NoError(t, err)
		require.False(t, ok, "a skipped fire never starts")
	})
}

func TestListExecutionsPagesNewestFirst(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		_, err := b.store.InsertFires(b.ctx, fires(b.app, "a", t0, t0+1000, t0+2000, t0+3000))
		require.NoError(t, err)
		_, err = b.store.InsertFires(b.ctx, fires(b.app, "b", t0+1000, t0+2000, t0+4000))
		require.NoError(t, err)

		var seen []string
		var cursor store.Cursor
		pages := 0
		for {
			page, next, listErr := b.store.ListExecutions(b.ctx, store.ExecutionFilter{App: b.app}, cursor, 3)
			require.NoError(t, listErr)
			pages++
			for _, e := range page {
				seen = append(seen, fmt.Sprintf("%s+%d", e.TaskCode, (e.RunTime-t0)/1000))
			}
			if next == (store.Cursor{}) {
				break
			}
			cursor = next
		}
		require.Equal(t, 3, pages)
		// Ties on run_time go by id, newest insert first.
		require.Equal(t, []string{"b+4", "a+3", "b+2", "a+2", "b+1", "a+1", "a+0"}, seen)

		page, next, err := b.store.ListExecutions(b.ctx,
			store.ExecutionFilter{App: b.app, TaskCode: "a", Status: store.StatusScheduled, FromMs: t0 + 1000, ToMs: t0 + 3000}, store.Cursor{}, 0)
		require.NoError(t, err)
		require.Equal(t, store.Cursor{}, next)
		require.Len(t, page, 2)
		require.Equal(t, t0+2000, page[0].RunTime)
		require.Equal(t, t0+1000, page[1].RunTime)
	})
}

// RecentRunTime is the mean duration of the app's last n attempts that
// ended, succeeded or failed; nothing else counts, nor other apps.
func TestRecentRunTimeIsTheMeanOfTheLastEndedAttempts(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		mean, n, err := b.store.RecentRunTime(b.ctx, b.app, 10)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Zero(t, mean)
		_, _, err = b.store.RecentRunTime(b.ctx, b.app, 0)
		require.ErrorContains(t, err, "n 0")

		row := func(app string, i int, status string, ms int64) store.Execution {
			return store.Execution{App: app, TaskCode: "job", RunTime: t0 + int64(i)*1000, Status: status,
				Attempt: 1, StartedMs: t0, FinishedMs: t0 + ms, DurationMs: ms}
		}
		rows := []store.Execution{
			row(b.app, 0, store.StatusSucceeded, 1000), // oldest: beyond the last 3
			row(b.app, 1, store.StatusSucceeded, 10),
			row(b.app, 2, store.StatusRunning, 5000), // not ended
			row(b.app, 3, store.StatusFailed, 30),
			row(b.app, 4, store.StatusSucceeded, 20),
			row(b.app+"-other", 5, store.StatusSucceeded, 9000),
		}
		require.NoError(t, b.db.Create(&rows).Error)
		mean, n, err = b.store.RecentRunTime(b.ctx, b.app, 3)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.Equal(t, 20*time.Millisecond, mean)
		mean, n, err = b.store.RecentRunTime(b.ctx, b.app, 10)
		require.NoError(t, err)
		require.Equal(t, 4, n)
		require.Equal(t, 265*time.Millisecond, mean)
	})
}

// The overlap policies' view of a task's rows: what goes (started,
// running, retrying), what waits before a fire, and the cancel_other
// requests, which mark the runs that go, end a retrying one at once, and
// stop counting as going once their grace has passed and their replica
// has heart-beaten since the request.
func TestOverlapStateAndCancelRequests(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		rows, err := b.store.InsertFires(b.ctx, fires(b.app, "a", t0, t0+1000, t0+2000, t0+3000, t0+4000))
		require.NoError(t, err)
		require.Len(t, rows, 5)
		running, retrying, waiting, self, later := rows[0], rows[1], rows[2], rows[3], rows[4]
		for _, r := range []store.Execution{running, retrying} {
			started, startErr := b.store.StartAttempt(b.ctx, r.ID, 1, "r1", r.RunTime)
			require.NoError(t, startErr)
			require.True(t, started)
		}
		ok, err := b.store.FinishAttempt(b.ctx, retrying.ID, 1, store.Result{Status: store.StatusRetrying, FinishedMs: t0 + 1500, NextAttemptMs: t0 + 9000})
		require.NoError(t, err)
		require.True(t, ok)

		o, err := b.store.OverlapState(b.ctx, b.app, "a", self.RunTime, self.ID, -1)
		require.NoError(t, err)
		require.Equal(t, store.Overlap{Going: 2, Waiting: 1}, o, "running and retrying go; the fire of t0+2s waits before it")
		o, err = b.store.OverlapState(b.ctx, b.app, "a", waiting.RunTime, waiting.ID, -1)
		require.NoError(t, err)
		require.Equal(t, store.Overlap{Going: 2}, o, "nothing waits before the first fire in line")
		o, err = b.store.OverlapState(b.ctx, b.app, "a", later.RunTime, later.ID, -1)
		require.NoError(t, err)
		require.Equal(t, store.Overlap{Going: 2, Waiting: 2}, o, "the fires due before it wait, itself and later ones do not count")

		// A later run goes too (self is a stale fire: its row ran elsewhere
		// while its replica was cut off): it is not asked.
		started, err := b.store.StartAttempt(b.ctx, later.ID, 1, "r2", later.RunTime)
		require.NoError(t, err)
		require.True(t, started)
		n, err := b.store.RequestCancel(b.ctx, b.app, "a", self.ID, self.RunTime, t0+4000)
		require.NoError(t, err)
		require.EqualValues(t, 2, n, "the running one marked, the retrying one ended, the later one left alone")
		got, err := b.store.Execution(b.ctx, later.ID)
		require.NoError(t, err)
		require.Zero(t, got.CancelMs, "the later run is not asked")
		ok, err = b.store.FinishAttempt(b.ctx, later.ID, 1, store.Result{Status: store.StatusSucceeded, FinishedMs: t0 + 4100})
		require.NoError(t, err)
		require.True(t, ok)
		n, err = b.store.RequestCancel(b.ctx, b.app, "a", self.ID, self.RunTime, t0+4500)
		require.NoError(t, err)
		require.Zero(t, n, "asked once")
		got, err = b.store.Execution(b.ctx, retrying.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusFailed, got.Status)
		require.Equal(t, store.ReasonCancelled, got.Reason)
		require.Zero(t, got.NextAttemptMs)
		got, err = b.store.Execution(b.ctx, running.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusRunning, got.Status, "its replica settles it")
		require.Equal(t, t0+4000, got.CancelMs)

		asked, err := b.store.CancelRequested(b.ctx, []int64{running.ID, waiting.ID, self.ID, later.ID})
		require.NoError(t, err)
		require.Equal(t, []int64{running.ID}, asked)
		asked, err = b.store.CancelRequested(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, asked)

		o, err = b.store.OverlapState(b.ctx, b.app, "a", self.RunTime, self.ID, t0+3999)
		require.NoError(t, err)
		require.Equal(t, store.Overlap{Going: 1, Waiting: 1}, o, "asked to stop after graceFrom: still going")
		o, err = b.store.OverlapState(b.ctx, b.app, "a", self.RunTime, self.ID, t0+4000)
		require.NoError(t, err)
		require.Equal(t, store.Overlap{Going: 1, Waiting: 1}, o, "asked at graceFrom, but r1 has not heart-beaten since: frozen, cut off or gone")
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app + "-other", ID: "r1", HeartbeatMs: t0 + 9000}))
		o, err = b.store.OverlapState(b.ctx, b.app, "a", self.RunTime, self.ID, t0+4000)
		require.NoError(t, err)
		require.Equal(t, store.Overlap{Going: 1, Waiting: 1}, o, "another app's r1 is not this one's")
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r1", HeartbeatMs: t0 + 4000}))
		o, err = b.store.OverlapState(b.ctx, b.app, "a", self.RunTime, self.ID, t0+4000)
		require.NoError(t, err)
		require.Equal(t, store.Overlap{Going: 1, Waiting: 1}, o, "r1's heartbeat is not after the request")
		require.NoError(t, b.store.Heartbeat(b.ctx, store.Replica{App: b.app, ID: "r1", HeartbeatMs: t0 + 4001}))
		o, err = b.store.OverlapState(b.ctx, b.app, "a", self.RunTime, self.ID, t0+4000)
		require.NoError(t, err)
		require.Equal(t, store.Overlap{Waiting: 1}, o, "asked to stop at graceFrom, r1 alive since: no longer counted")
	})
}
