package admin

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
)

// Issue 25, hole 5: a console whose scheduler lists no loopback
// destination refuses a callback task aimed at the console itself or at
// the host's Redis, naming the field and the reason, and creates nothing:
// the task would otherwise plant tasks through the console's own API and
// show Redis's answers to every reader.
func TestAPIRefusesACallbackToTheConsoleItself(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{fenceLoopback: true})
	for url, why := range map[string]string{
		f.URL + "api/tasks":               "127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it (127.0.0.1, ::1, localhost or a CIDR holding it)",
		"http://localhost:6379/":          "localhost is a loopback name, refused unless HTTPOptions.Allow lists it",
		"http://[::ffff:127.0.0.1]:6379/": "127.0.0.1 is loopback, refused unless",
	} {
		body := fmt.Sprintf(`{"code":"self.attack","spec":"0 0 1 1 *","paused":true,"target":{"method":"POST","url":%q,`+
			`"headers":[{"name":"Content-Type","value":"application/json"}],"body":"{\"code\":\"planted\",\"spec\":\"* * * * *\"}"}}`, url)
		e := requireAPIError(t, apiSend(t, f, http.MethodPost, "api/tasks", body), 400, codeInvalid, "target.url")
		require.Equal(t, url, e.Value)
		require.Contains(t, e.Message, why, url)
	}
	for _, code := range []string{"self.attack", "planted"} {
		_, err := f.S.HTTPTask(context.Background(), code)
		require.ErrorIs(t, err, xtimer.ErrTaskNotFound, "the attack created nothing")
	}
}
