package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBackfillRecordsARangeOnce(t *testing.T) {
	c := newConsole(t)
	// billing.reconcile runs at 09:00 UTC: two fires in two whole days.
	day := time.Now().UTC().Truncate(24 * time.Hour)
	from, to := day.AddDate(0, 0, -3).Format(time.RFC3339), day.AddDate(0, 0, -1).Format(time.RFC3339)
	code, out, errOut := c.cli(t, "backfill", "billing.reconcile", "-from", from, "-to", to)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "backfilled billing.reconcile: 2 of the range's 2 fires recorded; they run one at a time, oldest first\n", out)

	code, out, errOut = c.cli(t, "backfill", "billing.reconcile", "--from", from, "--to", to, "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var got map[string]int
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	assert.Equal(t, map[string]int{"fires": 2, "recorded": 0}, got, "a second run records nothing")
}

func TestBackfillNamesTheBoundItRefuses(t *testing.T) {
	c := newConsole(t)
	code, _, errOut := c.cli(t, "backfill", "billing.reconcile", "-from", "yesterday", "-to", "2026-11-30T00:00:00Z")
	require.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `-from "yesterday": want an RFC 3339 time`)

	code, _, errOut = c.cli(t, "backfill", "billing.reconcile", "-from", "2026-11-30T00:00:00Z")
	require.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `-to "": want an RFC 3339 time`)

	future := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	code, _, errOut = c.cli(t, "backfill", "billing.reconcile", "-from", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "-to", future)
	require.Equal(t, exitAPI, code)
	assert.Contains(t, errOut, "to "+future+" is after now")

	code, _, errOut = c.cli(t, "backfill", "no.such.task", "-from", "2026-11-30T00:00:00Z", "-to", "2026-11-30T01:00:00Z")
	require.Equal(t, exitAPI, code)
	assert.Contains(t, errOut, "no.such.task")
}
