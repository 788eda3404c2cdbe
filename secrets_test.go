package xtimer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

func newSecretKey(t *testing.T, id string) SecretKey {
	t.Helper()
	k := SecretKey{ID: id, Key: make([]byte, 32)}
	_, err := rand.Read(k.Key)
	require.NoError(t, err)
	return k
}

// secretTask is an HTTP task with a secret header and a signing secret,
// calling rc (allowed explicitly: loopback callbacks are refused by
// default).
func secretTask(code string, rc *receiver) HTTPTask {
	return HTTPTask{Code: code, Spec: hourly, MaxAttempts: 3, BackoffBase: time.Millisecond, Target: HTTPTarget{
		Method: "POST", URL: rc.URL + "/" + code, Body: `{"a":1}`, Secret: "sign-me",
		Headers: []HTTPHeader{{Name: "Content-Type", Value: "application/json"}, {Name: "Authorization", Value: "Bearer s3cret", Secret: true}},
	}}
}

// startSecrets starts a scheduler on db with keys (none: nil), whose
// alerts land in events.
func startSecrets(t *testing.T, db *gorm.DB, keys []SecretKey, events *eventLog) *Scheduler {
	t.Helper()
	s := newScheduler(t, setupOpts{db: db}, func(o *Options) {
		o.SecretKeys, o.HTTPAllow = keys, []string{"127.0.0.1"}
		if events != nil {
			o.Notifier = events
		}
	})
	require.NoError(t, s.Start(context.Background()))
	stopOnCleanup(t, s)
	return s
}

// stopNow stops s before its cleanup does (which then does nothing).
func stopNow(t *testing.T, s *Scheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(ctx))
}

type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) Notify(_ context.Context, e Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	return nil
}

// wait returns the first event of kind, waiting for it in real time.
func (l *eventLog) wait(t *testing.T, kind EventKind) Event {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, e := range l.events {
			if e.Kind == kind {
				l.mu.Unlock()
				return e
			}
		}
		l.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s alert within 15s", kind)
	return Event{}
}

func (l *eventLog) kinds() []EventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []EventKind
	for _, e := range l.events {
		out = append(out, e.Kind)
	}
	return out
}

// storedSpec reads the task's row as stored.
func storedSpec(t *testing.T, s *Scheduler, code string) (string, httpSpec) {
	t.Helper()
	row, err := s.store.Task(context.Background(), s.App(), code)
	require.NoError(t, err)
	var sp httpSpec
	require.NoError(t, json.Unmarshal([]byte(*row.HTTPTarget), &sp))
	return *row.HTTPTarget, sp
}

// runNow triggers code and waits for its execution's final row.
func runNow(t *testing.T, s *Scheduler, code string) store.Execution {
	t.Helper()
	e, err := s.Trigger(context.Background(), code)
	require.NoError(t, err)
	return waitRow(t, s, e.ID, func(r store.Execution) bool { return r.FinishedMs != 0 && r.Status != store.StatusRetrying })
}

