package xtimer

import (
	"fmt"
	"time"
)

// MaxJitter is the most WithJitter spreads a fire's start.
const MaxJitter = time.Minute

// WithJitter spreads the task's fires: each starts at its nominal instant
// plus an offset in [0, max) drawn from the app, the code and that
// instant, so that every replica plans the same start and the tasks due
// at one instant (every hour at :00) do not all start together. A fire
// never starts at or past the next one. Run.ScheduledAt stays the nominal
// instant; the execution records the planned start (Execution.PlannedAt),
// and lateness counts from it. max is at most MaxJitter (1 minute) and
// below the schedule's shortest interval; Register refuses more.
func WithJitter(max time.Duration) TaskOption {
	return func(c *taskConfig) error {
		if reason := jitterProblem(max); reason != "" {
			return optionError("WithJitter", max, reason)
		}
		c.jitter = max
		return nil
	}
}

// jitterProblem is what is wrong with a jitter of max on its own, "" when
// nothing: the schedule's side is jitterTooLong's.
func jitterProblem(max time.Duration) string {
	switch {
	case max < time.Millisecond:
		return "jitter must be at least 1ms"
	case max > MaxJitter:
		return fmt.Sprintf("jitter must be at most %s", MaxJitter)
	case max%time.Millisecond != 0:
		return "jitter must be whole milliseconds"
	}
	return ""
}

// jitterSample bounds how many fires of a schedule jitterTooLong looks at,
// and jitterHorizon how far ahead.
const (
	jitterSample  = 1000
	jitterHorizon = 4 * 366 * 24 * time.Hour
)

// jitterTooLong is the reason a jitter of max does not fit sched, "" when
// it does: max must stay below the shortest interval between two fires,
// else a fire's start could reach the next one's. It reads the schedule's
// next jitterSample fires from now, within jitterHorizon: enough for every
// pattern of the five or six cron fields (a day, a month, a leap year) at
// a cost paid once per set of options. The engine keeps each start below
// the next fire as well (internal/engine/jitter.go), whatever the
// schedule becomes.
func jitterTooLong(sched Schedule, max time.Duration, now time.Time) string {
	if max == 0 || sched == nil {
		return ""
	}
	prev := sched.Next(now)
	end := now.Add(jitterHorizon)
	for i := 0; i < jitterSample && !prev.IsZero() && prev.Before(end); i++ {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		if gap := next.Sub(prev); gap <= max {
			return fmt.Sprintf("jitter must be below the schedule's shortest interval, %s (%s to %s)",
				gap, prev.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339))
		}
		prev = next
	}
	return ""
}
