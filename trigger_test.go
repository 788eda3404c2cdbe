package xtimer

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// A manual run triggered with parameters, from a replica without the
// handler, runs on the replica that has it with those parameters, on
// every attempt, and its execution shows them and the note; one triggered
// without gets the task's.
func TestTriggerWithRunsTheOverrideWhereTheHandlerIs(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newEditFleet(t, db)
		l := newParamLog()
		l.failFirst = true
		startWith(f, l.handle, WithParams(reportParams{Region: "eu", Limit: 3}), WithRetry(2), WithBackoff(time.Second, time.Second))
		other := f.start(map[string]string{"other": "0 0 9 * * *"})
		require.False(t, other.eng.Registered("job"))

		const override = `{"region": "us", "limit": 5}`
		withParams, err := other.TriggerWith(ctx, "job", TriggerOptions{Params: json.RawMessage(override), Note: "rerun for the US"})
		require.NoError(t, err)
		require.Equal(t, SourceManual, withParams.Source)
		require.Equal(t, override, withParams.Params)
		require.Equal(t, "rerun for the US", withParams.Note)
		plain, err := other.Trigger(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, "", plain.Params)

		for _, id := range []int64{withParams.ID, plain.ID} {
			f.runUntilRow(id, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
		}
		require.Equal(t, []string{override, override}, l.paramsOf(withParams.ID), "both attempts, the retry too")
		require.Equal(t, []string{`{"region":"eu","limit":3}`, `{"region":"eu","limit":3}`}, l.paramsOf(plain.ID))

		e, err := other.Execution(ctx, withParams.ID)
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, e.Status)
		require.Equal(t, 2, e.Attempt)
		require.Equal(t, "replica-0", e.Replica)
		require.Equal(t, override, e.Params)
		require.Equal(t, "rerun for the US", e.Note)
		e, err = other.Execution(ctx, plain.ID)
		require.NoError(t, err)
		require.Equal(t, "", e.Params, "the task's parameters, read at each attempt")
		require.Equal(t, "", e.Note)
	})
}

// runUntilRow moves the clock a second at a time, as runUntil does, until
// execution id satisfies cond (results are written a tick or so after
// their attempts), for at most a minute of the fake clock.
func (f *editFleet) runUntilRow(id int64, cond func(store.Execution) bool) store.Execution {
	f.t.Helper()
	var r store.Execution
	for range 60 {
		f.waitIdle()
		require.NoError(f.t, f.db.Where("id = ?", id).Take(&r).Error)
		if cond(r) {
			return r
		}
		f.clock.Advance(time.Second)
	}
	f.t.Fatalf("execution %d stuck at %+v", id, r)
	return r
}

func TestTriggerWithRefusesBadOptionsNamingTheFieldAndRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.SQLite(t)
	s := newScheduler(t, setupOpts{db: db, app: testsvc.App(t)}, nil)
	require.NoError(t, s.Register("job", "0 0 3 * * *", func(context.Context, *Run) error { return nil }))
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	for _, c := range []struct {
		name  string
		o     TriggerOptions
		field string
		want  string
	}{
		{"params not JSON", TriggerOptions{Params: json.RawMessage(`{"region":`)}, "TriggerOptions.Params",
			`xtimer: trigger "job": TriggerOptions.Params "{\"region\":": not valid JSON: unexpected end of JSON input`},
		{"params of plain text", TriggerOptions{Params: json.RawMessage(`eu`)}, "TriggerOptions.Params",
			`xtimer: trigger "job": TriggerOptions.Params "eu": not valid JSON: invalid character 'e' looking for beginning of value`},
		{"params over 64 KiB", TriggerOptions{Params: json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`)}, "TriggerOptions.Params",
			`xtimer: trigger "job": TriggerOptions.Params (65538 bytes): at most 65536 bytes of JSON`},
		{"params not UTF-8", TriggerOptions{Params: json.RawMessage("\"\xff\"")}, "TriggerOptions.Params",
			`xtimer: trigger "job": TriggerOptions.Params "\"\xff\"": JSON must be valid UTF-8 text without NUL bytes`},
		{"note with NUL", TriggerOptions{Note: "a\x00b"}, "TriggerOptions.Note",
			`xtimer: trigger "job": TriggerOptions.Note "a\x00b": contains a NUL byte`},
		{"note not UTF-8", TriggerOptions{Note: "\xff"}, "TriggerOptions.Note",
			`xtimer: trigger "job": TriggerOptions.Note "\xff": not valid UTF-8`},
		{"note over 1024 bytes", TriggerOptions{Note: strings.Repeat("n", 1025)}, "TriggerOptions.Note",
			`xtimer: trigger "job": TriggerOptions.Note (1025 bytes): at most 1024 bytes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.TriggerWith(ctx, "job", c.o)
			require.EqualError(t, err, c.want)
			var te *TriggerError
			require.True(t, errors.As(err, &te))
			require.Equal(t, c.field, te.Field)
			require.Equal(t, "job", te.Task)
		})
	}
	_, err := s.TriggerWith(ctx, "nope", TriggerOptions{Params: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, ErrTaskNotFound)
	var n int64
	require.NoError(t, db.Model(&store.Execution{}).Where("app = ? AND source = ?", s.App(), store.SourceManual).Count(&n).Error)
	require.Zero(t, n, "nothing recorded")
}

