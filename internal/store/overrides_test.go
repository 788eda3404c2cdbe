package store_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// Option overrides are the operator's: a registration with a new
// definition writes the code's columns only, the overrides stay and win
// (WithOptionOverrides), the heads a replica loads carry them, and each
// write bumps the version and the app's task generation.
func TestOptionOverridesSurviveRegistrationAndReachTheHeads(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		def := &store.Definition{Spec: "0 0 9 * * *", MaxAttempts: 1, TimeoutMs: 1000, Overlap: "allow"}
		_, err := b.store.RegisterTasks(b.ctx, b.app, []store.TaskDef{{Code: "job", Name: "job", Def: def}})
		require.NoError(t, err)
		gen, err := b.store.TaskGen(b.ctx, b.app)
		require.NoError(t, err)

		attempts, overlap := 3, "forbid"
		o := store.OptionOverrides{MaxAttempts: &attempts, Overlap: &overlap, Params: json.RawMessage(`{"a":1}`)}
		require.NoError(t, b.store.SetOptionOverrides(b.ctx, b.app, "job", o))
		after, err := b.store.TaskGen(b.ctx, b.app)
		require.NoError(t, err)
		require.Greater(t, after, gen)

		changed := *def
		changed.TimeoutMs = 2000 // a redeploy with a new definition
		_, err = b.store.RegisterTasks(b.ctx, b.app, []store.TaskDef{{Code: "job", Name: "job", Def: &changed}})
		require.NoError(t, err)
		row, err := b.store.Task(b.ctx, b.app, "job")
		require.NoError(t, err)
		require.Equal(t, int64(2000), row.TimeoutMs)
		require.Equal(t, 1, row.MaxAttempts, "the code's column")
		got, err := row.OptionOverrides.Decode()
		require.NoError(t, err)
		require.Equal(t, o, got)
		eff, err := row.WithOptionOverrides()
		require.NoError(t, err)
		require.Equal(t, []any{3, "forbid", store.Params(`{"a":1}`), int64(2000)}, []any{eff.MaxAttempts, eff.Overlap, eff.Params, eff.TimeoutMs})

		var heads []store.TaskHead
		require.NoError(t, b.store.TaskHeads(b.ctx, b.app, nil, func(h store.TaskHead) error {
			heads = append(heads, h)
			return nil
		}))
		require.Len(t, heads, 1)
		require.Equal(t, row.OptionOverrides, heads[0].OptionOverrides)

		version := row.Version
		require.NoError(t, b.store.ResetOptionOverrides(b.ctx, b.app, "job"))
		row, err = b.store.Task(b.ctx, b.app, "job")
		require.NoError(t, err)
		require.Equal(t, store.OverridesJSON(""), row.OptionOverrides)
		require.Equal(t, version+1, row.Version)
		require.NoError(t, b.store.TaskHeads(b.ctx, b.app, nil, func(h store.TaskHead) error {
			require.Equal(t, store.OverridesJSON(""), h.OptionOverrides)
			return nil
		}))

		require.Error(t, b.store.SetOptionOverrides(b.ctx, b.app, "job", store.OptionOverrides{}), "nothing to set")
		require.ErrorIs(t, b.store.SetOptionOverrides(b.ctx, b.app, "missing", o), store.ErrNotFound)
	})
}
