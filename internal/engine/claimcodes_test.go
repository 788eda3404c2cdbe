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
			_, iv, a, b := claimPair(t, maxClaimCodes+200, others)
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
				triggerForA(t, b, iv, code)
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
	ctx := context.Background()
	app, iv, a, b := claimPair(t, 5, 0)
	cs := a.view.claimCodes()
	require.True(t, cs.Except, "a names the tasks it does not run")
	require.Empty(t, cs.Codes, "and there are none")

	ghost, err := a.store.InsertFires(ctx, []store.Execution{{App: app, TaskCode: "ghost", RunTime: time.Now().UnixMilli(),
		Status: store.StatusScheduled, MaxAttempts: 1}})
	require.NoError(t, err)
	require.Len(t, ghost, 1)
	triggerForA(t, b, iv, "a-0003")
	g, err := a.store.Execution(ctx, ghost[0].ID)
	require.NoError(t, err)
	require.Empty(t, g.Replica, "a read the unknown task's fire and left it")
}

// claimPair starts replicas a and b of a new app on one SQLite database,
// a with the daily tasks a-0000 to a-<aTasks-1> and b with b-0000 to
// b-<bTasks-1>, and waits until each knows the other's tasks. iv records
// the runs of all of them.
func claimPair(t *testing.T, aTasks, bTasks int) (app string, iv *invocations, a, b *Engine) {
	t.Helper()
	ctx := context.Background()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	iv = newInvocations()
	a = newEngine(t, setupOpts{db: db, app: app}, func(o *Config) { o.InstanceID = "a" })
	b = newEngine(t, setupOpts{db: db, app: app}, func(o *Config) { o.InstanceID = "b" })
	for _, r := range []struct {
		e      *Engine
		prefix string
		n      int
	}{{a, "a", aTasks}, {b, "b", bTasks}} {
		for i := range r.n {
			require.NoError(t, register(t, r.e, fmt.Sprintf("%s-%04d", r.prefix, i), "0 0 3 * * *", iv.handler(nil)))
		}
	}
	require.NoError(t, b.Start(ctx))
	stopOnCleanup(t, b)
	require.NoError(t, a.Start(ctx))
	stopOnCleanup(t, a)
	require.Eventually(t, func() bool { return claimcodesTaskKnown(b, fmt.Sprintf("a-%04d", aTasks-1)) }, 10*time.Second, 10*time.Millisecond)
	if bTasks > 0 {
		require.Eventually(t, func() bool { return claimcodesTaskKnown(a, fmt.Sprintf("b-%04d", bTasks-1)) }, 10*time.Second, 10*time.Millisecond)
	}
	return app, iv, a, b
}

// triggerForA runs code by hand through b, which has no handler for it,
// and waits for a to claim and run it.
func triggerForA(t *testing.T, b *Engine, iv *invocations, code string) {
	t.Helper()
	e, _, err := b.Trigger(context.Background(), code)
	require.NoError(t, err)
	require.Empty(t, e.Replica, "b has no handler: the run is nobody's until claimed")
	run := iv.next(t, 15*time.Second)
	require.Equal(t, code, run.Code)
	require.Equal(t, "a", run.Replica)
}

// claimcodesTaskKnown reports whether e's view has the task's row.
func claimcodesTaskKnown(e *Engine, code string) bool {
	e.view.mu.Lock()
	defer e.view.mu.Unlock()
	return e.view.taskLocked(code) != nil
}
