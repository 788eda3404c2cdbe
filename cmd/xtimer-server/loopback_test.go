package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 25, hole 5: without -allow, a callback task may not call the
// server's own console (planting tasks through its API) or the host's
// Redis; the answer names the field, the URL and the reason, and nothing
// is created.
func TestServerRefusesCallbacksToItsOwnHostWithoutAllow(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	s := startServer(t, bin, "-db", filepath.Join(t.TempDir(), "xtimer.db"), "-listen", "127.0.0.1:0", "-token", testToken)
	for url, why := range map[string]string{
		s.console + "api/tasks":  "127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it",
		"http://localhost:6379/": "localhost is a loopback name, refused unless HTTPOptions.Allow lists it",
	} {
		task := `{"code":"self.attack","spec":"* * * * * *","target":{"method":"POST","url":"` + url + `",` +
			`"body":"{\"code\":\"planted\",\"spec\":\"* * * * * *\"}"}}`
		status, body := s.request(t, http.MethodPost, "/xtimer/api/tasks", testToken, task)
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, body, `"field":"target.url"`, url)
		require.Contains(t, body, `"value":"`+url+`"`)
		require.Contains(t, body, why, url)
	}
	status, body := s.request(t, http.MethodGet, "/xtimer/api/tasks", testToken, "")
	require.Equal(t, http.StatusOK, status, body)
	require.False(t, strings.Contains(body, "self.attack") || strings.Contains(body, "planted"), "nothing was created: %s", body)
}
