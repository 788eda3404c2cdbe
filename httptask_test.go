package xtimer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// receiver is an HTTP endpoint that records every callback it gets.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	got   []received
	reply func(w http.ResponseWriter, r *http.Request, n int) // n counts requests from 1
}

type received struct {
	Method string
	Header http.Header
	Body   string
	At     time.Time
}

func newReceiver(t *testing.T, reply func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	rc := &receiver{reply: reply}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{r.Method, r.Header.Clone(), string(body), time.Now()})
		n := len(rc.got)
		rc.mu.Unlock()
		if rc.reply != nil {
			rc.reply(w, r, n)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// allowLoopback lets a scheduler's callbacks reach the test receivers,
// httptest servers on 127.0.0.1: loopback is refused unless listed.
func allowLoopback(o *Options) { o.HTTPAllow = []string{"127.0.0.1"} }

// startHTTP starts a scheduler on SQLite with the system clock, its
// callbacks allowed to reach the test receivers (allowLoopback).
func startHTTP(t *testing.T, mod func(*Options)) *Scheduler {
	t.Helper()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t)}, func(o *Options) {
		allowLoopback(o)
		if mod != nil {
			mod(o)
		}
	})
	require.NoError(t, s.Start(context.Background()))
	stopOnCleanup(t, s)
	return s
}

// hourly is a schedule that does not fire during a test: runs come from Trigger.
const hourly = "0 0 * * *"

func TestHTTPTaskCreateReadUpdateDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startHTTP(t, nil)
	task := HTTPTask{
		Code: "billing.ping", Spec: hourly, Zone: "Asia/Shanghai",
		Target: HTTPTarget{
			Method: "POST", URL: "http://127.0.0.1:9/ping",
			Headers: []HTTPHeader{
				{Name: "Content-Type", Value: "application/json"},
				{Name: "Authorization", Value: "Bearer s3cret", Secret: true},
			},
			Body: `{"a":1}`, SuccessCodes: []int{200, 202}, Secret: "sign-me",
		},
		MaxAttempts: 3, BackoffBase: 2 * time.Second, Overlap: OverlapBufferOne,
		Misfire: MisfireRunAll, MisfireWindow: 10 * time.Minute, MaxRuns: 5, EndAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	require.NoError(t, s.CreateHTTPTask(ctx, task))

	got, err := s.HTTPTask(ctx, "billing.ping")
	require.NoError(t, err)
	want := task
	want.Name = "billing.ping"
	want.Dialect = DialectCron
	want.Timeout = DefaultHTTPTimeout
	want.BackoffMax = DefaultBackoffMax
	want.MaxConcurrent = DefaultHTTPTaskConcurrency
	want.Target.Headers = []HTTPHeader{{Name: "Content-Type", Value: "application/json"}, {Name: "Authorization", Value: Masked, Secret: true}}
	want.Target.Secret = Masked
	require.Equal(t, want, got)

	// The row holds the secrets; reads never do.
	row, err := s.store.Task(ctx, s.App(), "billing.ping")
	require.NoError(t, err)
	require.Equal(t, store.KindHTTP, row.Kind)
	require.Contains(t, *row.HTTPTarget, "Bearer s3cret")
	require.Contains(t, *row.HTTPTarget, "sign-me")

	// An update that sends the masked values back keeps the secrets, and
	// clears a console override of the schedule.
	require.NoError(t, s.SetSchedule(ctx, "billing.ping", "0 9 * * *", "", ""))
	require.NoError(t, s.Pause(ctx, "billing.ping"))
	upd := got
	upd.Target.URL = "http://127.0.0.1:9/v2"
	upd.Target.Body = `{"a":2}`
	upd.MaxConcurrent = 3
	require.NoError(t, s.UpdateHTTPTask(ctx, upd))
	row2, err := s.store.Task(ctx, s.App(), "billing.ping")
	require.NoError(t, err)
	require.Greater(t, row2.Version, row.Version)
	require.Nil(t, row2.SpecOverride)
	require.Equal(t, store.TaskPaused, row2.Status, "an update keeps the status")
	var sp httpSpec
	require.NoError(t, json.Unmarshal([]byte(*row2.HTTPTarget), &sp))
	require.Equal(t, "Bearer s3cret", sp.Headers[1].Value)
	require.Equal(t, "sign-me", sp.Secret)
	require.Equal(t, "http://127.0.0.1:9/v2", sp.URL)
	require.Equal(t, 3, sp.MaxConcurrent)
	got2, err := s.HTTPTask(ctx, "billing.ping")
	require.NoError(t, err)
	require.True(t, got2.Paused)
	require.Equal(t, `{"a":2}`, got2.Target.Body)

	// A new secret value replaces the old one.
	upd.Target.Headers[1].Value = "Bearer n3w"
	require.NoError(t, s.UpdateHTTPTask(ctx, upd))
	row3, err := s.store.Task(ctx, s.App(), "billing.ping")
	require.NoError(t, err)
	require.Contains(t, *row3.HTTPTarget, "Bearer n3w")

	// Duplicates, of an HTTP task and of a Go task.
	require.ErrorIs(t, s.CreateHTTPTask(ctx, task), ErrDuplicateTask)
	require.NoError(t, s.Register("go.task", hourly, func(context.Context, *Run) error { return nil }))
	dup := task
	dup.Code = "go.task"
	require.ErrorIs(t, s.CreateHTTPTask(ctx, dup), ErrDuplicateTask)
	require.ErrorIs(t, s.Register("billing.ping", hourly, func(context.Context, *Run) error { return nil }), ErrDuplicateTask)

	// A Go task is not an HTTP task.
	require.ErrorIs(t, s.DeleteTask(ctx, "go.task"), ErrNotHTTPTask)
	require.ErrorIs(t, s.UpdateHTTPTask(ctx, dup), ErrNotHTTPTask)
	_, err = s.HTTPTask(ctx, "go.task")
	require.ErrorIs(t, err, ErrNotHTTPTask)
	missing := task
	missing.Code = "no.such"
	require.ErrorIs(t, s.UpdateHTTPTask(ctx, missing), ErrTaskNotFound)
	require.ErrorIs(t, s.DeleteTask(ctx, "no.such"), ErrTaskNotFound)

	// Delete: a manual run recorded but not started ends skipped; history stays.
	require.NoError(t, s.Resume(ctx, "billing.ping"))
	ex, err := s.store.InsertFires(ctx, []store.Execution{{App: s.App(), TaskCode: "billing.ping", RunTime: time.Now().Add(time.Hour).UnixMilli()}})
	require.NoError(t, err)
	require.NoError(t, s.DeleteTask(ctx, "billing.ping"))
	_, err = s.HTTPTask(ctx, "billing.ping")
	require.ErrorIs(t, err, ErrTaskNotFound)
	r, err := s.store.Execution(ctx, ex[0].ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusSkipped, r.Status)
	require.Equal(t, engine.ReasonDeleted, r.Reason)
	// The code is free again.
	require.NoError(t, s.CreateHTTPTask(ctx, task))
}

func TestHTTPTaskRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startHTTP(t, func(o *Options) { o.HTTPMaxBody = 100 })
	ok := func() HTTPTask {
		return HTTPTask{Code: "cb", Spec: hourly, Target: HTTPTarget{Method: "GET", URL: "http://127.0.0.1:9/"}}
	}
	cases := []struct {
		field string
		mod   func(*HTTPTask)
	}{
		{"code", func(t *HTTPTask) { t.Code = "Bad Code" }},
		{"name", func(t *HTTPTask) { t.Name = "a\x00b" }},
		{"spec", func(t *HTTPTask) { t.Spec = "0 60 * * *" }},
		{"spec", func(t *HTTPTask) { t.Spec = "0 0 12 * * MON"; t.Dialect = DialectQuartz }},
		{"dialect", func(t *HTTPTask) { t.Dialect = "unix" }},
		{"zone", func(t *HTTPTask) { t.Zone = "Mars/Olympus" }},
		{"zone", func(t *HTTPTask) { t.Zone = "Local" }},
		{"target.method", func(t *HTTPTask) { t.Target.Method = "FETCH" }},
		{"target.url", func(t *HTTPTask) { t.Target.URL = "" }},
		{"target.url", func(t *HTTPTask) { t.Target.URL = "/relative" }},
		{"target.url", func(t *HTTPTask) { t.Target.URL = "ftp://example.com/" }},
		{"target.url", func(t *HTTPTask) { t.Target.URL = "http://169.254.169.254/latest/meta-data/" }},
		{"target.url", func(t *HTTPTask) { t.Target.URL = "http://user:pw@127.0.0.1/" }},
		{"target.headers[1].name", func(t *HTTPTask) {
			t.Target.Headers = []HTTPHeader{{Name: "A", Value: "1"}, {Name: "Bad Name", Value: "x"}}
		}},
		{"target.headers[0].name", func(t *HTTPTask) { t.Target.Headers = []HTTPHeader{{Name: "X:Y", Value: "x"}} }},
		{"target.headers[0].name", func(t *HTTPTask) { t.Target.Headers = []HTTPHeader{{Name: "x-xtimer-task", Value: "x"}} }},
		{"target.headers[0].name", func(t *HTTPTask) { t.Target.Headers = []HTTPHeader{{Name: "Host", Value: "x"}} }},
		{"target.headers[0].name", func(t *HTTPTask) { t.Target.Headers = []HTTPHeader{{Name: "Content-Length", Value: "1"}} }},
		{"target.headers[0].name", func(t *HTTPTask) { t.Target.Headers = []HTTPHeader{{Name: "", Value: "1"}} }},
		{"target.headers[0].value", func(t *HTTPTask) { t.Target.Headers = []HTTPHeader{{Name: "A", Value: "1\r\nEvil: 1"}} }},
		{"target.headers[0].value", func(t *HTTPTask) { t.Target.Headers = []HTTPHeader{{Name: "A", Value: "nul\x00"}} }},
		{"target.headers[0].value", func(t *HTTPTask) { t.Target.Headers = []HTTPHeader{{Name: "A", Value: Masked, Secret: true}} }},
		{"target.body", func(t *HTTPTask) { t.Target.Body = strings.Repeat("x", 101) }},
		{"target.body", func(t *HTTPTask) {
			t.Target.Headers = []HTTPHeader{{Name: "Content-Type", Value: "application/json; charset=utf-8"}}
			t.Target.Body = `{"a":`
		}},
		{"target.success_codes[1]", func(t *HTTPTask) { t.Target.SuccessCodes = []int{200, 99} }},
		{"target.success_codes[0]", func(t *HTTPTask) { t.Target.SuccessCodes = []int{600} }},
		{"target.secret", func(t *HTTPTask) { t.Target.Secret = Masked }},
		{"timeout", func(t *HTTPTask) { t.Timeout = time.Microsecond }},
		{"timeout", func(t *HTTPTask) { t.Timeout = 2 * time.Hour }},
		{"max_attempts", func(t *HTTPTask) { t.MaxAttempts = -1 }},
		{"backoff_base", func(t *HTTPTask) { t.BackoffBase = -time.Second }},
		{"backoff_max", func(t *HTTPTask) { t.BackoffBase = time.Minute; t.BackoffMax = time.Second }},
		{"max_concurrent", func(t *HTTPTask) { t.MaxConcurrent = 1001 }},
		{"max_concurrent", func(t *HTTPTask) { t.MaxConcurrent = -1 }},
		{"overlap", func(t *HTTPTask) { t.Overlap = "sometimes" }},
		{"overlap", func(t *HTTPTask) { t.Overlap = "Buffer_One" }},
	}
	for i, c := range cases {
		task := ok()
		c.mod(&task)
		err := s.CreateHTTPTask(ctx, task)
		var fe *FieldError
		require.ErrorAs(t, err, &fe, "case %d (%s)", i, c.field)
		require.Equal(t, c.field, fe.Field, "case %d: %v", i, err)
		require.True(t, strings.HasPrefix(err.Error(), `xtimer: http task "`), err.Error())
		if c.field == "spec" || c.field == "zone" {
			var se *SpecError
			require.ErrorAs(t, err, &se, "case %d", i)
		}
		t.Logf("%s: %v", c.field, err)
	}
	task := ok()
	task.Target.Method = "FETCH"
	require.EqualError(t, s.CreateHTTPTask(ctx, task), `xtimer: http task "cb": target.method "FETCH": want one of GET, POST, PUT, PATCH, DELETE`)
	task = ok()
	task.Target.URL = "http://169.254.169.254/"
	err := s.CreateHTTPTask(ctx, task)
	require.ErrorIs(t, err, executor.ErrForbiddenDestination)
	require.EqualError(t, err, `xtimer: http task "cb": target.url "http://169.254.169.254/": forbidden destination: 169.254.169.254 is link-local (cloud metadata)`,
		"the URL is named once, with the executor's reason")
	var urlErr *executor.URLError
	require.ErrorAs(t, err, &urlErr, "the executor's error is the cause")
	require.Equal(t, "http://169.254.169.254/", urlErr.URL)
	var urlField *FieldError
	require.ErrorAs(t, err, &urlField)
	require.Equal(t, urlErr.Reason, urlField.Reason)

	// Nothing was stored by any of them.
	tasks, err := s.store.Tasks(ctx, s.App())
	require.NoError(t, err)
	require.Empty(t, tasks)

	// A secret value never appears in an error.
	task = ok()
	task.Target.Headers = []HTTPHeader{{Name: "Authorization", Value: "Bearer top\nsecret", Secret: true}}
	err = s.CreateHTTPTask(ctx, task)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "top")

	// Update checks the same way, and stores nothing either.
	require.NoError(t, s.CreateHTTPTask(ctx, ok()))
	before, err := s.store.Task(ctx, s.App(), "cb")
	require.NoError(t, err)
	task = ok()
	task.Timeout = -time.Second
	var fe *FieldError
	require.ErrorAs(t, s.UpdateHTTPTask(ctx, task), &fe)
	require.Equal(t, "timeout", fe.Field)
	after, err := s.store.Task(ctx, s.App(), "cb")
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func TestHTTPOptionsAreValidated(t *testing.T) {
	t.Parallel()
	db := testsvc.SQLite(t)
	for _, c := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.HTTPWorkers = -1 }, "Options.HTTPWorkers"},
		{func(o *Options) { o.HTTPMaxBody = 2 << 20 }, "Options.HTTPMaxBody"},
		{func(o *Options) { o.HTTPAllow = []string{"10.0.0.0/33"} }, `xtimer: Options.HTTPAllow[0] = "10.0.0.0/33": not a CIDR`},
		{func(o *Options) { o.HTTPAllow = []string{"10.0.0.0/8", "169.254.169.254"} },
			`xtimer: Options.HTTPAllow[1] = "169.254.169.254": is link-local (cloud metadata) and is never called`},
	} {
		opts := Options{DB: db}
		c.mod(&opts)
		_, err := New(opts)
		require.ErrorContains(t, err, c.want)
		var optErr *OptionsError
		require.ErrorAs(t, err, &optErr)
	}
	s, err := New(Options{DB: db, HTTPSigningSecret: "k"})
	require.NoError(t, err)
	require.Equal(t, DefaultHTTPWorkers, s.Options().HTTPWorkers)
	require.Equal(t, DefaultHTTPMaxBody, s.Options().HTTPMaxBody)
}