// An HTTP task's parameters are its body: a manual run's override replaces
// it, byte for byte, and the signature covers the new body; a body that
// does not fit the task is refused naming TriggerOptions.Params.
func TestTriggerWithReplacesTheBodyOfAnHTTPTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startHTTP(t, func(o *Options) { o.HTTPSigningSecret = "fleet-key"; o.HTTPMaxBody = 1024 })
	rc := newReceiver(t, nil)
	for _, task := range []HTTPTask{
		{Code: "cb.json", Spec: hourly, Target: HTTPTarget{Method: "POST", URL: rc.URL + "/hook",
			Headers: []HTTPHeader{{Name: "Content-Type", Value: "application/json"}}, Body: `{"region":"eu"}`}},
		{Code: "cb.text", Spec: hourly, Target: HTTPTarget{Method: "POST", URL: rc.URL + "/hook",
			Headers: []HTTPHeader{{Name: "Content-Type", Value: "text/plain"}}, Body: "region=eu"}},
	} {
		require.NoError(t, s.CreateHTTPTask(ctx, task))
	}
	for _, c := range []struct{ code, body string }{
		{"cb.json", `{"region": "us", "note": "héllo"}`},
		{"cb.text", "region=us & not JSON"},
	} {
		ex, err := s.TriggerWith(ctx, c.code, TriggerOptions{Params: json.RawMessage(c.body), Note: "by hand"})
		require.NoError(t, err)
		row := waitRow(t, s, ex.ID, func(r store.Execution) bool { return Status(r.Status).Final() })
		require.Equal(t, store.StatusSucceeded, row.Status, row.Error)
		require.Equal(t, c.body, string(row.Params))
		got := rc.requests()
		req := got[len(got)-1]
		require.Equal(t, c.body, req.Body, "the override, byte for byte")
		require.Equal(t, strconv.FormatInt(ex.ID, 10), req.Header.Get(HeaderExecution))
		ts, err := strconv.ParseInt(req.Header.Get(HeaderTimestamp), 10, 64)
		require.NoError(t, err)
		require.True(t, executor.VerifySignature("fleet-key", req.Header.Get(HeaderSignature), ts, []byte(c.body), time.Now(), 0))
	}
	// Without an override the task's own body goes.
	row := runOnce(t, s, "cb.json")
	require.Equal(t, store.StatusSucceeded, row.Status, row.Error)
	got := rc.requests()
	require.Equal(t, `{"region":"eu"}`, got[len(got)-1].Body)

	sent := len(got)
	for _, c := range []struct{ code, body, want string }{
		{"cb.json", "region=us", `xtimer: trigger "cb.json": TriggerOptions.Params "region=us": the task's Content-Type says JSON but the body is not: invalid character 'r' looking for beginning of value`},
		{"cb.text", strings.Repeat("x", 1025), `xtimer: trigger "cb.text": TriggerOptions.Params (1025 bytes): at most 1024 bytes (Options.HTTPMaxBody)`},
		{"cb.text", "a\x00b", `xtimer: trigger "cb.text": TriggerOptions.Params "a\x00b": an HTTP task's body must be valid UTF-8 text without NUL bytes`},
	} {
		_, err := s.TriggerWith(ctx, c.code, TriggerOptions{Params: json.RawMessage(c.body)})
		require.EqualError(t, err, c.want)
	}
	require.Len(t, rc.requests(), sent, "nothing refused was sent")
}
