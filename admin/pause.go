package admin

import (
	"fmt"

	"github.com/xtimer-go/xtimer"
)

// PauseBody is the body of POST api/tasks/{code}/pause and
// api/tasks/{code}/resume: {} or {"note": "db migration"}. The note
// replaces the one stored with the task (xtimer.PauseOptions.Note), which
// the task's pages show, and is the action's line in the task's history.
type PauseBody struct {
	Note string `json:"note"`
}

// options checks the note as the scheduler would, naming the body's
// field, and returns the scheduler's options.
func (b *PauseBody) options() (xtimer.PauseOptions, error) {
	if err := checkText("note", b.Note); err != nil {
		return xtimer.PauseOptions{}, err
	}
	if len(b.Note) > xtimer.MaxPauseNote {
		return xtimer.PauseOptions{}, fieldError("note", fmt.Sprintf("%d bytes", len(b.Note)), fmt.Sprintf("want at most %d bytes", xtimer.MaxPauseNote))
	}
	return xtimer.PauseOptions{Note: b.Note}, nil
}
