package store_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// retentionRows records, for task "a", one row a minute from t0-10m to
// t0-1m: final except t0-10m (scheduled), t0-9m (running) and t0-8m
// (retrying). Another app has an old final row too.
func retentionRows(t *testing.T, b *bundle) {
	t.Helper()
	var rows []store.Execution
	for i := 10; i >= 1; i-- {
		status := []string{store.StatusSucceeded, store.StatusFailed, store.StatusTimedOut, store.StatusSkipped}[i%4]
		switch i {
		case 10:
			status = store.StatusScheduled
		case 9:
			status = store.StatusRunning
		case 8:
			status = store.StatusRetrying
		}
		rows = append(rows, store.Execution{App: b.app, TaskCode: "a", RunTime: t0 - int64(i)*60_000, Status: status})
	}
	rows = append(rows, store.Execution{App: b.app + "-other", TaskCode: "a", RunTime: t0 - 3_600_000, Status: store.StatusSucceeded})
	require.NoError(t, b.db.Create(&rows).Error)
}

// runTimes returns the run times of app's executions of code, oldest first,
// as minutes before t0.
func runTimes(t *testing.T, b *bundle, app, code string) []int64 {
	t.Helper()
	var got []int64
	require.NoError(t, b.db.Raw("SELECT run_time FROM xtimer_executions WHERE app = ? AND task_code = ? ORDER BY run_time", app, code).Scan(&got).Error)
	for i := range got {
		got[i] = (t0 - got[i]) / 60_000
	}
	return got
}

func TestDeleteExecutionsBeforeDeletesOnlyOldFinalRowsInBoundedBatches(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		retentionRows(t, b)
		before := t0 - 3*60_000 // rows at t0-10m..t0-4m are old; 7 of them, 4 final

		n, _, err := b.store.DeleteExecutionsBefore(b.ctx, b.app, math.MinInt64, before, 3)
		require.NoError(t, err)
		require.Equal(t, int64(3), n, "a call deletes at most limit rows")
		require.Equal(t, []int64{10, 9, 8, 4, 3, 2, 1}, runTimes(t, b, b.app, "a"), "oldest final rows first")

		n, _, err = b.store.DeleteExecutionsBefore(b.ctx, b.app, math.MinInt64, before, 3)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		n, _, err = b.store.DeleteExecutionsBefore(b.ctx, b.app, math.MinInt64, before, 3)
		require.NoError(t, err)
		require.Zero(t, n)

		require.Equal(t, []int64{10, 9, 8, 3, 2, 1}, runTimes(t, b, b.app, "a"), "non-final old rows and recent rows stay")
		require.Equal(t, []int64{60}, runTimes(t, b, b.app+"-other", "a"), "other apps are left alone")
	})
}

func TestDeleteBeyondCountKeepsExactlyTheNewest(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		var rows []store.Execution
		for i := 1; i <= 20; i++ {
			rows = append(rows, store.Execution{App: b.app, TaskCode: "a", RunTime: t0 - int64(i)*60_000, Status: store.StatusSucceeded})
		}
		rows = append(rows, store.Execution{App: b.app, TaskCode: "b", RunTime: t0 - 60_000, Status: store.StatusSucceeded})
		require.NoError(t, b.db.Create(&rows).Error)

		n, err := b.store.DeleteBeyondCount(b.ctx, b.app, "a", 5, 10)
		require.NoError(t, err)
		require.Equal(t, int64(10), n, "a call deletes at most limit rows")
		n, err = b.store.DeleteBeyondCount(b.ctx, b.app, "a", 5, 10)
		require.NoError(t, err)
		require.Equal(t, int64(5), n)
		n, err = b.store.DeleteBeyondCount(b.ctx, b.app, "a", 5, 10)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, []int64{5, 4, 3, 2, 1}, runTimes(t, b, b.app, "a"))
		require.Equal(t, []int64{1}, runTimes(t, b, b.app, "b"))

		n, err = b.store.DeleteBeyondCount(b.ctx, b.app, "b", 5, 10)
		require.NoError(t, err)
		require.Zero(t, n, "a task with fewer rows than keep loses none")
	})
}

