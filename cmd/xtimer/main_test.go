package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/admin"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "cli-test-token-0123456789"

// console is a real scheduler and its console, on an in-memory SQLite
// database, served over HTTP with a bearer token.
type console struct {
	s   *xtimer.Scheduler
	srv *httptest.Server
	env map[string]string
	ran chan string
}

func newConsole(t *testing.T) *console {
	t.Helper()
	// A file in WAL mode, as the engine's tests use: a shared-cache
	// in-memory database answers "table is locked" to a read beside a write.
	db := testsvc.SQLite(t)
	s, err := xtimer.New(xtimer.Options{DB: db, App: "cli"})
	require.NoError(t, err)
	c := &console{s: s, ran: make(chan string, 16)}
	require.NoError(t, s.Register("billing.reconcile", "0 0 9 * * *", func(ctx context.Context, run *xtimer.Run) error {
		run.Printf("reconciled %s", run.ID)
		c.ran <- run.Code
		return nil
	}, xtimer.WithOwner("payments")))
	require.NoError(t, s.Register("billing.export", "0 30 2 * * *", func(ctx context.Context, run *xtimer.Run) error {
		c.ran <- run.Code
		return errors.New("bucket not found")
	}))
	ctx := context.Background()
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(stop))
	})
	mux := http.NewServeMux()
	mux.Handle("/xtimer/", admin.Handler(s, admin.Options{Authorize: admin.BearerToken(token)}))
	c.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		c.srv.CloseClientConnections()
		c.srv.Close()
	})
	c.env = map[string]string{"XTIMER_SERVER": c.srv.URL + "/xtimer/", "XTIMER_TOKEN": token}
	return c
}

// cli runs one command line against the console and returns its exit
// status, stdout and stderr.
func (c *console) cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return c.cliCtx(context.Background(), args...)
}

func (c *console) cliCtx(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(ctx, args, &out, &errOut, func(k string) string { return c.env[k] })
	return code, out.String(), errOut.String()
}

func TestTasksListsTheTasksAlignedAndAsJSON(t *testing.T) {
	c := newConsole(t)
	code, out, errOut := c.cli(t, "tasks")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^CODE\s+KIND\s+STATUS\s+STATE\s+SCHEDULE\s+ZONE\s+NEXT RUN\s+LAST$`, lines[0])
	assert.Regexp(t, `^billing\.export\s+func\s+active\s+scheduled\s+0 30 2 \* \* \*\s+UTC\s+\d{4}-\d\d-\d\d 02:30:00 UTC\s+-$`, lines[1])
	assert.Regexp(t, `^billing\.reconcile\s+func\s+active`, lines[2])
	// Aligned: every column starts at the same offset on every line.
	col := strings.Index(lines[0], "KIND")
	for _, l := range lines[1:] {
		assert.Equal(t, "func", l[col:col+4], "KIND column of %q", l)
	}

	code, out, errOut = c.cli(t, "tasks", "-o", "json", "-q", "reconcile")
	require.Equal(t, exitOK, code, errOut)
	var tasks []taskView
	require.NoError(t, json.Unmarshal([]byte(out), &tasks), out)
	require.Len(t, tasks, 1)
	assert.Equal(t, "billing.reconcile", tasks[0].Code)
	assert.Equal(t, "payments", tasks[0].Owner)
}

func TestPauseResumeAndStatusFilter(t *testing.T) {
	c := newConsole(t)
	code, out, errOut := c.cli(t, "pause", "billing.export")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "paused billing.export\n", out)

	code, out, _ = c.cli(t, "tasks", "-status", "paused")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "billing.export")
	assert.NotContains(t, out, "billing.reconcile")

	code, out, errOut = c.cli(t, "resume", "billing.export")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "resumed billing.export\n", out)
	code, out, _ = c.cli(t, "tasks", "-status", "paused")
	require.Equal(t, exitOK, code)
	assert.NotContains(t, out, "billing.export")
}

func TestTriggerThenReadTheExecution(t *testing.T) {
	c := newConsole(t)
	code, out, errOut := c.cli(t, "trigger", "billing.reconcile")
	require.Equal(t, exitOK, code, errOut)
	require.Regexp(t, `^triggered billing\.reconcile: execution \d+ at `, out)
	id := strings.Fields(strings.TrimPrefix(out, "triggered billing.reconcile: execution "))[0]
	require.Equal(t, "billing.reconcile", <-c.ran)

	// The result is written shortly after the handler returns: wait for it.
	var detail string
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		code, detail, errOut = c.cli(t, "execution", id)
		assert.Equal(ct, exitOK, code, errOut)
		assert.Regexp(ct, `(?m)^Status\s+succeeded$`, detail)
	}, 10*time.Second, 20*time.Millisecond)
	assert.Regexp(t, `(?m)^Source\s+manual$`, detail)
	assert.Regexp(t, `(?m)^Attempt\s+1 of 1$`, detail)
	assert.Contains(t, detail, "\nOutput:\nreconciled cli/billing.reconcile/")

	code, out, errOut = c.cli(t, "executions", "-task", "billing.reconcile")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^`+id+`\s+billing\.reconcile\s+\S+ \S+ UTC\s+succeeded\s+manual\s+1/1\s`, out)
}

