package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is the clock reference of docs/architecture.md ("Clock
// reference"). Replicas agree on a fire's instant only if they agree on
// the time: a replica whose clock runs 30 s fast records fires 30 s
// early, takes the others' fires for misfires and starts its
// own 30 s early. So each replica measures its clock's offset against the
// database's, the one clock every replica reaches and whose rows they
// share, with its heartbeats, and the engine runs on its own clock plus
// that offset (RefClock): it plans, claims, starts, records and measures
// lateness in the database's time.
//
// A sample is one query of the database's clock (store.DBNow) between two
// readings of the replica's: offset = database − midpoint of the two, with
// an uncertainty of half the round trip. The estimate is the sample of
// the lowest round trip among the last clockSamples; a sample that took
// longer than maxSampleRTT is dropped, and one that disagrees with the
// estimate beyond both their uncertainties (the replica's clock was set,
// by NTP or a person) starts the window again. Redis's TIME, when the
// replica has Redis, is read beside it as a cross-check only: it is not
// what the rows are compared with.

const (
	// clockSamples is the window of samples the estimate is taken from.
	clockSamples = 8
	// maxSampleRTT: a sample whose round trip took longer says too little.
	maxSampleRTT = time.Second
	// clockStep: beyond both uncertainties and this, a sample that
	// disagrees with the estimate means the replica's clock was set.
	clockStep = 50 * time.Millisecond
	// startSamples is how many samples Start takes, before the first tick.
	startSamples = 3
	// ClockSkewAlert is the offset beyond which EventClockSkew is raised.
	ClockSkewAlert = time.Second
	// redisDisagreement: Redis's clock and the database's further apart
	// than this is logged, once until they agree again.
	redisDisagreement = time.Second
)

// RefClock is the engine's clock when the replica measures its clock
// against the database's (Options.ClockReference): its Now is the
// underlying clock's plus the current offset; its timers are the
// underlying clock's (a duration is the same on both).
//
// It counts from the instant of the last measurement by the elapsed time
// between the underlying clock's readings, which on the system clock is
// the monotonic clock's: a host clock set forward or back between two
// heartbeats does not move it, and the next measurement finds the new
// offset.
type RefClock struct {
	base  Clock
	point atomic.Pointer[refPoint] // nil: no offset yet
}

// refPoint is one reading of the underlying clock (base) and the
// database's time it stands for (ref).
type refPoint struct {
	base, ref time.Time
	offset    time.Duration
}

// NewRefClock returns base corrected by an offset of 0 until the engine
// measures one.
func NewRefClock(base Clock) *RefClock { return &RefClock{base: base} }

// Now returns the underlying clock's instant plus the offset.
func (c *RefClock) Now() time.Time {
	now := c.base.Now()
	p := c.point.Load()
	if p == nil {
		return now
	}
	return p.ref.Add(now.Sub(p.base))
}

// NewTimer is the underlying clock's.
func (c *RefClock) NewTimer(d time.Duration) Timer { return c.base.NewTimer(d) }

// AfterFunc is the underlying clock's (executor.AfterFunc).
func (c *RefClock) AfterFunc(d time.Duration, f func()) executor.Stopper {
	return executor.AfterFunc(c.base, d, f)
}

// Offset is the current correction: the database's clock minus the
// underlying one, as last measured.
func (c *RefClock) Offset() time.Duration {
	if p := c.point.Load(); p != nil {
		return p.offset
	}
	return 0
}

// set corrects the clock by offset from now on.
func (c *RefClock) set(offset time.Duration) {
	now := c.base.Now()
	c.point.Store(&refPoint{base: now, ref: now.Add(offset), offset: offset})
}

// realTime reports whether clock runs in real time, corrected or not: the
// dispatcher starts fires a little early only on such a clock (startEarly).
func realTime(clock Clock) bool {
	if c, ok := clock.(*RefClock); ok {
		clock = c.base
	}
	_, ok := clock.(SystemClock)
	return ok
}

// clockSample is one reading of the database's clock.
type clockSample struct {
	offset time.Duration // the database's clock minus the replica's
	rtt    time.Duration
}

// clockRef measures the offset and sets the RefClock by it. It exists when
// Config.Reference is set; its methods are no-ops on a nil receiver. The
// tick loop's heartbeat and Start call measure, one at a time; Health and
// the heartbeat read the state.
type clockRef struct {
	clock     *RefClock
	store     *store.Store
	redisTime func(context.Context) (time.Time, error) // nil without Redis
	maxSkew   time.Duration
	replica   string // the alert's subject
	log       *slog.Logger
	metrics   *metrics
	alerts    *alerter

	mu          sync.Mutex
	samples     []clockSample // the window, oldest first
	estimate    clockSample
	measured    bool
	skewedSince time.Time // start of the offset's episode above ClockSkewAlert; zero below
	redisOff    bool      // Redis disagrees with the database: logged

	refused atomic.Bool // offset beyond maxSkew: claim nothing
}

func newClockRef(s *Engine) *clockRef {
	if s.opts.Reference == nil {
		return nil
	}
	return &clockRef{clock: s.opts.Reference, store: s.store, redisTime: s.opts.RedisTime, maxSkew: s.opts.MaxClockSkew,
		replica: s.opts.InstanceID, log: s.log, metrics: s.metrics, alerts: s.alerts}
}

// refusing reports whether the offset is beyond Options.MaxClockSkew: the
// replica claims no slot, no orphan fire and no retry, and deals itself no
// shard, until it comes back under.
func (c *clockRef) refusing() bool { return c != nil && c.refused.Load() }

// state returns the estimate, as the heartbeat writes it and Health shows
// it; ok is false before the first sample (or without a reference).
func (c *clockRef) state() (est clockSample, refused, ok bool) {
	if c == nil {
		return clockSample{}, false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.estimate, c.refused.Load(), c.measured
}

// ClockHealth says whether the replica claims as its clock's offset from
// the database's allows (Health), with the offset and its uncertainty;
// ok, "not measured" without a clock reference.
func (s *Engine) ClockHealth() (ok bool, detail string, uncertainty time.Duration) {
	est, refused, measured := s.ref.state()
	switch {
	case s.ref == nil:
		return true, "not measured (Options.ClockReference off)", 0
	case !measured:
		return true, "not measured yet", 0
	case refused:
		return false, fmt.Sprintf("%s off the database's clock (±%s), beyond MaxClockSkew %s: claiming nothing",
			skewText(est.offset), est.rtt/2, s.ref.maxSkew), est.rtt / 2
	}
	return true, fmt.Sprintf("%s off the database's clock (±%s), corrected", skewText(est.offset), est.rtt/2), est.rtt / 2
}

// calibrate takes startSamples samples: Start's, before anything is
// planned or recorded.
func (c *clockRef) calibrate(ctx context.Context) error {
	for range startSamples {
		if err := c.measure(ctx); err != nil {
			return err
		}
	}
	return nil
}

// measure takes one sample of the database's clock (and Redis's, to
// compare), folds it into the estimate and sets the clock by it. It fails
// only when the database does not answer.
func (c *clockRef) measure(ctx context.Context) error {
	if c == nil {
		return nil
	}
	s, err := c.sample(ctx, c.store.DBNow)
	if err != nil {
		return err
	}
	if s.rtt > maxSampleRTT {
		c.log.Debug("database clock sample dropped: slow round trip", "rtt", s.rtt)
		return nil
	}
	c.mu.Lock()
	switch {
	case !c.measured:
		c.samples = []clockSample{s}
	case (s.offset - c.estimate.offset).Abs() > (s.rtt+c.estimate.rtt)/2+clockStep:
		c.log.Info("clock offset changed: the replica's clock was set", "from", c.estimate.offset, "to", s.offset)
		c.samples = []clockSample{s}
	default:
		c.samples = append(c.samples, s)
		if len(c.samples) > clockSamples {
			c.samples = c.samples[1:]
		}
	}
	best := c.samples[0]
	for _, x := range c.samples[1:] {
		if x.rtt <= best.rtt { // the latest of equals
			best = x
		}
	}
	c.estimate, c.measured = best, true
	c.clock.set(best.offset)
	c.mu.Unlock()
	c.metrics.clockOffset(best.offset)
	c.judge(best)
	c.crossCheck(ctx, s)
	return nil
}

// sample reads the database's clock (read) between two readings of the
// underlying clock.
func (c *clockRef) sample(ctx context.Context, read func(context.Context) (time.Time, error)) (clockSample, error) {
	send := c.clock.base.Now()
	ref, err := read(ctx)
	recv := c.clock.base.Now()
	if err != nil {
		return clockSample{}, err
	}
	rtt := max(recv.Sub(send), 0)
	return clockSample{offset: ref.Sub(send.Add(rtt / 2)), rtt: rtt}, nil
}

// judge raises EventClockSkew once per episode of the offset beyond
// ClockSkewAlert (again as it goes beyond MaxClockSkew), and starts and
// ends the refusal, logging each change once.
func (c *clockRef) judge(est clockSample) {
	off := est.offset.Abs()
	now := c.clock.Now()
	c.mu.Lock()
	since, started, ended := c.skewedSince, false, false
	switch {
	case off > ClockSkewAlert && since.IsZero():
		c.skewedSince, since, started = now, now, true
	case off <= ClockSkewAlert && !since.IsZero():
		c.skewedSince, ended = time.Time{}, true
	}
	c.mu.Unlock()
	refuse := off > c.maxSkew
	changed := c.refused.Swap(refuse) != refuse
	switch {
	case refuse && changed:
		c.log.Error("clock too far from the database's: this replica claims nothing until it is back within Options.MaxClockSkew",
			"offset", est.offset, "uncertainty", est.rtt/2, "max_clock_skew", c.maxSkew)
	case changed:
		c.log.Info("clock back within Options.MaxClockSkew of the database's: claiming again", "offset", est.offset, "max_clock_skew", c.maxSkew)
	case started:
		c.log.Warn("clock off the database's by more than a second: the replica runs on the database's time",
			"offset", est.offset, "uncertainty", est.rtt/2)
	case ended:
		c.log.Info("clock within a second of the database's again", "offset", est.offset)
	}
	if started || (refuse && changed) {
		msg := fmt.Sprintf("replica clock off the database's by %s (±%s): corrected", skewText(est.offset), est.rtt/2)
		occurrence := strconv.FormatInt(since.UnixMilli(), 10)
		if refuse {
			msg = fmt.Sprintf("replica clock off the database's by %s (±%s), beyond MaxClockSkew %s: the replica claims no fire",
				skewText(est.offset), est.rtt/2, c.maxSkew)
			occurrence += "-refused"
		}
		c.alerts.raise(Event{Kind: EventClockSkew, At: now, ClockOffset: est.offset, Message: msg}, c.replica, occurrence)
	}
}

// skewText says how the replica's clock is off: "30s fast" for an offset
// of −30 s (the database's clock is behind the replica's).
// The offset is given to the millisecond: the measure is no finer (its
// uncertainty follows it), and 29.999991249s reads worse than 30s.
func skewText(offset time.Duration) string {
	if offset < 0 {
		return (-offset).Round(time.Millisecond).String() + " fast"
	}
	return offset.Round(time.Millisecond).String() + " slow"
}

// crossCheck reads Redis's clock, when the replica has Redis, and logs
// once that it disagrees with the database's by more than
// redisDisagreement (db is the database's sample just taken). Redis is
// not the reference: the rows are what replicas agree on.
func (c *clockRef) crossCheck(ctx context.Context, db clockSample) {
	if c.redisTime == nil {
		return
	}
	s, err := c.sample(ctx, c.redisTime)
	if err != nil || s.rtt > maxSampleRTT {
		c.log.Debug("Redis clock not compared", "err", err, "rtt", s.rtt)
		return
	}
	apart := s.offset - db.offset
	off := apart.Abs() > redisDisagreement+(s.rtt+db.rtt)/2
	c.mu.Lock()
	changed := c.redisOff != off
	c.redisOff = off
	c.mu.Unlock()
	switch {
	case off && changed:
		c.log.Warn("Redis's clock disagrees with the database's; the replicas go by the database's", "redis_minus_db", apart)
	case changed:
		c.log.Info("Redis's clock agrees with the database's again", "redis_minus_db", apart)
	}
}