func TestDeleteBeyondCountKeepsNonFinalRows(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		retentionRows(t, b)
		n, err := b.store.DeleteBeyondCount(b.ctx, b.app, "a", 2, 100)
		require.NoError(t, err)
		require.Equal(t, int64(5), n)
		require.Equal(t, []int64{10, 9, 8, 2, 1}, runTimes(t, b, b.app, "a"))
	})
}

func TestDeleteSlotsBeforeDeletesOldSlotsInBoundedBatches(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		now := store.MinuteOf(t0)
		var slots []store.Slot
		for m := int64(1); m <= 3; m++ {
			for bucket := range 2 {
				slots = append(slots, store.Slot{App: b.app, Minute: now - m, Bucket: bucket, Done: true})
			}
		}
		slots = append(slots, store.Slot{App: b.app + "-other", Minute: now - 3, Bucket: 0, Done: true})
		require.NoError(t, b.db.Create(&slots).Error)

		before := t0 - 60_000 // minutes now-3 and now-2 are before it
		n, err := b.store.DeleteSlotsBefore(b.ctx, b.app, before, 3)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		n, err = b.store.DeleteSlotsBefore(b.ctx, b.app, before, 3)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)

		var left []int64
		require.NoError(t, b.db.Raw("SELECT minute FROM xtimer_slots WHERE app = ? ORDER BY minute", b.app).Scan(&left).Error)
		require.Equal(t, []int64{now - 1, now - 1}, left)
		var other int64
		require.NoError(t, b.db.Raw("SELECT COUNT(*) FROM xtimer_slots WHERE app = ?", b.app+"-other").Scan(&other).Error)
		require.Equal(t, int64(1), other)
	})
}

// A sweep passes each batch's last run_time to the next as its cursor;
// over many batches, with many rows at each instant and live rows among
// them, it deletes exactly the old final rows.
func TestDeleteExecutionsBeforeWithACursorDeletesExactlyTheOldFinalRows(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		statuses := []string{store.StatusSucceeded, store.StatusFailed, store.StatusRunning, store.StatusTimedOut, store.StatusSkipped, store.StatusRetrying}
		var rows []store.Execution
		var oldFinal, kept int
		for m := int64(1); m <= 40; m++ { // 40 instants, a minute apart, the last 10 recent
			for task := range 7 { // 7 rows at each instant
				status := statuses[(int(m)+task)%len(statuses)]
				rows = append(rows, store.Execution{App: b.app, TaskCode: string(rune('a' + task)), RunTime: t0 - (41-m)*60_000, Status: status})
				if m <= 30 && status != store.StatusRunning && status != store.StatusRetrying {
					oldFinal++
				} else {
					kept++
				}
			}
		}
		rows = append(rows, store.Execution{App: b.app + "-other", TaskCode: "a", RunTime: t0 - 40*60_000, Status: store.StatusSucceeded})
		require.NoError(t, b.db.Create(&rows).Error)
		require.Equal(t, 140, oldFinal)

		before := t0 - 10*60_000 // instants 1-30 are before it
		from, total, batches := int64(math.MinInt64), int64(0), 0
		for {
			n, last, err := b.store.DeleteExecutionsBefore(b.ctx, b.app, from, before, 9)
			require.NoError(t, err)
			require.LessOrEqual(t, n, int64(9))
			total += n
			batches++
			if n < 9 {
				break
			}
			require.GreaterOrEqual(t, last, from, "the cursor never goes back")
			require.Less(t, last, before)
			from = last
		}
		require.Equal(t, int64(oldFinal), total)
		require.Equal(t, 16, batches, "140 rows in batches of 9, and the last short one")

		var left []store.Execution
		require.NoError(t, b.db.Where("app = ?", b.app).Order("run_time, task_code").Find(&left).Error)
		require.Len(t, left, kept)
		for _, r := range left {
			require.True(t, r.RunTime >= before || r.Status == store.StatusRunning || r.Status == store.StatusRetrying,
				"%s at %d is %s", r.TaskCode, r.RunTime, r.Status)
		}
		require.Equal(t, []int64{40}, runTimes(t, b, b.app+"-other", "a"), "other apps are left alone")
	})
}
