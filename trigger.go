package xtimer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/store"
)

// MaxTriggerNote is the most bytes TriggerOptions.Note may hold.
const MaxTriggerNote = store.MaxNoteBytes

// TriggerOptions are what a manual run is triggered with (TriggerWith).
// The zero value is a plain Trigger.
type TriggerOptions struct {
	// Params replace the task's parameters for this run. For a Go task
	// they are JSON (the handler gets them as Run.Params), at most 64 KiB;
	// for an HTTP task they are the request's body (signed like the
	// task's own), valid UTF-8 without NUL, at most Options.HTTPMaxBody,
	// and valid JSON when the task's Content-Type header says JSON. Empty
	// keeps the task's: the run reads them when it starts, as a scheduled
	// fire does. Every attempt of the run, retries included, gets the same.
	Params json.RawMessage
	// Note says why the run was triggered: it is stored on the execution
	// (Execution.Note) and the console shows it. Valid UTF-8, no NUL byte,
	// at most MaxTriggerNote (1024) bytes.
	Note string
}

// TriggerError says which field of TriggerOptions TriggerWith refused, and
// why. Nothing is recorded when TriggerWith returns one.
type TriggerError struct {
	// Task is the task code; Field is "TriggerOptions.Params" or
	// "TriggerOptions.Note"; Value is the value as the message shows it
	// (quoted and shortened, or its size).
	Task, Field, Value, Reason string
}

// Error reads like `xtimer: trigger "report": TriggerOptions.Params
// "{\"region\":": not valid JSON: unexpected end of JSON input`.
func (e *TriggerError) Error() string {
	return fmt.Sprintf("xtimer: trigger %q: %s %s: %s", e.Task, e.Field, e.Value, e.Reason)
}

// TriggerWith records a manual run of a task now, like Trigger, with its
// own parameters and a note (TriggerOptions). It runs on this replica when
// it has the task's handler, otherwise on one that has it, within a
// second. Options that do not fit the task return a *TriggerError and
// record nothing.
func (s *Scheduler) TriggerWith(ctx context.Context, code string, o TriggerOptions) (Execution, error) {
	if reason := textProblem(o.Note, MaxTriggerNote); reason != "" {
		return Execution{}, &TriggerError{Task: code, Field: "TriggerOptions.Note", Value: shownText(o.Note, MaxTriggerNote), Reason: reason}
	}
	m := engine.Manual{Params: string(o.Params), Note: o.Note}
	if len(o.Params) > 0 {
		m.Check = func(sp *engine.HTTPSpec) error { return s.checkTriggerParams(code, o.Params, sp) }
	}
	row, loc, err := s.eng.TriggerWith(ctx, code, m)
	if err != nil {
		return Execution{}, err
	}
	return toExecution(row, loc), nil
}

// checkTriggerParams refuses TriggerOptions.Params that do not fit the
// task: sp is its HTTP callback, nil for a Go task.
func (s *Scheduler) checkTriggerParams(code string, p json.RawMessage, sp *engine.HTTPSpec) error {
	limit, what := maxParams, "JSON"
	jsonBody := sp == nil
	if sp != nil {
		limit, what = s.opts.HTTPMaxBody, "an HTTP task's body"
		for _, h := range sp.Headers {
			if strings.EqualFold(h.Name, "Content-Type") && strings.Contains(strings.ToLower(h.Value), "json") {
				jsonBody = true
			}
		}
	}
	bad := func(reason string) error {
		return &TriggerError{Task: code, Field: "TriggerOptions.Params", Value: shownText(string(p), limit), Reason: reason}
	}
	switch {
	case len(p) > limit:
		if sp != nil {
			return bad(fmt.Sprintf("at most %d bytes (Options.HTTPMaxBody)", limit))
		}
		return bad(fmt.Sprintf("at most %d bytes of JSON", limit))
	case !utf8.Valid(p) || strings.ContainsRune(string(p), 0):
		return bad(what + " must be valid UTF-8 text without NUL bytes")
	case jsonBody && !json.Valid(p):
		var v any
		err := json.Unmarshal(p, &v)
		if sp != nil {
			return bad(fmt.Sprintf("the task's Content-Type says JSON but the body is not: %v", err))
		}
		return bad(fmt.Sprintf("not valid JSON: %v", err))
	}
	return nil
}

// shownText is how an error shows a text value: quoted and shortened, or
// its size when it is over max bytes.
func shownText(v string, max int) string {
	if len(v) > max {
		return fmt.Sprintf("(%d bytes)", len(v))
	}
	return fmt.Sprintf("%q", shorten(v))
}