func TestNewNamesTheBadHTTPAllowEntryAndKeepsTheExecutorsError(t *testing.T) {
	t.Parallel()
	_, err := New(Options{DB: testsvc.SQLite(t), HTTPAllow: []string{"billing.internal", "fe80::1%eth0"}})
	require.EqualError(t, err, `xtimer: Options.HTTPAllow[1] = "fe80::1%eth0": an IP has no zone`)
	var optErr *OptionsError
	require.ErrorAs(t, err, &optErr)
	require.Equal(t, "HTTPAllow[1]", optErr.Field)
	require.Equal(t, `"fe80::1%eth0"`, optErr.Value)
	require.Equal(t, "an IP has no zone", optErr.Reason)
	var allowErr *executor.AllowError
	require.ErrorAs(t, err, &allowErr, "the executor's error is the cause")
	require.Equal(t, 1, allowErr.Index)
	require.Equal(t, "fe80::1%eth0", allowErr.Entry)
}

// runOnce triggers a manual run of code and returns its row once final.
func runOnce(t *testing.T, s *Scheduler, code string) store.Execution {
	t.Helper()
	ex, err := s.Trigger(context.Background(), code)
	require.NoError(t, err)
	return waitRow(t, s, ex.ID, func(r store.Execution) bool { return Status(r.Status).Final() })
}

