package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trigger takes -params and -note: the run records both, execution shows
// them, and parameters the console refuses are an API error naming the
// field, with nothing run.
func TestTriggerWithParamsAndANote(t *testing.T) {
	c := newConsole(t)
	code, out, errOut := c.cli(t, "trigger", "-params", `{"region":"us"}`, "-note", "rerun for the US", "billing.reconcile")
	require.Equal(t, exitOK, code, errOut)
	require.Regexp(t, `^triggered billing\.reconcile: execution \d+ at `, out)
	id := strings.Fields(strings.TrimPrefix(out, "triggered billing.reconcile: execution "))[0]
	require.Equal(t, "billing.reconcile", <-c.ran)

	var detail string
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		code, detail, errOut = c.cli(t, "execution", id)
		assert.Equal(ct, exitOK, code, errOut)
		assert.Regexp(ct, `(?m)^Status\s+succeeded$`, detail)
	}, 10*time.Second, 20*time.Millisecond)
	assert.Regexp(t, `(?m)^Note\s+rerun for the US$`, detail)
	assert.Contains(t, detail, "\nParameters:\n{\"region\":\"us\"}\n")

	code, _, errOut = c.cli(t, "trigger", "-params", `{"region":`, "billing.reconcile")
	require.Equal(t, exitAPI, code)
	assert.Contains(t, errOut, `TriggerOptions.Params "{\"region\":": not valid JSON`)
	code, _, errOut = c.cli(t, "trigger", "-note", strings.Repeat("x", 1025), "billing.reconcile")
	require.Equal(t, exitAPI, code)
	assert.Contains(t, errOut, "note")
	select {
	case ran := <-c.ran:
		t.Fatalf("a refused trigger ran %s", ran)
	default:
	}
}
