package xtimer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/engine"
)

// This file is what an operator is told: the events (Event, EventKind),
// where they go (Notifier), and the two notifiers xtimer ships, a log and a
// signed JSON webhook. How events are damped and sent once across the
// replicas is internal/engine/alert.go.

// EventKind names what happened.
type EventKind = engine.EventKind

// The events. Each is sent by one replica, at most once per AlertWindow
// for a kind and subject (the task, or the replica for EventReplicaLost),
// with the count of what was damped in between (Event.Suppressed).
const (
	// EventFailed: an execution failed after its last attempt.
	EventFailed EventKind = "execution.failed"
	// EventTimedOut: an execution's last attempt ran past its timeout.
	EventTimedOut EventKind = "execution.timed_out"
	// EventSkipped: a fire did not run because it was overdue (misfire) or
	// its task was still running (overlap forbidden). Fires skipped by an
	// operator's doing (a pause, a schedule edit, a deleted task) are not
	// alerted: the operator knows.
	EventSkipped EventKind = "execution.skipped"
	// EventLate: an attempt started more than Options.AlertLateAfter after
	// it was due.
	EventLate EventKind = "task.late"
	// EventSilent: the dead man's switch. The task's last
	// Options.AlertMissedRuns fires passed without a success: they failed,
	// were skipped, or never ran because no replica runs the task.
	EventSilent EventKind = "task.silent"
	// EventReplicaLost: a replica stopped heart-beating without stopping;
	// its running executions are settled by their retry policy.
	EventReplicaLost EventKind = "replica.lost"
	// EventFallbackEntered: a replica cannot reach the slot lock (Redis)
	// and claims slots through the database's unique key alone.
	EventFallbackEntered EventKind = "redis.fallback_entered"
	// EventFallbackLeft: the slot lock is reachable again.
	EventFallbackLeft EventKind = "redis.fallback_left"
	// EventTaskPaused: WithPauseOnFailure paused the task after its last
	// Missed scheduled fires failed; ExecutionID, ScheduledAt and Error
	// are the last of them, and Message carries the note stored with the
	// task. Sent once per pause, by the replica whose update paused it.
	EventTaskPaused EventKind = "task.paused"
	// EventCalendarMissing: a task names a calendar (WithCalendar) its app
	// does not have, so none of its days is excluded: the fires run. Reason
	// holds the calendar's name. It is raised as the task's fires are
	// recorded, at most once a day per task across the replicas (and
	// damped by AlertWindow), until SetCalendar creates the calendar.
	EventCalendarMissing EventKind = "calendar.missing"
	// EventSecretUndecryptable: a replica refused a fire of an HTTP task
	// because the task's stored secrets do not decrypt there (no
	// Options.SecretKeys, no key of the ID that encrypted them, a
	// different key of that ID, or a value altered or copied from another
	// task); nothing was sent. The execution is failed, not retried, with
	// reason "secret undecryptable"; Error names the task, the secret and
	// the key ID, never the value.
	EventSecretUndecryptable EventKind = "task.secret_undecryptable" //nolint:gosec // G101: an event kind, not a credential
	// EventClockSkew: the replica's clock is more than a second off the
	// database's (Options.ClockReference); ClockOffset says by how much.
	// The replica runs on the database's time meanwhile; beyond
	// Options.MaxClockSkew it claims no fire, and the alert is raised again
	// saying so. Once per episode of the offset above a second, subject
	// the replica.
	EventClockSkew EventKind = "replica.clock_skew"
)

// Event is one alert. Fields that do not apply to its Kind are zero.
type Event struct {
	// ID identifies the alert: a notifier that is retried, or an alert
	// re-sent by another replica after the first died sending it, carries
	// the same ID, on which a receiver deduplicates.
	ID   string    `json:"id"`
	Kind EventKind `json:"kind"`
	App  string    `json:"app"`
	// Task is the task's code; "" for replica and Redis events.
	Task string `json:"task,omitempty"`
	// Owner is the task's owner (WithOwner) as this replica knew it when
	// the event was raised; "" for a task without one and for replica and
	// Redis events. RouteByOwner routes on it.
	Owner string `json:"owner,omitempty"`
	// Replica is the replica that saw the event, or the lost replica.
	Replica string    `json:"replica"`
	At      time.Time `json:"at"`
	// ExecutionID, ScheduledAt and Attempt locate the execution, for the
	// execution events and EventLate.
	ExecutionID int64     `json:"execution_id,omitempty"`
	ScheduledAt time.Time `json:"scheduled_at,omitzero"`
	Attempt     int       `json:"attempt,omitempty"`
	// Reason is why a fire was skipped, or "secret undecryptable"
	// (EventSecretUndecryptable); for EventCalendarMissing, the
	// calendar's name.
	Reason string `json:"reason,omitempty"`
	// Error is the last attempt's error.
	Error string `json:"error,omitempty"`
	// Lateness is how late the attempt started (EventLate).
	Lateness time.Duration `json:"lateness_ns,omitempty"`
	// Missed counts the fires without a success (EventSilent), or the
	// consecutive failures that paused the task (EventTaskPaused).
	Missed int `json:"missed,omitempty"`
	// ClockOffset is the replica's clock correction (EventClockSkew): the
	// database's clock minus the replica's; negative for a fast clock.
	ClockOffset time.Duration `json:"clock_offset_ns,omitempty"`
	// Suppressed counts the events of this kind and subject damped since
	// the alert before this one, which was sent at Since (zero for the
	// first alert of a kind and subject).
	Suppressed int64     `json:"suppressed"`
	Since      time.Time `json:"since,omitzero"`
	// Digest: this alert is sent at the end of a damping window for its
	// Suppressed events; the fields above are the latest of them.
	Digest bool `json:"digest,omitempty"`
	// Message says it in one line, for people.
	Message string `json:"message"`
}

