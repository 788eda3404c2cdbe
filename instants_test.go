package xtimer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tick loop wakes tickPhase into every second, away from the whole
// seconds where fires start.
func TestTicksFallHalfwayBetweenInstants(t *testing.T) {
	sec := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now  time.Duration // after sec
		want time.Duration
	}{
		{0, 500 * time.Millisecond},
		{400 * time.Millisecond, 100 * time.Millisecond},
		{500 * time.Millisecond, time.Second}, // a tick now: the next one
		{500*time.Millisecond + 1, time.Second - 1},
		{999 * time.Millisecond, 501 * time.Millisecond},
	} {
		require.Equal(t, c.want, untilTick(sec.Add(c.now)), "at %s past the second", c.now)
	}
}

// A chunk of rows starts only where it is expected to end quietGap before
// the next whole second, and not within quietGap after the last one.
func TestRecordedChunksKeepClearOfWholeSeconds(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		since, expect, want time.Duration
	}{
		{500 * ms, 100 * ms, 0},
		{5 * ms, 100 * ms, 15 * ms},         // just past a second
		{quietGap, 100 * ms, 0},             // past the gap
		{880 * ms, 100 * ms, 0},             // ends 20 ms before the next second
		{881 * ms, 100 * ms, 139 * ms},      // would end 19 ms before it: after it
		{600 * ms, maxRecordWait, 420 * ms}, // the longest expected chunk
		{10 * ms, maxRecordWait, 10 * ms},   // fits once past the gap
		{985 * ms, 0, 35 * ms},              // even an instant chunk keeps the gap
	} {
		require.Equal(t, c.want, quietWait(c.since, c.expect), "%s past the second, expected to take %s", c.since, c.expect)
	}
}
