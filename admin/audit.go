package admin

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xtimer-go/xtimer"
)

// The audit log's account of an edit of an HTTP callback task: each field
// that changed with its value before and after, as the history shows it
// ("spec \"0 9 * * *\" → \"30 9 * * *\""). Secrets never appear: a secret
// header's value and the signing secret read xtimer.Masked on both sides,
// with "(new value)" when the edit sent another, and "cleared" when it
// is gone, which the scheduler does to every secret the edit did not send
// again when the target moves to another origin
// (xtimer.HTTPTarget.SameDestination). URLs are shown without their user information and
// query, which may hold tokens.

// auditValueMax bounds one value in a history line (a body).
const auditValueMax = 200

// taskChanges lists what an edit changed, from the task before and after
// it as Scheduler.HTTPTask reads them (secrets masked), and the edit
// itself, which says whether a secret was sent again.
func taskChanges(before, after xtimer.HTTPTask, edit *TaskEdit) []string {
	var out []string
	add := func(field, was, now string) {
		if was != now {
			out = append(out, field+" "+was+" → "+now)
		}
	}
	q := auditQuote
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	add("name", q(before.Name), q(after.Name))
	add("description", q(before.Description), q(after.Description))
	add("owner", q(before.Owner), q(after.Owner))
	add("spec", q(before.Spec), q(after.Spec))
	add("dialect", q(string(before.Dialect)), q(string(after.Dialect)))
	add("zone", q(before.Zone), q(after.Zone))
	add("target.method", q(before.Target.Method), q(after.Target.Method))
	add("target.url", q(auditURL(before.Target.URL)), q(auditURL(after.Target.URL)))
	if before.Target.URL != after.Target.URL && auditURL(before.Target.URL) == auditURL(after.Target.URL) {
		out = append(out, "target.url query or credentials changed")
	}
	moved := ""
	if !before.Target.SameDestination(after.Target) {
		moved = " (the target moved to another origin)"
	}
	out = append(out, headerChanges(before.Target.Headers, after.Target.Headers, edit.Target.Headers, moved)...)
	add("target.body", q(before.Target.Body), q(after.Target.Body))
	add("target.success_codes", fmt.Sprint(before.Target.SuccessCodes), fmt.Sprint(after.Target.SuccessCodes))
	switch sent := edit.Target.Secret != "" && edit.Target.Secret != xtimer.Masked; {
	case before.Target.Secret != "" && after.Target.Secret == "":
		out = append(out, "target.secret "+xtimer.Masked+" → cleared"+moved)
	case before.Target.Secret == "" && after.Target.Secret != "":
		out = append(out, "target.secret none → "+xtimer.Masked)
	case sent:
		out = append(out, "target.secret "+xtimer.Masked+" → "+xtimer.Masked+" (new value)")
	}
	add("timeout_ms", ms(before.Timeout), ms(after.Timeout))
	add("max_attempts", strconv.Itoa(before.MaxAttempts), strconv.Itoa(after.MaxAttempts))
	add("backoff_base_ms", ms(before.BackoffBase), ms(after.BackoffBase))
	add("backoff_max_ms", ms(before.BackoffMax), ms(after.BackoffMax))
	add("max_concurrent", strconv.Itoa(before.MaxConcurrent), strconv.Itoa(after.MaxConcurrent))
	add("overlap", q(string(before.Overlap)), q(string(after.Overlap)))
	add("jitter_ms", ms(before.Jitter), ms(after.Jitter))
	add("pause_on_failure", strconv.Itoa(before.PauseOnFailure), strconv.Itoa(after.PauseOnFailure))
	add("shards", strconv.Itoa(max(before.Shards, 1)), strconv.Itoa(max(after.Shards, 1)))
	add("broadcast", strconv.FormatBool(before.Broadcast), strconv.FormatBool(after.Broadcast))
	add("misfire", q(string(before.Misfire)), q(string(after.Misfire)))
	add("misfire_window_ms", ms(before.MisfireWindow), ms(after.MisfireWindow))
	add("end_at", auditTime(before.EndAt), auditTime(after.EndAt))
	add("max_runs", strconv.FormatInt(before.MaxRuns, 10), strconv.FormatInt(after.MaxRuns, 10))
	add("exclude", fmt.Sprint(nonNil(before.Exclude)), fmt.Sprint(nonNil(after.Exclude)))
	add("calendar", q(before.Calendar), q(after.Calendar))
	return out
}

// headerChanges lists the headers added, removed or changed, by name (the
// first of a name), secret values masked: sent are the edit's headers,
// which say whether a secret was given a new value; moved explains a
// secret cleared by a move to another origin.
func headerChanges(before, after, sent []xtimer.HTTPHeader, moved string) []string {
	show := func(h xtimer.HTTPHeader) string {
		if h.Secret {
			return xtimer.Masked
		}
		return auditQuote(h.Value)
	}
	find := func(hs []xtimer.HTTPHeader, name string) (xtimer.HTTPHeader, bool) {
		i := slices.IndexFunc(hs, func(h xtimer.HTTPHeader) bool { return strings.EqualFold(h.Name, name) })
		if i < 0 {
			return xtimer.HTTPHeader{}, false
		}
		return hs[i], true
	}
	var out []string
	for _, b := range before {
		field := "target.headers[" + b.Name + "]"
		a, ok := find(after, b.Name)
		switch {
		case !ok && b.Secret:
			if _, resent := find(sent, b.Name); resent && moved != "" {
				out = append(out, field+" "+xtimer.Masked+" → cleared"+moved)
			} else {
				out = append(out, field+" "+xtimer.Masked+" → removed")
			}
		case !ok:
			out = append(out, field+" "+show(b)+" → removed")
		case b.Secret != a.Secret || show(b) != show(a):
			out = append(out, field+" "+show(b)+" → "+show(a))
		case a.Secret:
			if s, ok := find(sent, a.Name); ok && s.Value != "" && s.Value != xtimer.Masked {
				out = append(out, field+" "+xtimer.Masked+" → "+xtimer.Masked+" (new value)")
			}
		}
	}
	for _, a := range after {
		if _, ok := find(before, a.Name); !ok {
			out = append(out, "target.headers["+a.Name+"] none → "+show(a))
		}
	}
	return out
}

// auditURL is a URL as the history shows it: without user information,
// query or fragment, which may hold tokens.
func auditURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "…", false
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// auditQuote quotes a value for the history, cut to auditValueMax bytes.
func auditQuote(s string) string {
	if len(s) > auditValueMax {
		cut := auditValueMax
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

// auditTime is an end time for the history: RFC 3339, or never.
func auditTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}
