package xtimer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/store"
)

// A Go task removed from the code can be deleted once no live replica
// registers it; while one does, DeleteTask answers ErrTaskRegistered (an
// ErrNotHTTPTask, as before) naming it. Its history stays. Two
// replicas, every backend.
func TestDeleteTaskTakesAGoTaskNoLiveReplicaRegisters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newEditFleet(t, db)
		old := f.start(map[string]string{"old.job": "*/10 * * * * *"})
		newer := f.start(map[string]string{"new.job": "*/10 * * * * *"})
		f.runUntil(hms(0, 12))
		f.waitRows("old.job", hms(0, 10), "12:00:10 succeeded schedule")

		err := newer.DeleteTask(ctx, "old.job")
		require.ErrorIs(t, err, ErrTaskRegistered)
		require.ErrorIs(t, err, ErrNotHTTPTask)
		require.ErrorContains(t, err, "by replica replica-0")
		require.ErrorContains(t, old.DeleteTask(ctx, "old.job"), "by this replica, replica-0")

		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, old.Stop(stopCtx)) // the old build is gone
		f.replicas = f.replicas[1:]
		require.NoError(t, newer.DeleteTask(ctx, "old.job"))
		tasks, err := newer.Tasks(ctx, TaskFilter{})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		require.Equal(t, "new.job", tasks[0].Code)
		var kept int64
		require.NoError(t, db.Model(&store.Execution{}).Where("app = ? AND task_code = ? AND status = ?", f.app, "old.job", store.StatusSucceeded).Count(&kept).Error)
		require.Equal(t, int64(1), kept, "the history stays")
		require.ErrorIs(t, newer.DeleteTask(ctx, "old.job"), ErrTaskNotFound)
	})
}
