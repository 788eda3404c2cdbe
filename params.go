package xtimer

import (
	"encoding/json"
	"fmt"
)

// maxParams is the most WithParams and TriggerOptions.Params hold, as
// JSON: 64 KiB.
const maxParams = 64 << 10

// WithParams gives the task parameters: v, encoded as JSON when
// WithParams is called (so the tasks registered with one WithParams share
// one encoding), stored on the task's row (shown in the console; part of
// the task's definition like every option), and handed to each run as
// Run.Params, which Run.Bind decodes. A manual run may replace them
// (TriggerOptions.Params). v must encode (no channels, functions or
// cycles) to at most 64 KiB; a json.RawMessage is taken as it is,
// compacted. Register returns the error, naming the task and the option.
func WithParams(v any) TaskOption {
	b, err := json.Marshal(v)
	return func(c *taskConfig) error {
		switch {
		case err != nil:
			return optionError("WithParams", fmt.Sprintf("%T", v), "cannot be encoded as JSON: "+err.Error())
		case len(b) > maxParams:
			return optionError("WithParams", fmt.Sprintf("%T", v), fmt.Sprintf("%d bytes of JSON: at most %d", len(b), maxParams))
		}
		c.params = string(b)
		return nil
	}
}

// Bind decodes the run's parameters (Params) into v, a pointer, with
// json.Unmarshal: fields the JSON lacks keep their values, and fields v
// lacks are ignored. A run without parameters leaves v as it is. When the
// JSON does not fit v, the error names the task and v's type.
func (r *Run) Bind(v any) error {
	if len(r.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Params, v); err != nil {
		return fmt.Errorf("xtimer: task %q: bind params into %T: %w", r.Code, v, err)
	}
	return nil
}
