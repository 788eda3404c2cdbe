package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// A task with option overrides gets a definition of its own, the code's
// with the overridden fields replaced, whether the view adopts its row
// (a change) or loads its head (a start); the tasks registered alike
// without overrides keep sharing the registration's definition.
func TestOptionOverridesGiveOnlyTheirTaskADefinitionOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	clock := fakeclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	def := taskDef("0 0 9 * * *")
	sched, err := cron.Parse(def.Spec)
	require.NoError(t, err)
	shared := &Shared{Sched: sched, Def: &def}
	nop := func(context.Context, *Attempt) error { return nil }
	start := func() *Engine {
		e := newEngine(t, setupOpts{db: db, app: app, clock: clock}, nil)
		for _, code := range []string{"a", "b"} {
			require.NoError(t, e.Register(code, Handler(nop), shared))
		}
		require.NoError(t, e.Start(ctx))
		stopOnCleanup(t, e)
		return e
	}
	check := func(e *Engine) {
		t.Helper()
		e.view.mu.Lock()
		defer e.view.mu.Unlock()
		require.Same(t, shared.Def, e.view.taskLocked("a").def(), "no overrides: the shared definition")
		b := e.view.taskLocked("b").def()
		require.NotSame(t, shared.Def, b)
		want := def
		want.MaxAttempts, want.Overlap = 3, OverlapForbid
		require.Equal(t, want, *b)
	}

	e := start()
	attempts, overlap := 3, OverlapForbid
	require.NoError(t, e.store.SetOptionOverrides(ctx, app, "b", store.OptionOverrides{MaxAttempts: &attempts, Overlap: &overlap}))
	require.NoError(t, e.ReloadTask(ctx, "b"))
	check(e)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, e.Stop(stopCtx))

	check(start()) // loaded from the rows' heads
}
