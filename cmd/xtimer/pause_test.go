package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pause and resume take -note (or --note): the console stores it with the
// task, the answer shows it, and a note the console refuses is an API
// error naming the field.
func TestPauseAndResumeWithANote(t *testing.T) {
	c := newConsole(t)
	code, out, errOut := c.cli(t, "pause", "billing.export", "--note", "db migration until 14:00")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "paused billing.export: db migration until 14:00\n", out)

	code, out, errOut = c.cli(t, "task", "billing.export", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var d taskDetail
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	assert.Equal(t, "db migration until 14:00", d.Task.PauseNote)

	code, _, errOut = c.cli(t, "resume", "-note", strings.Repeat("x", 1025), "billing.export")
	require.Equal(t, exitAPI, code)
	assert.Contains(t, errOut, "note")

	code, out, errOut = c.cli(t, "resume", "-note", "done", "billing.export")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "resumed billing.export: done\n", out)

	code, out, errOut = c.cli(t, "pause", "billing.export")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "paused billing.export\n", out, "no note: the stored one is cleared")
}