func TestHTTPTaskSecretsAreStoredEncryptedAndSentDecrypted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := newReceiver(t, nil)
	s := startSecrets(t, testsvc.SQLite(t), []SecretKey{newSecretKey(t, "k1")}, nil)
	require.NoError(t, s.CreateHTTPTask(ctx, secretTask("billing.ping", rc)))

	raw, sp := storedSpec(t, s, "billing.ping")
	require.NotContains(t, raw, "s3cret")
	require.NotContains(t, raw, "sign-me")
	require.True(t, strings.HasPrefix(sp.Headers[1].Value, "xtenc:v1:k1:"), sp.Headers[1].Value)
	require.True(t, strings.HasPrefix(sp.Secret, "xtenc:v1:k1:"), sp.Secret)
	require.Equal(t, "application/json", sp.Headers[0].Value, "only secrets are encrypted")
	got, err := s.HTTPTask(ctx, "billing.ping")
	require.NoError(t, err)
	require.Equal(t, Masked, got.Target.Headers[1].Value)
	require.Equal(t, Masked, got.Target.Secret)

	r := runNow(t, s, "billing.ping")
	require.Equal(t, store.StatusSucceeded, r.Status, r.Error)
	reqs := rc.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "Bearer s3cret", reqs[0].Header.Get("Authorization"))
	require.NoError(t, executor.VerifyWebhook("sign-me", reqs[0].Header, []byte(reqs[0].Body), time.Now(), time.Minute))

	// An edit that keeps the secrets keeps their ciphertext; a new value
	// is encrypted; a value that looks encrypted is refused.
	got.Target.Body = `{"a":2}`
	got.Target.Secret = "sign-me-too"
	require.NoError(t, s.UpdateHTTPTask(ctx, got))
	raw2, sp2 := storedSpec(t, s, "billing.ping")
	require.Equal(t, sp.Headers[1].Value, sp2.Headers[1].Value)
	require.True(t, strings.HasPrefix(sp2.Secret, "xtenc:v1:k1:"))
	require.NotContains(t, raw2, "sign-me-too")
	got.Target.Headers[1].Value = "xtenc:v1:k1:AAAA"
	err = s.UpdateHTTPTask(ctx, got)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "target.headers[1].value", fe.Field)
	require.NotContains(t, err.Error(), "AAAA")

	r = runNow(t, s, "billing.ping")
	require.Equal(t, store.StatusSucceeded, r.Status, r.Error)
	reqs = rc.requests()
	require.Len(t, reqs, 2)
	require.Equal(t, "Bearer s3cret", reqs[1].Header.Get("Authorization"))
	require.NoError(t, executor.VerifyWebhook("sign-me-too", reqs[1].Header, []byte(reqs[1].Body), time.Now(), time.Minute))
}

// refusal checks that execution r was refused for its task's secrets on
// this replica: failed without a retry, nothing sent, the reason and the
// key ID recorded, never a value.
func requireRefused(t *testing.T, r store.Execution, code, keyID, why string, rc *receiver, events *eventLog) {
	t.Helper()
	require.Equal(t, store.StatusFailed, r.Status)
	require.Equal(t, "secret undecryptable", r.Reason)
	require.Equal(t, 1, r.Attempt, "not retried")
	require.Contains(t, r.Error, `http task "`+code+`"`)
	require.Contains(t, r.Error, `key "`+keyID+`"`)
	require.Contains(t, r.Error, why)
	require.Contains(t, r.Output, "refused, nothing sent")
	for _, text := range []string{r.Error, r.Output} {
		require.NotContains(t, text, "s3cret")
		require.NotContains(t, text, "sign-me")
		require.NotContains(t, text, "xtenc:v1:")
	}
	require.Empty(t, rc.requests(), "the receiver gets nothing")
	e := events.wait(t, EventSecretUndecryptable)
	require.Equal(t, code, e.Task)
	require.Equal(t, r.ID, e.ExecutionID)
	require.Equal(t, r.Error, e.Error)
	require.Equal(t, "secret undecryptable", e.Reason)
	require.NotContains(t, events.kinds(), EventFailed, "one alert, of its own kind")
}

