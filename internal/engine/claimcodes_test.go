package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise: a manual run recorded by a replica without the handler is
// claimed by one that has it, however many tasks the app has. Beyond
// maxClaimCodes handlers, the claim names the tasks the replica does not
// run instead (none at all when it runs every task), or, when both lists
// are long, a rotating chunk of its own.
func TestUnownedFireIsClaimedWhateverTheNumberOfTasks(t *testing.T) {
	t.Parallel()
	for _, others := range []int{0, 3, maxClaimCodes + 200} {
		t.Run(fmt.Sprintf("%d tasks elsewhere", others), func(t *testing.T) {
			t.Parallel()
			db, app := testsvc.SQLite(t), testsvc.App(t)
			ctx := context.Background()
			iv := newInvocations()
			a := newEngine(t, setupOpts{db: db, app: app}, func(o *Config) { o.InstanceID = "a" })
			b := newEngine(t, setupOpts{db: db, app: app}, func(o *Config) { o.InstanceID = "b" })
			const daily = "0 0 3 * * *"
			for i := range maxClaimCodes + 200 {
				require.NoError(t, register(t, a, fmt.Sprintf("a-%04d", i), daily, iv.handler(nil)))
			}
			for i := range others {
				require.NoError(t, register(t, b, fmt.Sprintf("b-%04d", i), daily, iv.handler(nil)))
			}
			require.NoError(t, b.Start(ctx))
			stopOnCleanup(t, b)
			require.NoError(t, a.Start(ctx))
			stopOnCleanup(t, a)
			require.Eventually(t, func() bool { return claimcodesTaskKnown(b, "a-1150") }, 10*time.Second, 10*time.Millisecond)
			if others > 0 {
				require.Eventually(t, func() bool { return claimcodesTaskKnown(a, fmt.Sprintf("b-%04d", others-1)) }, 10*time.Second, 10*time.Millisecond)
			}
			cs := a.view.claimCodes()
			if others <= maxClaimCodes {
				require.True(t, cs.Except, "a names the few tasks it does not run")
				require.Len(t, cs.Codes, others)
			} else {
				// The tick loop takes chunks too: this one is any of them.
				require.False(t, cs.Except, "a names a chunk of its own")
				require.NotEmpty(t, cs.Codes)
				require.LessOrEqual(t, len(cs.Codes), maxClaimCodes)
				for _, c := range cs.Codes {
					require.Regexp(t, `^a-`, c)
				}
			}
			if others > 0 && others <= maxClaimCodes {
				bs := b.view.claimCodes()
				require.False(t, bs.Except, "b names its own few tasks, not the many it does not run")
				require.Len(t, bs.Codes, others)
			}

			// The last codes in a's sorted list: the rotating chunk reaches
			// them on the second claim.
			for _, code := range []string{"a-0005", "a-1150"} {
				e, _, err := b.Trigger(ctx, code)
				require.NoError(t, err)
				require.Empty(t, e.Replica, "b has no handler: the run is nobody's until claimed")
				run := iv.next(t, 15*time.Second)
				require.Equal(t, code, run.Code)
				require.Equal(t, "a", run.Replica)
			}
		})
	}
}

// A replica that runs every task of the app names no code in its claim,
// rather than all of its own: with 1,000 tasks, 1,000 arguments a tick.
// A fire of a task it does not know (stored by another replica since its
// view was read) is then read, and still not claimed.
func TestClaimNamesNoCodeWhenTheReplicaRunsEveryTask(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	iv := newInvocations()
	a := newEngine(t, setupOpts{db: db, app: app}, func(o *Config) { o.InstanceID = "a" })
	b := newEngine(t, setupOpts{db: db, app: app}, func(o *Config) { o.InstanceID = "b" })
	for i := range 5 {
		require.NoError(t, register(t, a, fmt.Sprintf("a-%d", i), "0 0 3 * * *", iv.handler(nil)))
	}
	require.NoError(t, a.Start(ctx))
	stopOnCleanup(t, a)
	require.NoError(t, b.Start(ctx))
	stopOnCleanup(t, b)
	require.Eventually(t, func() bool { return claimcodesTaskKnown(b, "a-4") }, 10*time.Second, 10*time.Millisecond)

	cs := a.view.claimCodes()
	require.True(t, cs.Except, "a names the tasks it does not run")
	require.Empty(t, cs.Codes, "and there are none")

	ghost, err := a.store.InsertFires(ctx, []store.Execution{{App: app, TaskCode: "ghost", RunTime: time.Now().UnixMilli(),
		Status: store.StatusScheduled, MaxAttempts: 1}})
	require.NoError(t, err)
	require.Len(t, ghost, 1)
	e, _, err := b.Trigger(ctx, "a-3")
	require.NoError(t, err)
	require.Empty(t, e.Replica, "b has no handler: the run is nobody's until claimed")
	run := iv.next(t, 15*time.Second)
	require.Equal(t, "a-3", run.Code)
	require.Equal(t, "a", run.Replica)
	g, err := a.store.Execution(ctx, ghost[0].ID)
	require.NoError(t, err)
	require.Empty(t, g.Replica, "a read the unknown task's fire and left it")
}

// claimcodesTaskKnown reports whether e's view has the task's row.
func claimcodesTaskKnown(e *Engine, code string) bool {
	e.view.mu.Lock()
	defer e.view.mu.Unlock()
	return e.view.taskLocked(code) != nil
}