// Issue 25, hole 5: without an explicit allow, an HTTP task may not call
// the scheduler's own host (the console's API, Redis), in any spelling of
// loopback: refused when the task is saved, and when a replica without the
// allow runs a task saved by one that has it.
func TestHTTPTaskToLoopbackIsRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.SQLite(t)
	app := testsvc.App(t)
	fenced := newScheduler(t, setupOpts{db: db, app: app}, nil)
	for url, why := range map[string]string{
		"http://127.0.0.1:8080/xtimer/api/tasks":       "forbidden destination: 127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it (127.0.0.1, ::1, localhost or a CIDR holding it)",
		"http://localhost:6379/":                       "forbidden destination: localhost is a loopback name, refused unless HTTPOptions.Allow lists it",
		"http://[::ffff:7f00:1]:8080/xtimer/api/tasks": "forbidden destination: 127.0.0.1 is loopback",
		"http://[::1]:8080/xtimer/api/tasks":           "forbidden destination: ::1 is loopback",
		"http://0.0.0.0:8080/xtimer/api/tasks":         "forbidden destination: 0.0.0.0 is unspecified",
		"http://168.63.129.16/machine":                 "forbidden destination: 168.63.129.16 is a cloud metadata address",
		"http://[::a9fe:a9fe]/latest/meta-data/":       "(IPv4-compatible form of 169.254.169.254)",
	} {
		err := fenced.CreateHTTPTask(ctx, HTTPTask{Code: "rebind.task", Spec: hourly, Paused: true, Target: HTTPTarget{Method: "POST", URL: url}})
		require.ErrorIs(t, err, executor.ErrForbiddenDestination, url)
		var fe *FieldError
		require.ErrorAs(t, err, &fe, url)
		require.Equal(t, "target.url", fe.Field, url)
		require.Equal(t, fmt.Sprintf(`xtimer: http task "rebind.task": target.url %q: %s`, url, fe.Reason), err.Error(), "the URL and the reason")
		require.Contains(t, fe.Reason, why, url)
	}

	rc := newReceiver(t, nil)
	allowed := newScheduler(t, setupOpts{db: db, app: app}, allowLoopback)
	require.NoError(t, allowed.Start(ctx))
	require.NoError(t, allowed.CreateHTTPTask(ctx, HTTPTask{Code: "cb.local", Spec: hourly, Target: HTTPTarget{Method: "GET", URL: rc.URL + "/hook"}}))
	require.NoError(t, allowed.Stop(ctx))
	require.NoError(t, fenced.Start(ctx))
	stopOnCleanup(t, fenced)
	row := runOnce(t, fenced, "cb.local")
	require.Equal(t, store.StatusFailed, row.Status)
	require.Contains(t, row.Error, "127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it")
	require.Empty(t, rc.requests(), "nothing reached the receiver")
}

func TestHTTPTaskSendsTheRequestAsDescribedAndSigned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startHTTP(t, func(o *Options) { o.HTTPSigningSecret = "fleet-key" })
	rc := newReceiver(t, nil)
	for i, m := range httpMethods {
		code := "cb." + strings.ToLower(m)
		body := fmt.Sprintf(`{"n":%d,"text":"héllo\n"}`, i)
		task := HTTPTask{Code: code, Spec: hourly, Target: HTTPTarget{
			Method: m, URL: rc.URL + "/hook/" + m + "?q=1",
			Headers: []HTTPHeader{
				{Name: "Content-Type", Value: "application/json"},
				{Name: "X-Trace", Value: "a"}, {Name: "X-Trace", Value: "b"},
				{Name: "Authorization", Value: "Bearer tok", Secret: true},
			},
			Body: body,
		}}
		if m == "PUT" {
			task.Target.Secret = "own-key" // the task's own secret wins
		}
		require.NoError(t, s.CreateHTTPTask(ctx, task))
		row := runOnce(t, s, code)
		require.Equal(t, store.StatusSucceeded, row.Status, row.Error)
		require.Equal(t, 200, row.HTTPStatus)
		require.Regexp(t, `^HTTP 200 OK in \d+ ms\nok$`, row.Output)

		got := rc.requests()
		req := got[len(got)-1]
		require.Equal(t, m, req.Method)
		require.Equal(t, body, req.Body, "body byte for byte")
		require.Equal(t, "application/json", req.Header.Get("Content-Type"))
		require.Equal(t, []string{"a", "b"}, req.Header.Values("X-Trace"))
		require.Equal(t, "Bearer tok", req.Header.Get("Authorization"))
		require.Equal(t, strconv.FormatInt(row.ID, 10), req.Header.Get(HeaderExecution))
		require.Equal(t, code, req.Header.Get(HeaderTask))
		require.Equal(t, time.UnixMilli(row.RunTime).UTC().Format("2006-01-02T15:04:05.000Z"), req.Header.Get(HeaderScheduledAt))
		require.Equal(t, "1", req.Header.Get(HeaderAttempt))
		ts, err := strconv.ParseInt(req.Header.Get(HeaderTimestamp), 10, 64)
		require.NoError(t, err)
		key := "fleet-key"
		if m == "PUT" {
			key = "own-key"
		}
		require.True(t, executor.VerifySignature(key, req.Header.Get(HeaderSignature), ts, []byte(req.Body), time.Now(), 0), m)
		require.False(t, executor.VerifySignature("wrong", req.Header.Get(HeaderSignature), ts, []byte(req.Body), time.Now(), 0))
	}
}

