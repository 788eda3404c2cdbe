package engine

import (
	"encoding/binary"
	"hash/fnv"
	"time"
)

// plannedStart is when t's fire of nominal instant at is planned to
// start, Unix milliseconds, for its row's planned_ms: at plus an offset in
// [0, JitterMs) that depends only on the app, the code and at, so that
// every replica plans the same instant; 0 (the run time) when the task
// has no jitter. The offset stays below the gap to the schedule's next
// fire, which Register's check (max below the shortest interval) cannot
// promise alone: a console edit may shorten the schedule later.
func (t *taskState) plannedStart(app string, at time.Time) int64 {
	maxMs := t.def().JitterMs
	if maxMs <= 0 {
		return 0
	}
	if t.sched() != nil {
		if next := t.sched().Next(at); !next.IsZero() {
			maxMs = min(maxMs, next.Sub(at).Milliseconds())
		}
	}
	if maxMs <= 1 {
		return at.UnixMilli()
	}
	return at.UnixMilli() + jitterOffset(app, t.code, at.UnixMilli(), maxMs)
}

// jitterOffset is a number in [0, maxMs) drawn from (app, code, runMs) by
// FNV-1a: a pure function, so the replicas agree without asking each
// other, and spread, so that tasks due at one instant start apart.
func jitterOffset(app, code string, runMs, maxMs int64) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(app))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(code))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(binary.BigEndian.AppendUint64(nil, uint64(runMs))) //nolint:gosec // G115: the bits of the instant, hashed
	return int64(h.Sum64() % uint64(maxMs))                           //nolint:gosec // G115: maxMs > 1 here, and the remainder is below it
}
