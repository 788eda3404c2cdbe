package admin

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
)

// The history of an edit names the principal and shows every field it
// changed with its value before and after; secrets read masked, and an
// edit that moves the target to another origin without sending the
// secrets again says they were cleared.
func TestAuditLogShowsBeforeAndAfterWithSecretsMasked(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{admin: Options{Authorize: func(*http.Request) (Principal, error) {
		return Principal{Name: "alice@ops", Role: RoleAdmin}, nil
	}}})
	create := hookEdit("billing.hook")
	create.Target.URL = "http://127.0.0.1:9/reconcile?token=s3cr3t"
	require.Equal(t, http.StatusCreated, apiSend(t, f, http.MethodPost, "api/tasks", jsonBody(t, create)).Status)

	// Same origin: a secret header given a new value, a plain one changed,
	// a header added, the body and the URL's path changed.
	edit := hookEdit("")
	edit.Target.URL = "http://127.0.0.1:9/reconcile/v2?token=s3cr3t"
	edit.Target.Headers = []xtimer.HTTPHeader{
		{Name: "Authorization", Value: "Bearer rotated-0123456789", Secret: true},
		{Name: "Content-Type", Value: "application/json; charset=utf-8"},
		{Name: "X-Env", Value: "prod"},
	}
	edit.Target.Secret = xtimer.Masked
	edit.Target.Body = `{"full":false}`
	edit.MaxAttempts = 5
	r := apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, edit))
	require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
	d := apiData[TaskDetail](t, r)
	require.Equal(t, ActionView{At: fakeStart, Principal: "alice@ops", Action: "update", Detail: `changed ` +
		`target.url "http://127.0.0.1:9/reconcile?…" → "http://127.0.0.1:9/reconcile/v2?…"; ` +
		`target.headers[Authorization] •••••• → •••••• (new value); ` +
		`target.headers[Content-Type] "application/json" → "application/json; charset=utf-8"; ` +
		`target.headers[X-Env] none → "prod"; ` +
		`target.body "{\"full\":true}" → "{\"full\":false}"; ` +
		`max_attempts 3 → 5`}, d.Actions[0])

	// Another origin, secrets left masked: the scheduler clears them, and
	// the history says so.
	edit.Target.URL = "https://127.0.0.1/hook"
	edit.Target.Headers[0].Value = xtimer.Masked
	r = apiSend(t, f, http.MethodPut, "api/tasks/billing.hook", jsonBody(t, edit))
	require.Equal(t, http.StatusOK, r.Status, "%+v", r.Error)
	d = apiData[TaskDetail](t, r)
	require.False(t, d.HTTP.SecretSet)
	require.Equal(t, ActionView{At: fakeStart, Principal: "alice@ops", Action: "update", Detail: `changed ` +
		`target.url "http://127.0.0.1:9/reconcile/v2?…" → "https://127.0.0.1/hook"; ` +
		`target.headers[Authorization] •••••• → cleared (the target moved to another origin); ` +
		`target.secret •••••• → cleared (the target moved to another origin)`}, d.Actions[0])

	actions, err := f.Store.Actions(context.Background(), f.S.App(), "billing.hook", 10)
	require.NoError(t, err)
	for _, a := range actions {
		requireNoSecret(t, a.Detail, "the history")
		require.NotContains(t, a.Detail, "rotated-0123456789")
	}
}