// Notifier receives the alerts of a Scheduler (Options.Notifier). Notify
// is called from one goroutine per Scheduler, one alert at a time, with a
// context that ends after 30 seconds; an error makes the alert be tried
// again later, by this replica or another, up to 5 times in all.
type Notifier interface {
	Notify(ctx context.Context, e Event) error
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, e Event) error

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, e Event) error { return f(ctx, e) }

// LogNotifier writes alerts to a logger: failures, timeouts, silent tasks
// and lost replicas at error level, the rest at warn.
type LogNotifier struct {
	Logger *slog.Logger
}

// NewLogNotifier returns a LogNotifier on l (slog.Default() when nil).
func NewLogNotifier(l *slog.Logger) *LogNotifier {
	if l == nil {
		l = slog.Default()
	}
	return &LogNotifier{Logger: l}
}

// Notify logs e. It never fails.
func (n *LogNotifier) Notify(ctx context.Context, e Event) error {
	level := slog.LevelWarn
	switch e.Kind {
	case EventFailed, EventTimedOut, EventSilent, EventReplicaLost, EventTaskPaused, EventSecretUndecryptable:
		level = slog.LevelError
	}
	attrs := []slog.Attr{slog.String("alert", e.ID), slog.String("kind", string(e.Kind)), slog.String("app", e.App),
		slog.String("replica", e.Replica), slog.Int64("suppressed", e.Suppressed)}
	if e.Task != "" {
		attrs = append(attrs, slog.String("task", e.Task))
	}
	if e.Owner != "" {
		attrs = append(attrs, slog.String("owner", e.Owner))
	}
	if e.ExecutionID != 0 {
		attrs = append(attrs, slog.Int64("execution", e.ExecutionID), slog.Time("run_time", e.ScheduledAt))
	}
	if e.Error != "" {
		attrs = append(attrs, slog.String("err", e.Error))
	}
	n.Logger.LogAttrs(ctx, level, e.Message, attrs...)
	return nil
}

// Defaults of WebhookOptions.
const (
	DefaultWebhookTimeout  = 10 * time.Second
	DefaultWebhookAttempts = 3
)

// WebhookOptions configures a WebhookNotifier.
type WebhookOptions struct {
	// URL receives each alert as a JSON POST of Event. Required: http or
	// https, absolute, no credentials (use Headers).
	URL string
	// Secret signs the body as HTTP callbacks are signed: the Standard
	// Webhooks headers (HeaderWebhookID is the alert's Event.ID), checked
	// with executor.VerifyWebhook, and the deprecated X-Xtimer-Timestamp
	// and X-Xtimer-Signature ("v1=" HMAC-SHA256 of "timestamp.body",
	// executor.VerifySignature). Empty sends unsigned.
	Secret string
	// Headers are added to every request (an Authorization header, a
	// routing key).
	Headers map[string]string
	// Timeout bounds each request. Defaults to DefaultWebhookTimeout (10s).
	Timeout time.Duration
	// Attempts is how many requests one Notify makes at most: a network
	// error, a 429 or a 5xx is retried after a short back-off (0.5s, 1s,
	// 2s...); another status is final. Defaults to DefaultWebhookAttempts (3).
	Attempts int
	// Client sends the requests. Defaults to a client without redirects.
	Client *http.Client
}

// WebhookNotifier posts alerts as JSON.
type WebhookNotifier struct {
	o WebhookOptions
	p *poster
}

// NewWebhookNotifier checks o and returns the notifier, or an error naming
// the bad field.
func NewWebhookNotifier(o WebhookOptions) (*WebhookNotifier, error) {
	bad := func(field string, value any, reason string) error {
		return fmt.Errorf("xtimer: WebhookOptions.%s = %v: %s", field, value, reason)
	}
	u, err := url.Parse(o.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, bad("URL", fmt.Sprintf("%q", o.URL), "want an absolute http or https URL")
	case u.User != nil:
		return nil, bad("URL", u.Redacted(), "credentials in the URL are refused; send them in Headers")
	}
	for k := range o.Headers {
		switch http.CanonicalHeaderKey(k) {
		case "", "Content-Type", HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature:
			return nil, bad("Headers", fmt.Sprintf("%q", k), "want a header name other than Content-Type and the webhook-* signature headers")
		}
	}
	p, err := newPoster(bad, "webhook", o.URL, o.Timeout, o.Attempts, o.Client)
	if err != nil {
		return nil, err
	}
	o.Timeout, o.Attempts, o.Client = p.timeout, p.attempts, p.client
	return &WebhookNotifier{o: o, p: p}, nil
}