// Issue 25: a signed callback carries the Standard Webhooks headers, its
// webhook-id the fire's Run.ID on every attempt (with "/shard" for a
// shard), verified by executor.VerifyWebhook at a real receiver.
func TestHTTPTaskSignsPerStandardWebhooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const fleet, own = "fleet-key", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	s := startHTTP(t, func(o *Options) { o.HTTPSigningSecret = fleet })
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "cb.signed", Spec: hourly, MaxAttempts: 2,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Target: HTTPTarget{Method: "POST", URL: rc.URL + "/signed", Body: `{"day":"today"}`, Secret: own}}))
	row := runOnce(t, s, "cb.signed")
	require.Equal(t, store.StatusSucceeded, row.Status, row.Error)
	got := rc.requests()
	require.Len(t, got, 2)
	wantID := fmt.Sprintf("%s/cb.signed/%d", s.App(), row.RunTime)
	for _, req := range got {
		require.Equal(t, wantID, req.Header.Get(HeaderWebhookID), "the Run.ID, the same on every attempt")
		require.Equal(t, req.Header.Get(HeaderTimestamp), req.Header.Get(HeaderWebhookTimestamp))
		require.NoError(t, executor.VerifyWebhook(own, req.Header, []byte(req.Body), time.Now(), 0))
		require.ErrorIs(t, executor.VerifyWebhook(fleet, req.Header, []byte(req.Body), time.Now(), 0), executor.ErrWebhookSignature, "the task's secret, not the fleet's")
		require.NotEmpty(t, req.Header.Get(HeaderSignature), "the deprecated signature is still sent")
	}

	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "cb.split", Spec: hourly, Shards: 2,
		Target: HTTPTarget{Method: "POST", URL: rc.URL + "/split", Body: "{}"}}))
	ex, err := s.Trigger(ctx, "cb.split")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(rc.requests()) == 4 }, 15*time.Second, 10*time.Millisecond)
	var ids []string
	for _, req := range rc.requests()[2:] {
		require.NoError(t, executor.VerifyWebhook(fleet, req.Header, []byte(req.Body), time.Now(), 0), "signed with Options.HTTPSigningSecret")
		require.Equal(t, fmt.Sprintf("%s/cb.split/%d/%s", s.App(), ex.RunTime.UnixMilli(), req.Header.Get(HeaderShard)), req.Header.Get(HeaderWebhookID))
		ids = append(ids, req.Header.Get(HeaderWebhookID))
	}
	require.NotEqual(t, ids[0], ids[1], "each shard has its own ID")

	// A tampered body or id fails at the receiver.
	req := rc.requests()[3]
	require.ErrorIs(t, executor.VerifyWebhook(fleet, req.Header, []byte(`{"x":1}`), time.Now(), 0), executor.ErrWebhookSignature)
	h := req.Header.Clone()
	h.Set(HeaderWebhookID, ids[0]+"x")
	require.ErrorIs(t, executor.VerifyWebhook(fleet, h, []byte(req.Body), time.Now(), 0), executor.ErrWebhookSignature)
	require.ErrorIs(t, executor.VerifyWebhook(fleet, req.Header, []byte(req.Body), time.Now().Add(10*time.Minute), 0), executor.ErrWebhookTimestamp, "replayed later")

	// A task may not set the signature headers itself.
	err = s.CreateHTTPTask(ctx, HTTPTask{Code: "cb.forged", Spec: hourly,
		Target: HTTPTarget{Method: "POST", URL: rc.URL, Headers: []HTTPHeader{{Name: "webhook-signature", Value: "v1,forged"}}}})
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.ErrorContains(t, err, "target.headers[0].name")
}

func TestHTTPTaskRetriesServerErrorsWithBackoffUntilSuccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startHTTP(t, nil)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "busy")
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "flaky", Spec: hourly, MaxAttempts: 5,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Target: HTTPTarget{Method: "POST", URL: rc.URL}}))
	row := runOnce(t, s, "flaky")
	require.Equal(t, store.StatusSucceeded, row.Status)
	require.Equal(t, 3, row.Attempt)
	require.Equal(t, 200, row.HTTPStatus)
	require.Regexp(t, `^HTTP 200 OK in \d+ ms\ndone$`, row.Output)
	got := rc.requests()
	require.Len(t, got, 3)
	for i, req := range got {
		require.Equal(t, strconv.FormatInt(row.ID, 10), req.Header.Get(HeaderExecution), "the same on every attempt")
		require.Equal(t, strconv.Itoa(i+1), req.Header.Get(HeaderAttempt))
		require.Empty(t, req.Header.Get(HeaderSignature), "no secret anywhere: unsigned")
	}

	// Out of attempts: failed, with the status and the error stored.
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "down", Spec: hourly,
		Target: HTTPTarget{Method: "GET", URL: rc.URL, SuccessCodes: []int{204}}}))
	row = runOnce(t, s, "down")
	require.Equal(t, store.StatusFailed, row.Status)
	require.Equal(t, 200, row.HTTPStatus)
	require.Equal(t, "HTTP 200 OK", row.Error)
}

func TestHTTPTaskTimeoutAndDeadReceiverAreRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startHTTP(t, nil)
	release := make(chan struct{})
	slow := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "slow", Spec: hourly, Timeout: 200 * time.Millisecond,
		Target: HTTPTarget{Method: "GET", URL: slow.URL}}))
	row := runOnce(t, s, "slow")
	require.Equal(t, store.StatusTimedOut, row.Status)
	require.Equal(t, 0, row.HTTPStatus)
	require.Contains(t, row.Error, "timeout (200ms)")
	require.InDelta(t, 200, row.DurationMs, 150)

	// A receiver that is not there: failed, with the dial error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String() + "/hook"
	require.NoError(t, ln.Close())
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "dead", Spec: hourly, Target: HTTPTarget{Method: "POST", URL: dead}}))
	row = runOnce(t, s, "dead")
	require.Equal(t, store.StatusFailed, row.Status)
	require.Equal(t, 0, row.HTTPStatus)
	require.Contains(t, row.Error, "connection refused")
	require.Equal(t, row.Error+"\n", row.Output)
}

func TestHTTPTaskStoresTheResponseCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startHTTP(t, func(o *Options) { o.MaxOutput = 200 })
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, strings.Repeat("0123456789", 100))
	})
	require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: "big", Spec: hourly,
		Target: HTTPTarget{Method: "GET", URL: rc.URL, SuccessCodes: []int{202}}}))
	row := runOnce(t, s, "big")
	require.Equal(t, store.StatusSucceeded, row.Status)
	require.Equal(t, 202, row.HTTPStatus)
	require.Regexp(t, `^HTTP 202 Accepted in \d+ ms\n0123456789`, row.Output)
	require.True(t, strings.HasSuffix(row.Output, "\n[output truncated at 200 bytes]"), row.Output)
	require.LessOrEqual(t, len(row.Output), 200)
}

func TestHTTPTaskIsAdoptedAndRunByAReplicaThatDidNotCreateIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.SQLite(t)
	app := testsvc.App(t)
	locker := NewLocalLocker(SystemClock())
	start := func(id string) *Scheduler {
		s := newScheduler(t, setupOpts{db: db, app: app}, func(o *Options) {
			allowLoopback(o)
			o.Locker = locker
			o.InstanceID = id
		})
		require.NoError(t, s.Start(ctx))
		return s
	}
	a, b := start("creator"), start("other")
	stopOnCleanup(t, b)
	rc := newReceiver(t, nil)
	require.NoError(t, a.CreateHTTPTask(ctx, HTTPTask{Code: "every.second", Spec: "* * * * * *", Target: HTTPTarget{Method: "GET", URL: rc.URL}}))
	created := time.Now()
	require.NoError(t, a.Stop(ctx))
	// Adopted at the other replica's next task sync, a tick away; how soon
	// is logged, not asserted (a loaded machine delays ticks).
	require.Eventually(t, func() bool {
		_, err := b.NextRuns("every.second", 1) // the view's schedule: ErrTaskNotFound until adopted
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "adopted by the other replica")
	t.Logf("adopted %s after creation", time.Since(created).Round(time.Millisecond))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int64
		if assert.NoError(c, db.Model(&store.Execution{}).Where("app = ? AND task_code = ? AND replica = ? AND status = ?",
			app, "every.second", "other", store.StatusSucceeded).Count(&n).Error) {
			assert.GreaterOrEqual(c, n, int64(2), "fires the other replica ran")
		}
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, b.DeleteTask(ctx, "every.second"))
}

// The executor cannot import this package, so it keeps its own copies of
// the header names; a request it sends must carry exactly these.
func TestExecutorSendsTheHeaderConstants(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	c, err := executor.NewHTTPCaller(executor.HTTPOptions{Allow: []string{"127.0.0.1"}})
	require.NoError(t, err)
	_, err = c.Do(context.Background(), executor.HTTPCall{Method: "POST", URL: rc.URL, Secret: "k", ID: "app/t/1/2", Execution: 7, Task: "t", ScheduledAt: time.Now(), Attempt: 1,
		Shard: 2, Shards: 3})
	require.NoError(t, err)
	var got []string
	for name := range rc.requests()[0].Header {
		if strings.HasPrefix(name, "X-Xtimer-") || strings.HasPrefix(name, "Webhook-") {
			got = append(got, name)
		}
	}
	want := []string{HeaderExecution, HeaderTask, HeaderScheduledAt, HeaderAttempt, HeaderShard, HeaderShards, HeaderTimestamp, HeaderSignature,
		HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature}
	for i := range want {
		require.Equal(t, http.CanonicalHeaderKey(want[i]), want[i], "constants are canonical")
	}
	require.ElementsMatch(t, want, got)
}

// percentile returns the p-th percentile (0-100) of ds, sorted in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p/100))]
}

