package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// TriggerBody is the body of POST api/tasks/{code}/trigger: {} runs the
// task with its own parameters, as ever; {"params": ..., "note": "..."}
// runs it with others (xtimer.TriggerOptions). params is the run's
// parameters as text: a JSON string holds the text itself (what the task
// page's "Run now…" form sends: `"{\"region\":\"us\"}"`, or any body of
// an HTTP task); any other JSON value is taken as its JSON text
// (`{"region":"us"}`). Absent, null or "" keeps the task's. The note is
// stored on the execution and is the action's line in the task's history.
// The console's MaxBodyBytes bounds the whole body.
type TriggerBody struct {
	Params json.RawMessage `json:"params"`
	Note   string          `json:"note"`
}

// options checks the note as the scheduler would, naming the body's
// field, and returns the scheduler's options.
func (b *TriggerBody) options() (xtimer.TriggerOptions, error) {
	if err := checkText("note", b.Note); err != nil {
		return xtimer.TriggerOptions{}, err
	}
	if len(b.Note) > xtimer.MaxTriggerNote {
		return xtimer.TriggerOptions{}, fieldError("note", fmt.Sprintf("%d bytes", len(b.Note)), fmt.Sprintf("want at most %d bytes", xtimer.MaxTriggerNote))
	}
	o := xtimer.TriggerOptions{Note: b.Note}
	switch {
	case len(b.Params) == 0 || string(b.Params) == "null":
	case b.Params[0] == '"':
		var text string
		if err := json.Unmarshal(b.Params, &text); err != nil {
			return o, fieldError("params", string(b.Params), err.Error())
		}
		if text != "" {
			o.Params = json.RawMessage(text)
		}
	default:
		o.Params = b.Params
	}
	return o, nil
}

func (c *console) apiTrigger(w http.ResponseWriter, r *http.Request) {
	var body TriggerBody
	c.act(w, r, "trigger", &body, func(ctx context.Context, code string) (outcome, error) {
		o, err := body.options()
		if err != nil {
			return outcome{}, err
		}
		if err = c.mayTriggerWith(ctx, code, o); err != nil {
			return outcome{}, err
		}
		e, err := c.s.TriggerWith(ctx, code, o)
		var te *xtimer.TriggerError
		if errors.As(err, &te) {
			return outcome{}, triggerFieldError(te, o)
		}
		if err != nil {
			return outcome{}, err
		}
		row, err := c.st.Execution(ctx, e.ID)
		if err != nil {
			return outcome{}, err
		}
		v := executionView(row, "", false)
		v.Params = paramsView(row.Params)
		return outcome{status: http.StatusCreated, data: v, detail: triggerDetail(e.ID, o)}, nil
	})
}

// mayTriggerWith refuses parameters of its own for an HTTP task unless
// the principal is an admin: they replace the body the task sends and
// signs, which is an edit of the task for one run. An operator may run it
// with its own body, and a Go task with any parameters.
func (c *console) mayTriggerWith(ctx context.Context, code string, o xtimer.TriggerOptions) error {
	p := principalOf(ctx)
	if len(o.Params) == 0 || p.Role.Allows(RoleAdmin) {
		return nil
	}
	t, err := c.st.Task(ctx, c.sopts.App, code)
	if err != nil {
		return err
	}
	if t.Kind == store.KindHTTP {
		return errRole(p, RoleAdmin, fmt.Sprintf("running HTTP task %q with params (a body of its own, which it signs)", code))
	}
	return nil
}

// triggerFieldError is the scheduler's refusal of TriggerOptions as a 400
// naming the body's field.
func triggerFieldError(te *xtimer.TriggerError, o xtimer.TriggerOptions) error {
	field, value := "params", string(o.Params)
	if te.Field == "TriggerOptions.Note" {
		field, value = "note", o.Note
	}
	if len(value) > 256 {
		value = fmt.Sprintf("%d bytes", len(value))
	}
	e := fieldError(field, value, te.Reason)
	e.Message = te.Error()
	return e
}

// triggerDetail is a manual run's line in the task's history: the
// execution, whether it had its own parameters, and the note.
func triggerDetail(id int64, o xtimer.TriggerOptions) string {
	d := "execution " + strconv.FormatInt(id, 10)
	if len(o.Params) > 0 {
		d += " with its own parameters"
	}
	if o.Note != "" {
		d += ": " + o.Note
	}
	return d
}

// paramsView is an execution's own parameters for its view, nil for none.
func paramsView(p store.Params) *string {
	if p == "" {
		return nil
	}
	s := string(p)
	return &s
}

// ParamsText is the task's parameters, indented, for its page.
func (d TaskDetail) ParamsText() string {
	var b bytes.Buffer
	if err := json.Indent(&b, d.Task.Params, "", "  "); err != nil {
		return string(d.Task.Params)
	}
	return b.String()
}

// TriggerParams is what the "Run now…" form starts with: the task's
// parameters, or an HTTP task's body.
func (d TaskDetail) TriggerParams() string {
	if d.HTTP != nil {
		return d.HTTP.Body
	}
	if len(d.Task.Params) == 0 {
		return ""
	}
	return d.ParamsText()
}
