package xtimer

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// Once a minute a replica checks its view of the tasks against the
// database's sums (TaskSums), for writers that do not bump the task
// generation: while they agree it reads no task, and a version bumped
// behind the generation's back (an older release pausing a task) is
// picked up within the minute.
func TestMinuteTaskCheckReadsTasksOnlyWhenTheirSumsDiffer(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	var versionReads atomic.Int32
	require.NoError(t, db.Callback().Row().After("gorm:row").Register("count-version-reads", func(tx *gorm.DB) {
		if sql := tx.Statement.SQL.String(); strings.Contains(sql, "xtimer_tasks") && strings.Contains(sql, "version") &&
			!strings.Contains(sql, "SUM(") {
			versionReads.Add(1)
		}
	}))
	f := newEditFleet(t, db)
	s := f.start(map[string]string{"nightly": "0 0 3 * * *", "other": "0 0 4 * * *"})
	// Start loads the view with store.TaskHeads, a statement of its own
	// past GORM's callbacks: from here on only the minute check reads.
	versionReads.Store(0)
	f.runUntil(hms(2, 30))
	require.Zero(t, versionReads.Load(), "two minutes of agreeing sums read no task")

	require.NoError(t, db.Model(&store.Task{}).Where("app = ? AND code = ?", f.app, "nightly").
		UpdateColumns(map[string]any{"status": store.TaskPaused, "version": gorm.Expr("version + 1")}).Error)
	f.runUntil(hms(3, 31))
	require.NotZero(t, versionReads.Load())
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	require.Equal(t, store.TaskPaused, s.view.taskLocked("nightly").status)
	require.Equal(t, store.TaskActive, s.view.taskLocked("other").status)
}

// A replica registering the same tasks as the last one skips their rows
// (store.RegisterTasks' digest) and loads its view from their heads; a row
// that vanished without a trace in the task generation (deleted by hand)
// is noticed in that load and written again, and its task fires.
func TestATaskRowDeletedByHandIsRecordedAgainAtStart(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	f := newEditFleet(t, db)
	specs := map[string]string{"minutely": "0 * * * * *", "other": "30 * * * * *"}
	f.start(specs)
	require.NoError(t, db.Where("app = ? AND code = ?", f.app, "minutely").Delete(&store.Task{}).Error)

	s := f.start(specs)
	row, err := s.store.Task(context.Background(), f.app, "minutely")
	require.NoError(t, err, "recorded again")
	s.view.mu.Lock()
	require.NotNil(t, s.view.taskLocked("minutely"))
	require.Equal(t, row.ID, s.view.taskLocked("minutely").id)
	s.view.mu.Unlock()
	f.runUntil(hms(1, 0).Add(500 * time.Millisecond))
	require.Equal(t, map[string]int{hms(1, 0).Format("15:04:05"): 1}, f.callsOf("minutely"), "once, by either replica")
}
