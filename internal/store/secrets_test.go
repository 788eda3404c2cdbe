package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// SecretTargets pages through the HTTP tasks whose targets hold a
// secret, and nothing else.
func TestSecretTargetsListsTheTargetsThatHoldSecrets(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		var want []string
		for i := range 7 {
			code := fmt.Sprintf("cb%d", i)
			target := `{"method":"GET","url":"http://x/","headers":[{"name":"Authorization","value":"Bearer a","secret":true}]}`
			if i%3 == 2 {
				target = `{"method":"GET","url":"http://x/","body":"{\"secret\":1}"}` // the word in a value only
			} else {
				want = append(want, code)
			}
			_, err := b.store.CreateTask(b.ctx, httpTask(b.app, code, target))
			require.NoError(t, err)
		}
		_, err := b.store.CreateTask(b.ctx, httpTask("other-"+b.app, "cb9", `{"secret":"s"}`))
		require.NoError(t, err)
		_, err = b.store.UpsertTask(b.ctx, &store.Task{App: b.app, Code: "go", Spec: "* * * * *"})
		require.NoError(t, err)

		var got []string
		after := int64(0)
		for {
			page, err := b.store.SecretTargets(b.ctx, b.app, after, 2)
			require.NoError(t, err)
			for _, st := range page {
				require.Greater(t, st.ID, after)
				after = st.ID
				got = append(got, st.Code)
				require.Equal(t, int64(1), st.Version)
				require.Contains(t, st.Target, `"secret":true`)
			}
			if len(page) < 2 {
				break
			}
		}
		require.Equal(t, want, got)
	})
}

// RewriteSecretTarget writes only over the target it names, at the
// version read: an edit made since wins, whatever the database's
// collation makes of the text, and the version stays.
func TestRewriteSecretTargetLetsAConcurrentEditWin(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		plain := `{"secret":"Sign-Me"}`
		row, err := b.store.CreateTask(b.ctx, httpTask(b.app, "cb", plain))
		require.NoError(t, err)

		// An edit that changed only the case: the version says it moved.
		edited := httpTask(b.app, "cb", `{"secret":"sign-me"}`)
		_, err = b.store.ReplaceTask(b.ctx, edited, row.Version)
		require.NoError(t, err)
		ok, err := b.store.RewriteSecretTarget(b.ctx, b.app, "cb", row.Version, plain, `{"secret":"xtenc:v1:k1:AAAA"}`)
		require.NoError(t, err)
		require.False(t, ok)
		cur, err := b.store.Task(b.ctx, b.app, "cb")
		require.NoError(t, err)
		require.Equal(t, `{"secret":"sign-me"}`, *cur.HTTPTarget, "the edit won")

		// Another target than the one named, at the right version.
		ok, err = b.store.RewriteSecretTarget(b.ctx, b.app, "cb", cur.Version, plain, `{"secret":"xtenc:v1:k1:AAAA"}`)
		require.NoError(t, err)
		require.False(t, ok)

		// The one named, at its version: written, and nothing else moves.
		gen, err := b.store.TaskGen(b.ctx, b.app)
		require.NoError(t, err)
		ok, err = b.store.RewriteSecretTarget(b.ctx, b.app, "cb", cur.Version, *cur.HTTPTarget, `{"secret":"xtenc:v1:k1:AAAA"}`)
		require.NoError(t, err)
		require.True(t, ok)
		after, err := b.store.Task(b.ctx, b.app, "cb")
		require.NoError(t, err)
		require.Equal(t, `{"secret":"xtenc:v1:k1:AAAA"}`, *after.HTTPTarget)
		require.Equal(t, cur.Version, after.Version)
		require.Equal(t, cur.UpdatedMs, after.UpdatedMs)
		gen2, err := b.store.TaskGen(b.ctx, b.app)
		require.NoError(t, err)
		require.Equal(t, gen, gen2)

		ok, err = b.store.RewriteSecretTarget(b.ctx, b.app, "none", 1, plain, plain)
		require.NoError(t, err)
		require.False(t, ok)
	})
}