// retry gives a failed execution one more attempt; a succeeded one is
// refused with the API's message.
func TestRetryAFailedExecution(t *testing.T) {
	c := newConsole(t)
	code, out, errOut := c.cli(t, "trigger", "billing.export")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "billing.export", <-c.ran)
	id := strings.Fields(strings.TrimPrefix(out, "triggered billing.export: execution "))[0]
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		status, detail, stderr := c.cli(t, "execution", id)
		assert.Equal(ct, exitOK, status, stderr)
		assert.Regexp(ct, `(?m)^Status\s+failed$`, detail)
	}, 10*time.Second, 20*time.Millisecond)

	code, out, errOut = c.cli(t, "retry", id)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "retrying execution "+id+" of billing.export: attempt 2 of 2\n", out)
	require.Equal(t, "billing.export", <-c.ran, "the retry runs")

	code, out, errOut = c.cli(t, "trigger", "billing.reconcile")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "billing.reconcile", <-c.ran)
	ok := strings.Fields(strings.TrimPrefix(out, "triggered billing.reconcile: execution "))[0]
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		status, detail, stderr := c.cli(t, "execution", ok)
		assert.Equal(ct, exitOK, status, stderr)
		assert.Regexp(ct, `(?m)^Status\s+succeeded$`, detail)
	}, 10*time.Second, 20*time.Millisecond)
	code, _, errOut = c.cli(t, "retry", ok)
	assert.Equal(t, exitAPI, code)
	assert.Contains(t, errOut, "is succeeded: want failed or timed_out")
}

func TestExecutionsFollowPrintsNewOnesUntilInterrupted(t *testing.T) {
	c := newConsole(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &testsvc.LogBuffer{}
	done := make(chan int)
	go func() {
		var errOut bytes.Buffer
		done <- run(ctx, []string{"executions", "-follow", "-task", "billing.export", "-o", "json"}, out, &errOut,
			func(k string) string { return c.env[k] })
	}()
	code, _, errOut := c.cli(t, "trigger", "billing.export")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "billing.export", <-c.ran)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Contains(ct, out.String(), `"status":"failed"`)
	}, 20*time.Second, 50*time.Millisecond)
	cancel()
	assert.Equal(t, exitOK, <-done, "an interrupted follow ends without error")
	var last executionView
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	assert.Equal(t, "failed", last.Status)
	assert.Equal(t, "bucket not found", last.ErrorHead)
}

func TestScheduleAndPreview(t *testing.T) {
	c := newConsole(t)
	code, out, errOut := c.cli(t, "schedule", "billing.reconcile", "0 0 12 ? * 6L", "-quartz", "-zone", "Europe/Paris")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "billing.reconcile now runs 0 0 12 ? * 6L (quartz, Europe/Paris): at 12:00 on the last Friday of the month, Europe/Paris\n", out)

	code, out, errOut = c.cli(t, "preview", "-n", "2", "-zone", "Asia/Tokyo", "0 30 9 * * 1-5")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.True(t, strings.HasPrefix(lines[0], "0 30 9 * * 1-5 (cron, Asia/Tokyo): "), lines[0])
	assert.Regexp(t, `^\d{4}-\d\d-\d\d 09:30:00 JST$`, lines[1])

	// A bad spec: the API's message, naming the field, and exit 1.
	code, _, errOut = c.cli(t, "preview", "0 60 * * *")
	assert.Equal(t, exitAPI, code)
	assert.Contains(t, errOut, `hour field "60": value 60 out of range 0-23`)
}

func TestReplicasHealthAndTask(t *testing.T) {
	c := newConsole(t)
	code, out, errOut := c.cli(t, "replicas")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^`+c.s.InstanceID()+`\s+\S+\s+\d+\s+-\s+true\s`, out)

	code, out, errOut = c.cli(t, "health")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^db\s+true\s`, out)

	code, out, errOut = c.cli(t, "task", "billing.reconcile", "-zone", "UTC")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^Owner\s+payments$`, out)
	assert.Regexp(t, `(?m)^Schedule\s+0 0 9 \* \* \* \(cron, UTC\): `, out)
}

func TestErrorsAndExitCodes(t *testing.T) {
	c := newConsole(t)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		code int
		err  string
	}{
		{"no command", nil, nil, exitUsage, "Usage: xtimer COMMAND"},
		{"unknown command", []string{"list"}, nil, exitUsage, `unknown command "list"`},
		{"missing argument", []string{"pause"}, nil, exitUsage, "want 1 argument(s) (CODE), got 0"},
		{"bad output", []string{"tasks", "-o", "yaml"}, nil, exitUsage, `-o "yaml": want table or json`},
		{"bad zone", []string{"tasks", "-zone", "Mars/Olympus"}, nil, exitUsage, `-zone "Mars/Olympus"`},
		{"bad flag", []string{"tasks", "-colour"}, nil, exitUsage, "flag provided but not defined: -colour"},
		{"bad execution id", []string{"execution", "abc"}, nil, exitUsage, `ID "abc": want an execution's number`},
		{"bad retry id", []string{"retry", "0"}, nil, exitUsage, `ID "0": want an execution's number`},
		{"unknown execution retried", []string{"retry", "99999999"}, nil, exitAPI, "execution 99999999"},
		{"bad server", []string{"tasks", "-server", "ftp://x"}, nil, exitUsage, `-server "ftp://x"`},
		{"unknown task", []string{"pause", "no.such.task"}, nil, exitAPI, "no.such.task"},
		{"wrong token", []string{"tasks", "-token", "wrong-token-wrong-token"}, nil, exitAPI, "HTTP 401"},
		{"no server", []string{"tasks", "-server", "http://127.0.0.1:1/xtimer/"}, nil, exitAPI, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := c.cli(t, tc.args...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.err)
		})
	}
}

func TestTokenFile(t *testing.T) {
	c := newConsole(t)
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(token+"\n"), 0o600))
	c.env["XTIMER_TOKEN"] = ""
	code, _, errOut := c.cli(t, "tasks")
	require.Equal(t, exitAPI, code, "no token: refused")
	assert.Contains(t, errOut, "401")
	code, out, errOut := c.cli(t, "tasks", "-token-file", path)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "billing.reconcile")
}
