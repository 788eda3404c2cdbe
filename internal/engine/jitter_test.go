package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/internal/store"
)

// A jittered fire's planned start is a pure function of (app, code,
// nominal instant): the same on every call, as on every replica; it stays
// in [at, at+jitter); tasks due at one instant spread over the range; and
// it stays below the schedule's next fire even when the schedule became
// shorter than the jitter (a console edit), which Register cannot see.
func TestPlannedStartIsDeterministicSpreadAndBeforeTheNextFire(t *testing.T) {
	minute, err := cron.Parse("0 * * * * *")
	require.NoError(t, err)
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	const jitter = 30_000
	seconds := map[int64]int{}
	for i := range 1000 {
		task := &taskState{code: fmt.Sprintf("report.%d", i), base: &taskBase{sched: minute, def: &store.Definition{JitterMs: jitter}}}
		p := task.plannedStart("shop", at)
		require.Equal(t, p, task.plannedStart("shop", at), "the same inputs plan the same start")
		require.GreaterOrEqual(t, p, at.UnixMilli())
		require.Less(t, p, at.UnixMilli()+jitter)
		seconds[(p-at.UnixMilli())/1000]++
	}
	// 1,000 tasks over 30 one-second bins: about 33 each. A hash that
	// clumped (or ignored the code) would leave bins empty or overfull.
	require.Len(t, seconds, 30, "every second of the range gets starts")
	for s, n := range seconds {
		require.Less(t, n, 80, "second %d of the range has %d of 1,000 starts", s, n)
	}

	task := &taskState{code: "report", base: &taskBase{sched: minute, def: &store.Definition{JitterMs: jitter}}}
	require.NotEqual(t, task.plannedStart("shop", at), task.plannedStart("shop", at.Add(time.Minute))-time.Minute.Milliseconds(),
		"each fire draws its own offset")
	require.Zero(t, (&taskState{code: "plain", base: &taskBase{sched: minute, def: &store.Definition{}}}).plannedStart("shop", at),
		"no jitter: no planned start of its own")

	every5s, err := cron.Parse("*/5 * * * * *")
	require.NoError(t, err)
	task.base.sched = every5s
	for i := range 200 {
		fire := at.Add(time.Duration(5*i) * time.Second)
		p := task.plannedStart("shop", fire)
		require.Less(t, p, fire.Add(5*time.Second).UnixMilli(), "the start of %s reaches the next fire", fire)
	}
}
