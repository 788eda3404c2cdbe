package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// A second Register of a code is refused and leaves the first one as it
// was: its handler, its options, its place in the registration order.
func TestDuplicateRegisterKeepsTheFirstRegistration(t *testing.T) {
	t.Parallel()
	e := newEngine(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, nil)
	called := ""
	first := func(context.Context, *Attempt) error { called = "first"; return nil }
	second := func(context.Context, *Attempt) error { called = "second"; return nil }
	minute := func(d *store.Definition) { d.TimeoutMs = 60_000 }
	mustRegister(t, e, "a", "0 * * * * *", first, minute)
	mustRegister(t, e, "b", "0 * * * * *", first)
	err := register(t, e, "a", "30 * * * * *", second)
	require.ErrorIs(t, err, ErrDuplicateTask)
	require.EqualError(t, err, `xtimer: task already registered: "a"`)
	e.view.mu.Lock()
	defer e.view.mu.Unlock()
	r := e.view.handlers.get("a")
	require.NoError(t, r.handler.(Handler)(context.Background(), nil))
	require.Equal(t, "first", called)
	require.Equal(t, "0 * * * * *", r.opts.Def.Spec)
	require.EqualValues(t, 60_000, r.opts.Def.TimeoutMs)
	require.Equal(t, []string{"a", "b"}, e.view.handlerCodesLocked())
}
