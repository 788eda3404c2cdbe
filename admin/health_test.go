package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// getHealth asks GET api/health of the console at url and decodes the
// envelope, refusing fields Health does not have.
func getHealth(t *testing.T, url string) (int, xtimer.Health) {
	t.Helper()
	resp, err := http.Get(url + "api/health")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	var body struct {
		Data xtimer.Health `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&body), "%s", raw)
	return resp.StatusCode, body.Data
}

func TestHealthIsOKOnAStartedScheduler(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	status, h := getHealth(t, f.URL)
	require.Equal(t, http.StatusOK, status)
	require.True(t, h.OK, "%+v", h)
	require.True(t, h.DB.OK, "%+v", h.DB)
	require.Equal(t, xtimer.ComponentHealth{OK: true, Detail: "in-process lock"}, h.Redis)
	require.True(t, h.Loop.OK, "%+v", h.Loop)
}

func TestHealthIs503WhenTheDatabaseIsClosed(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t) // a pool of this scheduler's own
	s, err := xtimer.New(xtimer.Options{DB: db, App: testsvc.App(t), Clock: fakeclock.New(fakeStart), ClockReference: xtimer.ClockReferenceOff,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Stop(ctx) // the database is gone: nothing can be released
	})
	h, err := New(s, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(DefaultPrefix, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	sqlDB, err := db.DB()
	require.NoError(t, err)
	require.NoError(t, sqlDB.Close())
	status, got := getHealth(t, srv.URL+DefaultPrefix)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.False(t, got.OK)
	require.False(t, got.DB.OK)
	require.Contains(t, got.DB.Detail, "database is closed")
	require.True(t, got.Loop.OK, "the loop itself still runs: %+v", got.Loop)
}

func TestHealthReportsAStoppedSchedulersLoop(t *testing.T) {
	t.Parallel()
	f := setup(t, fixtureOpts{})
	require.NoError(t, f.S.Stop(context.Background()))
	status, h := getHealth(t, f.URL)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.False(t, h.OK)
	require.True(t, h.DB.OK, "%+v", h.DB)
	require.Equal(t, xtimer.ComponentHealth{Detail: "scheduler stopped"}, h.Loop)
}