// Notify posts e, retrying as WebhookOptions.Attempts says.
func (n *WebhookNotifier) Notify(ctx context.Context, e Event) error {
	body, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("xtimer: webhook: encode alert %s: %w", e.ID, err)
	}
	return n.p.post(ctx, e.ID, func() (postTry, error) {
		header := map[string]string{}
		for k, v := range n.o.Headers {
			header[k] = v
		}
		header["X-Xtimer-Alert"] = e.ID
		header["X-Xtimer-Event"] = string(e.Kind)
		if n.o.Secret != "" {
			ts := time.Now().Unix()
			header["X-Xtimer-Timestamp"] = strconv.FormatInt(ts, 10)
			header["X-Xtimer-Signature"] = executor.Sign(n.o.Secret, ts, body)
			if sig, err := executor.SignWebhook(n.o.Secret, e.ID, ts, body); err == nil {
				header[HeaderWebhookID] = e.ID
				header[HeaderWebhookTimestamp] = strconv.FormatInt(ts, 10)
				header[HeaderWebhookSignature] = sig
			}
		}
		return postTry{url: n.o.URL, body: body, header: header}, nil
	}, nil)
}

// poster is the HTTP side of the notifiers that post JSON: the webhook,
// and the chat notifiers (notify_chat.go). Each try runs under timeout; a
// network error, a 429 or a 5xx is tried again after a short back-off
// (0.5s, 1s, 2s...), up to attempts tries; another status is final.
type poster struct {
	name     string // "webhook", "slack"...: errors read "xtimer: <name>: alert <id> to <target>: ..."
	target   string // the URL as errors show it: a chat URL's token is masked
	timeout  time.Duration
	attempts int
	client   *http.Client
}

// newPoster checks the fields of the posting notifiers' options and
// applies their defaults; bad names a bad field of the options.
func newPoster(bad func(field string, value any, reason string) error, name, target string,
	timeout time.Duration, attempts int, client *http.Client) (*poster, error) {
	switch {
	case timeout < 0:
		return nil, bad("Timeout", timeout, "want 0 (default) or more")
	case attempts < 0 || attempts > 10:
		return nil, bad("Attempts", attempts, "want 0 (default) to 10")
	}
	if timeout == 0 {
		timeout = DefaultWebhookTimeout
	}
	if attempts == 0 {
		attempts = DefaultWebhookAttempts
	}
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &poster{name: name, target: target, timeout: timeout, attempts: attempts, client: client}, nil
}

// postTry is the request of one try, made anew for each: a signature
// carries the time it was made.
type postTry struct {
	url    string
	body   []byte
	header map[string]string
}

// finalError is an outcome that trying again will not change.
type finalError struct{ err error }

func (e finalError) Error() string { return e.err.Error() }
func (e finalError) Unwrap() error { return e.err }

// post sends the tries next makes until one is delivered: a 2xx response
// whose body accepted takes (nil takes any). accepted's errors are final:
// a service that answered is asked again by the alerter, minutes later.
func (p *poster) post(ctx context.Context, id string, next func() (postTry, error), accepted func(body []byte) error) error {
	var last error
	for attempt := 1; attempt <= p.attempts; attempt++ {
		if attempt > 1 {
			d := time.Duration(float64(250*time.Millisecond<<(attempt-1)) * (0.8 + 0.4*rand.Float64())) //nolint:gosec // G404: jitter, not a secret
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("xtimer: %s: alert %s: %w (last: %w)", p.name, id, ctx.Err(), last)
			case <-t.C:
			}
		}
		last = p.try(ctx, next, accepted)
		if fe := (finalError{}); last == nil || errors.As(last, &fe) {
			break
		}
	}
	if last != nil {
		return fmt.Errorf("xtimer: %s: alert %s to %s: %w", p.name, id, p.target, last)
	}
	return nil
}

func (p *poster) try(ctx context.Context, next func() (postTry, error), accepted func(body []byte) error) error {
	t, err := next()
	if err != nil {
		return finalError{err}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return finalError{errors.New("the request does not build")} // its error would show the URL
	}
	for k, v := range t.header {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "xtimer/1")
	resp, err := p.client.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			ue.URL = p.target
		}
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if accepted == nil {
			return nil
		}
		if err := accepted(body); err != nil {
			return finalError{err}
		}
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("status %d%s", resp.StatusCode, bodySnippet(body))
	default:
		return finalError{fmt.Errorf("status %d%s", resp.StatusCode, bodySnippet(body))}
	}
}

// bodySnippet is the start of a response body for an error: ": " and
// its first line, quoted and cut short, or "" for an empty body.
func bodySnippet(body []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if line == "" {
		return ""
	}
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	return fmt.Sprintf(": %q", strings.ToValidUTF8(line, "\uFFFD"))
}