// The promise: slow HTTP receivers never starve Go handlers, and a
// callback that waits for a worker is not dropped; its wait is lateness.
// 1,000 callbacks whose receivers take 5 s each fire at one instant, on a
// replica with 500 HTTP workers, while 20 Go tasks fire every second. A Go
// handler sharing the callbacks' workers could not start while all 500 of
// them wait on a receiver: Go handlers that ran while the receivers held
// all 500 requests tell the two apart, without a bound on time that a
// loaded machine could miss (the lateness figures are logged).
func TestSlowCallbacksDoNotStarveGoHandlers(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s of real time")
	}
	t.Parallel()
	ctx := context.Background()
	db := testsvc.Postgres(t)
	const callbacks, receivers, workers, slow = 1000, 16, 500, 5 * time.Second
	var inFlight, peak atomic.Int64
	hits := sync.Map{} // execution ID → *atomic.Int64
	var urls []string
	for range receivers {
		rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
			now := inFlight.Add(1)
			p := peak.Load()
			for now > p && !peak.CompareAndSwap(p, now) {
				p = peak.Load()
			}
			v, _ := hits.LoadOrStore(r.Header.Get(HeaderExecution), new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			time.Sleep(slow)
			inFlight.Add(-1)
		})
		urls = append(urls, rc.URL)
	}
	s := newScheduler(t, setupOpts{db: db}, func(o *Options) { allowLoopback(o); o.HTTPWorkers = workers })
	var mu sync.Mutex
	var goLate []time.Duration
	var goAt []time.Time
	var goBesideFull int // Go handlers that ran while every HTTP worker waited on a receiver
	for i := range 20 {
		require.NoError(t, s.Register(fmt.Sprintf("go.%02d", i), "* * * * * *", func(ctx context.Context, run *Run) error {
			now := time.Now()
			full := inFlight.Load() >= workers
			mu.Lock()
			goLate = append(goLate, now.Sub(run.ScheduledAt))
			goAt = append(goAt, run.ScheduledAt)
			if full {
				goBesideFull++
			}
			mu.Unlock()
			return nil
		}))
	}
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)

	// All callbacks fire at one second of every minute; the instant checked
	// is its first occurrence at least 3 s after the last task is created
	// (creating them may take long on a loaded machine; earlier occurrences
	// of tasks created first are not counted).
	began := time.Now()
	second := began.Add(20 * time.Second).Second()
	spec := fmt.Sprintf("%d * * * * *", second)
	for i := range callbacks {
		require.NoError(t, s.CreateHTTPTask(ctx, HTTPTask{Code: fmt.Sprintf("cb.%04d", i), Spec: spec, MaxConcurrent: 1,
			Timeout: time.Minute, Target: HTTPTarget{Method: "POST", URL: urls[i%receivers], Body: "{}"}}))
	}
	t.Logf("created %d http tasks in %s", callbacks, time.Since(began).Round(time.Millisecond))
	fireAt := time.Now().Add(3 * time.Second).Truncate(time.Minute).Add(time.Duration(second) * time.Second)
	for fireAt.Before(time.Now().Add(3 * time.Second)) {
		fireAt = fireAt.Add(time.Minute)
	}

	// Every callback is recorded and succeeds; none is dropped.
	var rows []store.Execution
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rows = nil
		if !assert.NoError(c, db.Where("app = ? AND task_code LIKE ? AND run_time = ?", s.App(), "cb.%", fireAt.UnixMilli()).Find(&rows).Error) {
			return
		}
		done := 0
		for _, r := range rows {
			if Status(r.Status).Final() {
				done++
			}
		}
		assert.Equal(c, callbacks, done, "callbacks final")
	}, time.Until(fireAt)+60*time.Second, 100*time.Millisecond)
	var cbLate []time.Duration
	for _, r := range rows {
		require.Equal(t, store.StatusSucceeded, r.Status, "%s: %s", r.TaskCode, r.Error)
		require.Equal(t, 200, r.HTTPStatus)
		v, ok := hits.Load(strconv.FormatInt(r.ID, 10))
		require.True(t, ok, "execution %d never reached its receiver", r.ID)
		require.Equal(t, int64(1), v.(*atomic.Int64).Load())
		cbLate = append(cbLate, time.Duration(r.LatenessMs)*time.Millisecond)
	}
	require.LessOrEqual(t, peak.Load(), int64(workers), "HTTPWorkers bounds the callbacks in flight")

	// Go handlers fired on time throughout, the seconds around the callbacks included.
	mu.Lock()
	var during []time.Duration
	for i, at := range goAt {
		if !at.Before(fireAt.Add(-time.Second)) && at.Before(fireAt.Add(2*slow)) {
			during = append(during, goLate[i])
		}
	}
	besideFull := goBesideFull
	mu.Unlock()
	require.GreaterOrEqual(t, len(during), 20*5)
	p50, p99, worst := percentile(during, 50), percentile(during, 99), percentile(during, 100)
	t.Logf("Go handlers beside %d slow callbacks: %d fires, lateness p50 %s p99 %s max %s; %d ran while all %d HTTP workers waited",
		callbacks, len(during), p50, p99, worst, besideFull, workers)
	cp50, cp99, cworst := percentile(cbLate, 50), percentile(cbLate, 99), percentile(cbLate, 100)
	t.Logf("callbacks: %d, peak in flight %d (HTTPWorkers %d), lateness p50 %s p99 %s max %s", len(cbLate), peak.Load(), workers, cp50, cp99, cworst)
	require.Equal(t, int64(workers), peak.Load(), "the callbacks filled every HTTP worker")
	// The workers are full for two slow requests' length (1,000 callbacks,
	// 500 at a time): 20 Go fires a second in that time, a second's worth
	// at least however late a loaded machine runs them.
	require.GreaterOrEqual(t, besideFull, 20, "Go handlers ran while the callbacks held every HTTP worker")
	// Half of them waited for a worker one slow request long: that wait is lateness.
	require.Greater(t, cworst, slow-time.Second)
}

