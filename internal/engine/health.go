package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// healthTickAge: a loop whose last tick is older is not healthy. The loop
// ticks every second; a tick stuck on the database shows here.
const healthTickAge = 5 * time.Second

// healthState is what the engine's components record for Health and for
// logging an outage once when it starts and once when it ends (noteDB,
// noteRedis). Its fields are atomics: any component writes them.
type healthState struct {
	lastTick  atomic.Int64 // Unix nanoseconds of the start of the last tick, 0 before the first
	dbDown    atomic.Bool
	redisDown atomic.Bool
	// dbDownSince is when, in Unix nanoseconds of the engine's clock, the
	// database failed a call after its last answer (noteDB, answered); 0
	// while it answers. The lock keeper lets its locks go when it is old.
	dbDownSince atomic.Int64
	// probeSince is when the lock keeper's probe of the database, a round
	// trip of its own (lockKeeper.probe), went out without an answer yet;
	// 0 while none is out. A call that hangs (a link that drops every
	// packet) is no failure until its timeout, but a database that has
	// answered nothing for a second is cut off all the same; a slow call
	// (a large insert) while the probe and the other calls answer is not.
	probeSince atomic.Int64
	// lastAnswer is when the database last answered a call (answered).
	lastAnswer atomic.Int64
	// outageMu orders noteDB's changes of dbDown with the outage they
	// start or end: outageFrom is when noteDB saw the database go away, 0
	// while it answers; backAt is when it saw it back, and outageNs how
	// long it had been away (lastOutage). Swapped apart, a failure and an
	// answer noted at once could leave outageFrom set while dbDown said
	// the database answers, an outage that never ended.
	outageMu                     sync.Mutex
	outageFrom, backAt, outageNs atomic.Int64
}

// lastOutage is when the last outage noteDB saw ended, and how long it
// lasted; zeros before any. An outage noteDB has not seen end yet (the
// tick's first calls answer before it notes the tick's result) ends now.
func (h *healthState) lastOutage(now time.Time) (back time.Time, length time.Duration) {
	if from := h.outageFrom.Load(); from != 0 {
		return now, max(now.Sub(time.Unix(0, from)), 0)
	}
	at := h.backAt.Load()
	if at == 0 {
		return time.Time{}, 0
	}
	return time.Unix(0, at), time.Duration(h.outageNs.Load())
}

func (h *healthState) tick(now time.Time) { h.lastTick.Store(now.UnixNano()) }

// answered notes that the database answered a call at now.
func (h *healthState) answered(now time.Time) {
	h.dbDownSince.Store(0)
	h.lastAnswer.Store(now.UnixNano())
}

// dbDownFor is how long, as of now, the database has failed every call
// noted, or left the probe unanswered while answering nothing else; 0
// while it answers.
func (h *healthState) dbDownFor(now time.Time) time.Duration {
	since := h.dbDownSince.Load()
	if out := h.probeSince.Load(); out != 0 {
		out = max(out, h.lastAnswer.Load())
		if since == 0 || out < since {
			since = out
		}
	}
	if since == 0 {
		return 0
	}
	return max(now.Sub(time.Unix(0, since)), 0)
}

// LoopHealth says whether the tick loop runs and ticked less than 5 s ago
// by the engine's clock, why not, and the age of its last tick.
func (s *Engine) LoopHealth() (ok bool, detail string, age time.Duration) {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	switch state {
	case stateNew:
		return false, "scheduler not started", 0
	case stateStopped:
		return false, "scheduler stopped", 0
	}
	last := s.health.lastTick.Load()
	if last == 0 {
		// Start has returned and the loop has not ticked yet: it does
		// within a second.
		return true, "starting", 0
	}
	age = max(s.clock.Now().Sub(time.Unix(0, last)), 0)
	if age >= healthTickAge {
		return false, fmt.Sprintf("last tick %s ago (want less than %s)", age.Round(time.Millisecond), healthTickAge), age
	}
	return true, fmt.Sprintf("last tick %s ago", age.Round(time.Millisecond)), age
}

// noteDB logs the database going away and coming back, once each, and
// has the status writer write its last writes again when it comes back.
func (s *Engine) noteDB(err error) {
	if err != nil && errors.Is(err, context.Canceled) {
		return
	}
	if err != nil {
		s.metrics.dbError()
		s.health.dbDownSince.CompareAndSwap(0, s.clock.Now().UnixNano())
	} else {
		s.health.answered(s.clock.Now())
	}
	changed := false
	if s.health.dbDown.Load() != (err != nil) {
		s.health.outageMu.Lock()
		if changed = s.health.dbDown.Swap(err != nil) != (err != nil); changed {
			now := s.clock.Now().UnixNano()
			if err != nil {
				s.health.outageFrom.Store(now)
			} else if from := s.health.outageFrom.Swap(0); from != 0 {
				s.health.outageNs.Store(now - from)
				s.health.backAt.Store(now)
			}
		}
		s.health.outageMu.Unlock()
	}
	switch {
	case err != nil && changed:
		s.log.Error("database unreachable: no fire is recorded or started until it is back", "err", err)
	case err != nil:
		s.log.Debug("database still unreachable", "err", err)
	case changed:
		s.log.Info("database reachable again")
		s.updates.replayLost() // a promoted standby may lack the last writes (status.go)
	}
}

func (s *Engine) noteRedis(err error) {
	changed := s.health.redisDown.Swap(err != nil) != (err != nil)
	s.metrics.lockFallback(err != nil)
	if changed {
		s.alerts.fallback(err != nil, err)
	}
	switch {
	case err != nil && changed:
		s.log.Warn("slot lock unavailable: claims fall back to the database unique key", "err", err)
	case err == nil && changed:
		s.log.Info("slot lock available again")
	}
}
