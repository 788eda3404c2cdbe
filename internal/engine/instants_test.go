package engine

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

// A chunk of rows holds as many fires as end quietGap before the claim of
// the next whole second's fires (lead before it), and starts no sooner
// than quietGap after the last one; a second with room for fewer than
// minRecordChunk is left alone.
func TestRecordedChunksKeepClearOfWholeSecondsAndTheirClaims(t *testing.T) {
	ms, us := time.Millisecond, time.Microsecond
	for _, c := range []struct {
		since, perFire, lead, wait time.Duration
		n                          int
	}{
		{500 * ms, 100 * us, 0, 0, 4_800},                // 480 ms of room, 100 µs a fire
		{5 * ms, 40 * us, 0, 15 * ms, recordChunk},       // just past a second: a moment more, then all the room
		{quietGap, 100 * us, 0, 0, 9_600},                // 960 ms of room
		{900 * ms, 100 * us, 0, 0, 800},                  // 80 ms of room
		{975 * ms, 40 * us, 0, 45 * ms, recordChunk},     // 5 ms of room, 125 fires: after the next second
		{965 * ms, 100 * us, 0, 55 * ms, 9_600},          // 15 ms, 150 fires: after it
		{960 * ms, 100 * us, 0, 0, minRecordChunk},       // 20 ms, 200 fires: now
		{500 * ms, 10 * ms, 0, 520 * ms, minRecordChunk}, // a database that slow: as few as that, after the next second
		{100 * ms, 0, 0, 0, recordChunk},                 // not timed to take anything: the most
		{500 * ms, 100 * us, 200 * ms, 0, 2_800},         // 280 ms of room before the next second's claim
		{800 * ms, 100 * us, 200 * ms, 220 * ms, 7_600},  // none: after the next second, 760 ms of room
		{500 * ms, 100 * us, maxQuietLead, 0, 2_300},     // the longest lead: 230 ms of room
	} {
		wait, n := chunkAt(c.since, c.perFire, c.lead)
		require.Equal(t, c.wait, wait, "wait, %s past the second, %s a fire", c.since, c.perFire)
		require.Equal(t, c.n, n, "fires, %s past the second, %s a fire", c.since, c.perFire)
	}
}

// The last stretch before a claimed fire's run time is waited for by
// reading the clock: it never ends before the instant, on the system
// clock or on one corrected by an offset.
func TestSpinUntilNeverReturnsEarly(t *testing.T) {
	ref := NewRefClock(SystemClock{})
	ref.set(-30 * time.Second)
	for _, clock := range []Clock{SystemClock{}, ref} {
		require.True(t, realTime(clock))
		for _, ahead := range []time.Duration{-time.Millisecond, 0, 200 * time.Microsecond, startEarly} {
			at := clock.Now().Add(ahead)
			spinUntil(clock, at)
			require.False(t, clock.Now().Before(at), "returned before an instant %s ahead", ahead)
		}
	}
}