func TestReplicaThatCannotDecryptRefusesTheFireAndAlerts(t *testing.T) {
	t.Parallel()
	k1 := newSecretKey(t, "k1")
	for _, c := range []struct {
		name   string
		keys   []SecretKey
		tamper bool
		why    string
	}{
		{"no key", nil, false, "has no secret keys"},
		{"unknown key id", []SecretKey{newSecretKey(t, "k2")}, false, "which replica"},
		{"another key under the same id", []SecretKey{newSecretKey(t, "k1")}, false, "does not decrypt under"},
		{"tampered value", []SecretKey{k1}, true, "altered or copied from another task"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testsvc.SQLite(t)
			rc := newReceiver(t, nil)
			writer := startSecrets(t, db, []SecretKey{k1}, nil)
			require.NoError(t, writer.CreateHTTPTask(ctx, secretTask("billing.ping", rc)))
			stopNow(t, writer)
			if c.tamper {
				row, err := writer.store.Task(ctx, writer.App(), "billing.ping")
				require.NoError(t, err)
				var sp httpSpec
				require.NoError(t, json.Unmarshal([]byte(*row.HTTPTarget), &sp))
				v := []byte(sp.Headers[1].Value)
				v[len(v)-3] ^= 'A' ^ 'B' // a base64 character of the tag
				if v[len(v)-3] == '=' || !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", rune(v[len(v)-3])) {
					v[len(v)-3] = 'A'
				}
				sp.Headers[1].Value = string(v)
				b, err := json.Marshal(sp)
				require.NoError(t, err)
				require.NoError(t, db.Model(&store.Task{}).Where("code = ?", "billing.ping").Update("http_target", string(b)).Error)
			}

			events := &eventLog{}
			s := startSecrets(t, db, c.keys, events)
			r := runNow(t, s, "billing.ping")
			requireRefused(t, r, "billing.ping", "k1", c.why, rc, events)
		})
	}
}

// A ciphertext copied into another task's row does not decrypt there:
// it is bound to the task (and field) it was written for.
func TestSecretCopiedToAnotherTaskDoesNotDecrypt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := newReceiver(t, nil)
	events := &eventLog{}
	db := testsvc.SQLite(t)
	k1 := newSecretKey(t, "k1")
	writer := startSecrets(t, db, []SecretKey{k1}, nil)
	require.NoError(t, writer.CreateHTTPTask(ctx, secretTask("billing.ping", rc)))
	theirs := secretTask("attacker.echo", rc)
	theirs.Target.Headers[1].Value = "Bearer mine"
	require.NoError(t, writer.CreateHTTPTask(ctx, theirs))
	_, victim := storedSpec(t, writer, "billing.ping")
	_, copied := storedSpec(t, writer, "attacker.echo")
	stopNow(t, writer)

	copied.Headers[1].Value = victim.Headers[1].Value
	b, err := json.Marshal(copied)
	require.NoError(t, err)
	require.NoError(t, db.Model(&store.Task{}).Where("code = ?", "attacker.echo").Update("http_target", string(b)).Error)

	s := startSecrets(t, db, []SecretKey{k1}, events)
	r := runNow(t, s, "attacker.echo")
	requireRefused(t, r, "attacker.echo", "k1", "copied from another task", rc, events)
}

func TestStartReencryptsSecretsUnderTheFirstKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := newReceiver(t, nil)
	db := testsvc.SQLite(t)
	k1, k2 := newSecretKey(t, "k1"), newSecretKey(t, "k2")
	old := startSecrets(t, db, []SecretKey{k1}, nil)
	require.NoError(t, old.CreateHTTPTask(ctx, secretTask("billing.ping", rc)))
	_, before := storedSpec(t, old, "billing.ping")
	stopNow(t, old)

	rotated := startSecrets(t, db, []SecretKey{k2, k1}, nil)
	raw, after := storedSpec(t, rotated, "billing.ping")
	require.NotContains(t, raw, "xtenc:v1:k1:")
	require.True(t, strings.HasPrefix(after.Headers[1].Value, "xtenc:v1:k2:"))
	require.True(t, strings.HasPrefix(after.Secret, "xtenc:v1:k2:"))
	require.NotEqual(t, before.Headers[1].Value, after.Headers[1].Value)
	stopNow(t, rotated)

	// The old key can go: the new one alone decrypts.
	events := &eventLog{}
	s := startSecrets(t, db, []SecretKey{k2}, events)
	r := runNow(t, s, "billing.ping")
	require.Equal(t, store.StatusSucceeded, r.Status, r.Error)
	reqs := rc.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "Bearer s3cret", reqs[0].Header.Get("Authorization"))
	require.NoError(t, executor.VerifyWebhook("sign-me", reqs[0].Header, []byte(reqs[0].Body), time.Now(), time.Minute))
}

