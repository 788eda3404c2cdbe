package engine

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// The note of a pause on failure quotes the last error cut short, and is
// always storable: valid UTF-8, no NUL, within store.MaxPauseNote.
func TestPauseNoteIsStorable(t *testing.T) {
	t.Parallel()
	require.Equal(t, "paused after 3 consecutive failures; last: connection refused", pauseNote(3, "connection refused"))
	require.Equal(t, "paused after 1 consecutive failure; last: boom", pauseNote(1, "boom"))
	for _, lastErr := range []string{strings.Repeat("é", 5000), "bad \xff\x00 bytes", strings.Repeat("x", 1<<16)} {
		note := pauseNote(1000, lastErr)
		require.True(t, utf8.ValidString(note), note)
		require.NotContains(t, note, "\x00")
		require.LessOrEqual(t, len(note), store.MaxPauseNote)
	}
	require.True(t, strings.HasSuffix(pauseNote(2, strings.Repeat("é", 5000)), "é…"), "cut at a rune boundary, marked")
}

// Only a fire of the schedule that failed after its last attempt, not
// stopped by the next fire, can extend a streak.
func TestCountsTowardAStreak(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		source, status, reason string
		want                   bool
	}{
		{store.SourceSchedule, store.StatusFailed, "", true},
		{store.SourceCatchup, store.StatusTimedOut, "", true},
		{store.SourceSchedule, store.StatusFailed, store.ReasonReplicaLost, true},
		{store.SourceSchedule, store.StatusFailed, store.ReasonCancelled, false},
		{store.SourceSchedule, store.StatusRetrying, "", false},
		{store.SourceSchedule, store.StatusSucceeded, "", false},
		{store.SourceManual, store.StatusFailed, "", false},
		{"backfill", store.StatusFailed, "", false},
	} {
		got := countsToward(store.Execution{Source: c.source},
			store.Finish{Result: store.Result{Status: c.status, Reason: c.reason}})
		require.Equal(t, c.want, got, "%s %s %q", c.source, c.status, c.reason)
	}
}