// The promise: with three replicas sharing a database and Redis, each fire
// of an HTTP task reaches its receiver exactly once.
func TestHTTPCallbacksRunOnceAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("25 s of real time")
	}
	t.Parallel()
	ctx := context.Background()
	db := testsvc.Postgres(t)
	app := testsvc.App(t)
	const tasks, replicas, seconds = 100, 3, 20
	var mu sync.Mutex
	calls := map[string]int{}
	var lates []time.Duration
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		at, err := time.Parse("2006-01-02T15:04:05.000Z", r.Header.Get(HeaderScheduledAt))
		mu.Lock()
		calls[r.Header.Get(HeaderExecution)]++
		if err == nil {
			lates = append(lates, time.Since(at))
		}
		mu.Unlock()
	})
	var fleet []*Scheduler
	for i := range replicas {
		pool := db
		if i > 0 {
			pool = testsvc.Reopen(t, db)
		}
		s := newScheduler(t, setupOpts{db: pool, app: app}, func(o *Options) {
			allowLoopback(o)
			o.Redis = testsvc.Redis(t)
			o.InstanceID = fmt.Sprintf("replica-%d", i)
		})
		require.NoError(t, s.Start(ctx))
		fleet = append(fleet, s)
	}
	for k := range tasks {
		require.NoError(t, fleet[k%replicas].CreateHTTPTask(ctx, HTTPTask{Code: fmt.Sprintf("cb.%03d", k), Spec: "* * * * * *",
			Target: HTTPTarget{Method: "POST", URL: rc.URL, Body: `{"k":` + strconv.Itoa(k) + `}`, Headers: []HTTPHeader{{Name: "Content-Type", Value: "application/json"}}}}))
	}
	from := time.Now().Add(2 * time.Second).Truncate(time.Second)
	to := from.Add(seconds * time.Second)
	time.Sleep(time.Until(to))
	// Let the fires of the window be recorded and finish (a loaded machine
	// records and runs them late), then stop the fleet. Fires are recorded
	// a few seconds ahead as time goes: that no recorded row is open yet
	// does not tell that the window's last seconds are recorded.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var final int64
		if assert.NoError(c, db.Model(&store.Execution{}).Where("app = ? AND run_time >= ? AND run_time < ? AND status NOT IN ?", app,
			from.UnixMilli(), to.UnixMilli(), []string{store.StatusScheduled, store.StatusRunning, store.StatusRetrying}).Count(&final).Error) {
			assert.Equal(c, int64(tasks*seconds), final, "fires of the window recorded and final")
		}
	}, 60*time.Second, 100*time.Millisecond)
	for _, s := range fleet {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		require.NoError(t, s.Stop(stopCtx))
		cancel()
	}

	var rows []store.Execution
	require.NoError(t, db.Where("app = ? AND run_time >= ? AND run_time < ?", app, from.UnixMilli(), to.UnixMilli()).Find(&rows).Error)
	mu.Lock()
	defer mu.Unlock()
	perReplica := map[string]int{}
	dup, missing := 0, 0
	ids := map[string]bool{}
	bad := map[string]int{}
	for _, r := range rows {
		if r.Status != store.StatusSucceeded {
			bad[fmt.Sprintf("%s/%s/%q/+%ds", r.Status, r.Reason, r.Replica, (r.RunTime-from.UnixMilli())/1000)]++
		}
	}
	require.Empty(t, bad, "rows not succeeded, by status/reason/replica/second of the window")
	for _, r := range rows {
		id := strconv.FormatInt(r.ID, 10)
		ids[id] = true
		switch n := calls[id]; {
		case n == 0:
			missing++
		case n > 1:
			dup += n - 1
		}
		perReplica[r.Replica]++
	}
	stray := 0
	for id := range calls {
		if !ids[id] && id != "" {
			var r store.Execution
			if db.Where("id = ?", id).Take(&r).Error != nil {
				stray++ // a request for a row that does not exist
			}
		}
	}
	require.Len(t, rows, tasks*seconds, "one row per fire")
	require.Zero(t, dup, "duplicates")
	require.Zero(t, missing, "rows whose receiver got nothing")
	require.Zero(t, stray)
	p50, p99 := percentile(lates, 50), percentile(lates, 99)
	t.Logf("%d replicas, %d callbacks in %d s: %.0f callbacks/s, lateness at the receiver p50 %s p99 %s, by replica %v",
		replicas, len(rows), seconds, float64(len(rows))/seconds, p50, p99, perReplica)
}

// Secret read-back (issue 25, hole 2): an edit that keeps a secret header
// as the mask but points the task at a receiver the editor runs would have
// sent the stored secret there, and the signing secret would sign what it
// sends. A change of method, scheme, host or port keeps no stored secret:
// the attacker's receiver gets neither the header nor a signature by the
// task's key. Secrets sent again in the same edit are kept, and an edit
// of the path on the same origin keeps the stored ones.
func TestHTTPTaskEditToAnotherOriginKeepsNoStoredSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startHTTP(t, nil)
	owner, attacker := newReceiver(t, nil), newReceiver(t, nil)
	task := HTTPTask{Code: "billing.hook", Spec: hourly, Target: HTTPTarget{Method: "POST", URL: owner.URL + "/hook",
		Headers: []HTTPHeader{{Name: "Authorization", Value: "Bearer s3cret", Secret: true}}, Secret: "task-key"}}
	require.NoError(t, s.CreateHTTPTask(ctx, task))

	read, err := s.HTTPTask(ctx, "billing.hook")
	require.NoError(t, err)
	read.Target.URL = attacker.URL + "/steal" // the mask stays in the header and the secret
	require.NoError(t, s.UpdateHTTPTask(ctx, read))
	row := runOnce(t, s, "billing.hook")
	require.Equal(t, store.StatusSucceeded, row.Status, row.Error)
	got := attacker.requests()
	require.Len(t, got, 1)
	require.Empty(t, got[0].Header.Get("Authorization"), "the stored secret header went to the new origin")
	require.Empty(t, got[0].Header.Get(HeaderSignature), "the stored signing secret signed for the new origin")
	require.NotContains(t, row.Output, "s3cret")
	after, err := s.HTTPTask(ctx, "billing.hook")
	require.NoError(t, err)
	require.Empty(t, after.Target.Headers)
	require.Empty(t, after.Target.Secret)

	// Back to the owner with the secrets given again: kept; then a path
	// change on the same origin keeps them from the mask.
	task.Target.URL = owner.URL + "/hook"
	require.NoError(t, s.UpdateHTTPTask(ctx, task))
	read, err = s.HTTPTask(ctx, "billing.hook")
	require.NoError(t, err)
	read.Target.URL = owner.URL + "/v2"
	require.NoError(t, s.UpdateHTTPTask(ctx, read))
	runOnce(t, s, "billing.hook")
	got = owner.requests()
	require.Equal(t, "Bearer s3cret", got[len(got)-1].Header.Get("Authorization"))
	require.NotEmpty(t, got[len(got)-1].Header.Get(HeaderSignature))

	// A method change is a change of destination too.
	read, err = s.HTTPTask(ctx, "billing.hook")
	require.NoError(t, err)
	read.Target.Method = "PUT"
	require.NoError(t, s.UpdateHTTPTask(ctx, read))
	after, err = s.HTTPTask(ctx, "billing.hook")
	require.NoError(t, err)
	require.Empty(t, after.Target.Headers)
	require.Empty(t, after.Target.Secret)
}