// Start encrypts the secrets stored in plaintext, one conditional write
// per task: an edit that lands between its read and its write wins, and
// a write that missed only because the version moved (a pause) is made
// again.
func TestStartEncryptsPlaintextSecretsAndAConcurrentEditWins(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		rc := newReceiver(t, nil)
		var logs bytes.Buffer
		var logMu sync.Mutex
		plain := newScheduler(t, setupOpts{db: db}, func(o *Options) {
			o.HTTPAllow = []string{"127.0.0.1"}
			o.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
		})
		require.NoError(t, plain.Start(ctx))
		stopOnCleanup(t, plain)
		for _, code := range []string{"a.quiet", "b.edited", "c.paused"} {
			require.NoError(t, plain.CreateHTTPTask(ctx, secretTask(code, rc)))
		}
		raw, _ := storedSpec(t, plain, "a.quiet")
		require.Contains(t, raw, "Bearer s3cret", "no key: plaintext")
		logMu.Lock()
		require.Equal(t, 1, strings.Count(logs.String(), "stored in plaintext"), "warned once:\n%s", logs.String())
		logMu.Unlock()
		stopNow(t, plain)

		// Just before the write of b, an edit by a replica without keys
		// changes its secret; just before c's, a pause moves its version.
		var once sync.Map // codes interleaved with already
		require.NoError(t, db.Callback().Update().Before("gorm:begin_transaction").Register("test:interleave", func(tx *gorm.DB) {
			set, ok := tx.Statement.Dest.(map[string]any)
			if !ok || set["http_target"] == nil || tx.Statement.Table != "xtimer_tasks" {
				return
			}
			target, _ := set["http_target"].(string)
			if !strings.Contains(target, "xtenc:") {
				return
			}
			var sp httpSpec
			require.NoError(t, json.Unmarshal([]byte(target), &sp))
			code := sp.URL[strings.LastIndexByte(sp.URL, '/')+1:] // secretTask's URL ends with the code
			if _, done := once.LoadOrStore(code, true); done {
				return
			}
			edit := db.Session(&gorm.Session{NewDB: true, SkipHooks: true}).Model(&store.Task{}).Where("code = ?", code)
			switch code {
			case "b.edited":
				_, sp := storedSpec(t, plain, code)
				sp.Headers[1].Value = "Bearer edited"
				b, err := json.Marshal(sp)
				require.NoError(t, err)
				require.NoError(t, edit.Updates(map[string]any{"http_target": string(b), "version": gorm.Expr("version + 1")}).Error)
			case "c.paused":
				require.NoError(t, edit.Updates(map[string]any{"status": store.TaskPaused, "version": gorm.Expr("version + 1")}).Error)
			}
		}))
		t.Cleanup(func() { _ = db.Callback().Update().Remove("test:interleave") })

		s := startSecrets(t, db, []SecretKey{newSecretKey(t, "k1")}, nil)
		for _, code := range []string{"a.quiet", "b.edited", "c.paused"} {
			_, hit := once.Load(code)
			require.True(t, hit, "Start wrote %s", code)
		}
		for _, code := range []string{"a.quiet", "c.paused"} {
			raw, sp := storedSpec(t, s, code)
			require.NotContains(t, raw, "s3cret", code)
			require.NotContains(t, raw, "sign-me", code)
			require.True(t, strings.HasPrefix(sp.Headers[1].Value, "xtenc:v1:k1:"), code)
		}
		_, sp := storedSpec(t, s, "b.edited")
		require.Equal(t, "Bearer edited", sp.Headers[1].Value, "the edit won")

		r := runNow(t, s, "b.edited")
		require.Equal(t, store.StatusSucceeded, r.Status, r.Error)
		r = runNow(t, s, "a.quiet")
		require.Equal(t, store.StatusSucceeded, r.Status, r.Error)
		reqs := rc.requests()
		require.Len(t, reqs, 2)
		require.Equal(t, "Bearer edited", reqs[0].Header.Get("Authorization"))
		require.Equal(t, "Bearer s3cret", reqs[1].Header.Get("Authorization"))
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
