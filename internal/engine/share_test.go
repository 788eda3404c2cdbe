package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise: the next minute's slots are shared out among the live
// replicas, so that a minute's fires are recorded, claimed and run by all
// of them, not by whichever reaches Redis first; a replica that does not
// claim its share (dead, not yet known dead) leaves it to the others
// shareWait later, still ahead of the minute.
//
// The replicas are not started: the test calls plan at chosen instants of
// the injected clock, with the live list the heartbeat would have read.
func TestNextMinuteIsSharedOutAmongLiveReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	f := newShareFleet(t, t0, "0 * * * * *")
	a, b := f.replica("replica-a"), f.replica("replica-b")
	require.Equal(t, 5*time.Second, a.planner.shareWait(), "half of ClaimAhead (10s)")
	clock, held, share, withFires := f.clock, f.held, f.share, f.withFires
	recorded := func(m time.Time) (n int64) {
		require.NoError(t, f.db.Model(&store.Execution{}).Where("app = ? AND run_time = ?", f.app, m.UnixMilli()).Count(&n).Error)
		return n
	}

	// Both alive: at ClaimAhead, each takes its share and only that.
	next := t0.Add(time.Minute)
	clock.Set(next.Add(-10 * time.Second))
	f.started(clock.Now(), a, b)
	require.NoError(t, a.planner.plan(ctx, clock.Now()))
	require.NoError(t, b.planner.plan(ctx, clock.Now()))
	a.planner.mu.Lock()
	require.Equal(t, []string{"replica-a", "replica-b"}, a.planner.live, "read again as replica-a saw the minute first")
	a.planner.mu.Unlock()
	require.NotEmpty(t, share(a, next))
	require.NotEmpty(t, share(b, next))
	require.Equal(t, share(a, next), held(a, next), "replica-a holds its share of 10:01")
	require.Equal(t, share(b, next), held(b, next), "replica-b holds its share of 10:01")
	require.Len(t, withFires, len(held(a, next))+len(held(b, next)), "every slot with fires is held once")
	require.Zero(t, recorded(next), "claimed; its fires are recorded recordAhead before them")
	clock.Set(next.Add(-recordAhead))
	require.NoError(t, a.planner.plan(ctx, clock.Now()))
	require.NoError(t, b.planner.plan(ctx, clock.Now()))
	require.EqualValues(t, 64, recorded(next), "each recorded its share")

	// replica-b is dead but still listed: replica-a leaves b's share alone
	// until shareWait has passed, then records it, ahead of the minute.
	next = t0.Add(2 * time.Minute)
	clock.Set(next.Add(-10 * time.Second))
	require.NoError(t, a.planner.heartbeat(ctx, clock.Now()))
	require.NoError(t, b.planner.heartbeat(ctx, clock.Now())) // its last: listed for ReplicaTimeout
	for _, at := range []time.Duration{-10 * time.Second, -8 * time.Second, -6 * time.Second} {
		clock.Set(next.Add(at))
		require.NoError(t, a.planner.plan(ctx, clock.Now()))
		require.Equal(t, share(a, next), held(a, next), "at %s, replica-a holds its share of 10:02 only", clock.Now().Format(time.TimeOnly))
	}
	require.Less(t, recorded(next), int64(64))
	clock.Set(next.Add(-5 * time.Second))
	require.NoError(t, a.planner.plan(ctx, clock.Now()))
	require.Equal(t, withFires, held(a, next), "at 10:01:55, replica-a holds every slot of 10:02")
	require.EqualValues(t, 64, recorded(next), "and recorded them, recordAhead before the minute")
	require.EqualValues(t, 64, recorded(next))

	// Alone in the list (or not in it yet), a replica claims every slot at
	// ClaimAhead.
	a.planner.mu.Lock()
	a.planner.live = []string{"replica-a"}
	a.planner.mu.Unlock()
	next = t0.Add(3 * time.Minute)
	clock.Set(next.Add(-10 * time.Second))
	require.NoError(t, a.planner.plan(ctx, clock.Now()))
	require.Equal(t, withFires, held(a, next))
	clock.Set(next.Add(-recordAhead))
	require.NoError(t, a.planner.plan(ctx, clock.Now()))
	require.EqualValues(t, 64, recorded(next))
}

func TestShareWaitLeavesTheOthersTimeToClaim(t *testing.T) {
	t.Parallel()
	for ahead, want := range map[time.Duration]time.Duration{
		time.Second: 0, 1500 * time.Millisecond: 0, 2 * time.Second: time.Second,
		3 * time.Second: time.Second, 10 * time.Second: 5 * time.Second, 50 * time.Second: 25 * time.Second,
	} {
		p := &planner{opts: Config{ClaimAhead: ahead}}
		require.Equal(t, want, p.shareWait(), "ClaimAhead %s", ahead)
	}
}

// The promise: the minute a fleet starts in is shared out as the next ones
// are: at its first tick, a replica claims its share of the current
// minute only, and the others' startShareWait later if they are still
// free (their replica ticks later, or is listed but dead); alone, it
// claims every slot at once.
func TestTheMinuteAFleetStartsInIsSharedOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 20, 500_000_000, time.UTC)
	this := t0.Truncate(time.Minute)

	// Started together: each holds its share of 10:00 after its first plan.
	f := newShareFleet(t, t0, "* * * * * *")
	a, b := f.replica("replica-a"), f.replica("replica-b")
	f.started(t0, a, b)
	require.NoError(t, a.planner.plan(ctx, t0))
	require.Equal(t, f.share(a, this), f.held(a, this), "replica-a claims its share of the minute it started in")
	require.Equal(t, t0.Add(startShareWait), a.planner.replanAt, "and ticks again for the rest")
	require.NoError(t, b.planner.plan(ctx, t0))
	require.Equal(t, f.share(b, this), f.held(b, this))
	require.NotEmpty(t, f.held(a, this))
	require.NotEmpty(t, f.held(b, this))
	a.planner.replanAt = time.Time{}
	require.NoError(t, a.planner.plan(ctx, t0.Add(startShareWait)))
	require.Equal(t, f.share(a, this), f.held(a, this), "replica-b's share is held by replica-b")
	require.Len(t, f.withFires, len(f.held(a, this))+len(f.held(b, this)), "every slot with fires is held once")

	// replica-c is listed (its Start wrote a heartbeat) but never plans:
	// replica-d takes c's share of the minute startShareWait later.
	f = newShareFleet(t, t0, "* * * * * *")
	c, d := f.replica("replica-c"), f.replica("replica-d")
	f.started(t0, c, d)
	for _, at := range []time.Duration{0, time.Second} {
		require.NoError(t, d.planner.plan(ctx, t0.Add(at)))
		require.Equal(t, f.share(d, this), f.held(d, this), "at +%s, replica-d holds its share only", at)
	}
	require.NotEqual(t, f.withFires, f.held(d, this))
	require.NoError(t, d.planner.plan(ctx, t0.Add(startShareWait)))
	require.Equal(t, f.withFires, f.held(d, this), "at +%s, every slot", startShareWait)

	// Alone in the list: every slot at the first plan.
	f = newShareFleet(t, t0, "* * * * * *")
	e := f.replica("replica-e")
	f.started(t0, e)
	require.NoError(t, e.planner.plan(ctx, t0))
	require.Equal(t, f.withFires, f.held(e, this))
	require.True(t, e.planner.replanAt.IsZero())
}

// The promise: a fleet that starts within shareWait of a minute shares
// that next minute out as it shares the minute it starts in: at its first
// tick a replica claims its share of each, and the others'
// startShareWait later if they are still free. (Before, the others'
// shares of a minute less than shareWait away were claimed at once, by
// whichever replica ticked first: in a fleet started 2 s before a minute,
// one replica ran none of its fires, another four fifths.)
func TestAFleetStartedJustBeforeAMinuteSharesItOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 57, 500_000_000, time.UTC)
	this, next := t0.Truncate(time.Minute), t0.Truncate(time.Minute).Add(time.Minute)

	f := newShareFleet(t, t0, "* * * * * *")
	a, b := f.replica("replica-a"), f.replica("replica-b")
	require.Less(t, next.Sub(t0), a.planner.shareWait(), "the next minute is within shareWait")
	f.started(t0, a, b)
	require.NoError(t, a.planner.plan(ctx, t0))
	for _, m := range []time.Time{this, next} {
		require.NotEmpty(t, f.share(a, m))
		require.Equal(t, f.share(a, m), f.held(a, m), "replica-a claims its share of %s only", m.Format(time.TimeOnly))
	}
	require.Equal(t, t0.Add(startShareWait), a.planner.replanAt, "and ticks again for the rest")
	require.NoError(t, b.planner.plan(ctx, t0.Add(time.Second)))
	a.planner.replanAt = time.Time{}
	require.NoError(t, a.planner.plan(ctx, t0.Add(startShareWait)))
	f.requireDealt(this, a, b)
	f.requireDealt(next, a, b)

	// A share nobody claims (replica-d listed, never planning) is replica-c's
	// startShareWait after it first saw the minute.
	f = newShareFleet(t, t0, "* * * * * *")
	c, d := f.replica("replica-c"), f.replica("replica-d")
	f.started(t0, c, d)
	require.NoError(t, c.planner.plan(ctx, t0))
	require.NotEqual(t, f.withFires, f.held(c, next))
	require.NoError(t, c.planner.plan(ctx, t0.Add(startShareWait)))
	require.Equal(t, f.withFires, f.held(c, this))
	require.Equal(t, f.withFires, f.held(c, next), "at +%s, every slot of the next minute too", startShareWait)
}

// The promise: replicas that settle so close to a minute that
// startShareWait reaches into it still share it out: each claims its own
// share, and the others' only startShareWait later. (Before, the others'
// shares were claimed at once there: a 10,000 step whose fleet started
// 2-3 s before a minute, two of its replicas settling a tick after the
// third, ran that minute on two replicas, one of them with two thirds of
// its fires, late every second.) A listed replica that never claims loses
// its share startShareWait after the others first saw the minute, inside
// it.
func TestAFleetSettlingWithinStartShareWaitOfAMinuteSharesItOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 59, 500_000_000, time.UTC)
	next := t0.Truncate(time.Minute).Add(time.Minute)

	f := newShareFleet(t, t0, "* * * * * *")
	a, b := f.replica("replica-a"), f.replica("replica-b")
	require.True(t, t0.Add(startShareWait).After(next), "the wait reaches into the minute")
	f.started(t0.Add(-time.Second), a, b)
	require.NoError(t, a.planner.plan(ctx, t0))
	require.NotEmpty(t, f.share(a, next))
	require.Equal(t, f.share(a, next), f.held(a, next), "replica-a claims its share of 10:01 only")
	require.Equal(t, t0.Add(startShareWait), a.planner.replanAt, "and ticks again for the rest")
	require.NoError(t, b.planner.plan(ctx, t0.Add(10*time.Millisecond)))
	require.NotEmpty(t, f.held(b, next), "replica-b, settling at the same tick, finds its share free")
	a.planner.replanAt = time.Time{}
	require.NoError(t, a.planner.plan(ctx, t0.Add(startShareWait)))
	f.requireDealt(next, a, b)

	// A share nobody claims (replica-d listed, never planning) is replica-c's
	// startShareWait after it first saw the minute, a second into it.
	f = newShareFleet(t, t0, "* * * * * *")
	c, d := f.replica("replica-c"), f.replica("replica-d")
	f.started(t0.Add(-time.Second), c, d)
	require.NoError(t, c.planner.plan(ctx, t0))
	require.NotEqual(t, f.withFires, f.held(c, next))
	require.NoError(t, c.planner.plan(ctx, next.Add(time.Second)))
	require.NotEqual(t, f.withFires, f.held(c, next), "at 10:01:01, replica-d's share is still left to it")
	require.NoError(t, c.planner.plan(ctx, t0.Add(startShareWait)))
	require.Equal(t, f.withFires, f.held(c, next), "at +%s, every slot of 10:01", startShareWait)

	// A running fleet is not held back by the start's wait: a replica
	// that saw 10:01 first at ClaimAhead claims the others' free shares
	// shareWait later, at once.
	f = newShareFleet(t, t0, "* * * * * *")
	e, g := f.replica("replica-e"), f.replica("replica-g")
	f.started(t0.Add(-time.Minute), e, g)
	require.NoError(t, e.planner.plan(ctx, t0.Add(-time.Minute)))
	require.NoError(t, e.planner.plan(ctx, next.Add(-10*time.Second)))
	require.Equal(t, f.share(e, next), f.held(e, next))
	require.NoError(t, e.planner.heartbeat(ctx, next.Add(-5*time.Second)))
	require.NoError(t, g.planner.heartbeat(ctx, next.Add(-5*time.Second)))
	require.NoError(t, e.planner.plan(ctx, next.Add(-5*time.Second)))
	require.Equal(t, f.withFires, f.held(e, next), "shareWait before 10:01, every slot")
}

// The promise: a replica whose look at the live list finds it changed
// looks again liveSettleLook later, not a tick later, so that replicas
// whose Starts straddle a tick instant, the later one seeing its sibling's
// heartbeat only at its first tick, each claim their share: the earlier
// one takes the others' shares startShareWait after its first tick, after
// that second look. (Before, the later one looked again a tick later,
// three quarters of a second after the earlier one had taken its share.) The
// replicas plan at the instants their tick loops would: each tick, and
// the replanAt each asked for.
func TestASiblingThatSeesTheListChangeLooksAgainSoon(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 10, 0, 20, 500_000_000, time.UTC)
	f := newShareFleet(t, t0, "* * * * * *")
	b := f.replica("replica-b")
	f.started(t0.Add(-700*time.Millisecond), b) // b's Start reads {b}
	a := f.replica("replica-a")
	f.started(t0.Add(-600*time.Millisecond), a) // a's reads {a, b}
	ctx, this := context.Background(), t0.Truncate(time.Minute)

	next := map[*Engine]time.Time{a: t0, b: t0.Add(time.Second)} // b's first tick is a second later
	for range 8 {
		s := a
		if next[b].Before(next[a]) {
			s = b
		}
		now := next[s]
		s.planner.replanAt = time.Time{}
		require.NoError(t, s.planner.plan(ctx, now))
		next[s] = now.Add(untilTick(now))
		if at := s.planner.replanAt; !at.IsZero() && at.Before(next[s]) {
			next[s] = at
		}
		if s == b && now.Equal(t0.Add(time.Second)) {
			require.Empty(t, f.held(b, this), "b's list changed since its Start: it claims nothing yet")
			require.Equal(t, now.Add(liveSettleLook), next[b], "and looks again liveSettleLook later")
		}
	}
	f.requireDealt(this, a, b)
}

// The promise: a replica whose siblings are still starting does not deal
// itself a share by a live list that lacks them. Its first claims wait,
// liveSettleLook at a time, until two reads of the list agree (at most
// liveSettleMax); then each replica holds its share by the whole list.
// (Before, replica-a claimed its share by {a, b} at its first tick, half
// the minute's slots; replica-c found a third of its share held, and the
// minute's fires went to the replicas one half and two quarters.)
func TestAStartingReplicaWaitsForTheLiveListToSettle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 20, 500_000_000, time.UTC)
	this := t0.Truncate(time.Minute)
	f := newShareFleet(t, t0, "* * * * * *")
	a, b, c := f.replica("replica-a"), f.replica("replica-b"), f.replica("replica-c")
	f.started(t0, a)
	f.started(t0, b)
	require.NoError(t, a.planner.plan(ctx, t0))
	require.Empty(t, f.held(a, this), "replica-a's list grew since its Start: it claims nothing yet")
	require.Equal(t, t0.Add(liveSettleLook), a.planner.replanAt, "and looks again liveSettleLook later")
	f.started(t0.Add(500*time.Millisecond), c)
	for _, s := range []*Engine{a, b} {
		require.NoError(t, s.planner.plan(ctx, t0.Add(time.Second)))
		require.Empty(t, f.held(s, this), "%s's list grew since it last read it", s.opts.InstanceID)
	}
	require.NoError(t, c.planner.plan(ctx, t0.Add(time.Second)))
	require.Equal(t, f.share(c, this), f.held(c, this), "replica-c's list is the one its Start read")
	for _, s := range []*Engine{a, b} {
		require.NoError(t, s.planner.plan(ctx, t0.Add(2*time.Second)))
	}
	require.NoError(t, c.planner.plan(ctx, t0.Add(time.Second+startShareWait)))
	for _, s := range []*Engine{a, b, c} {
		s.planner.mu.Lock()
		require.Len(t, s.planner.live, 3, "%s deals by the three", s.opts.InstanceID)
		s.planner.mu.Unlock()
	}
	f.requireDealt(this, a, b, c)

	// A list that changes at every read holds the first claims back
	// liveSettleMax at most: replica-d claims its share by the list it has.
	f = newShareFleet(t, t0, "* * * * * *")
	d := f.replica("replica-d")
	f.started(t0, d)
	var at time.Duration
	for i := 0; at < liveSettleMax; i++ {
		f.started(t0.Add(at), f.replica(fmt.Sprintf("replica-e%d", i)))
		require.NoError(t, d.planner.plan(ctx, t0.Add(at)))
		require.Empty(t, f.held(d, this), "at +%s", at)
		at += time.Second
	}
	f.started(t0.Add(at), f.replica("replica-f"))
	require.NoError(t, d.planner.plan(ctx, t0.Add(at)))
	require.NotEmpty(t, f.held(d, this))
	require.Equal(t, f.share(d, this), f.held(d, this), "at +%s, replica-d claims its share", at)
}

// shareFleet is replicas of one app on one SQLite database and one lock,
// as Redis would be, each with the same 64 tasks of spec, that the share
// tests plan at chosen instants of the injected clock. They are never
// started.
type shareFleet struct {
	t         *testing.T
	db        *gorm.DB
	app, spec string
	clock     *fakeclock.Clock
	locker    Locker
	withFires map[int]bool // buckets that have tasks
}

// started writes the replicas' first heartbeats at at, as their Starts
// do, and has each read the live list again: the fleet's Starts all
// wrote theirs before any replica's first tick, so each first plan finds
// the list its Start read and claims at once (settling).
func (f *shareFleet) started(at time.Time, replicas ...*Engine) {
	ctx := context.Background()
	for _, s := range replicas {
		require.NoError(f.t, s.planner.heartbeat(ctx, at))
	}
	for _, s := range replicas {
		require.NoError(f.t, s.planner.refreshLive(ctx, at))
	}
}

func newShareFleet(t *testing.T, t0 time.Time, spec string) *shareFleet {
	clock := fakeclock.New(t0)
	return &shareFleet{t: t, db: testsvc.SQLite(t), app: testsvc.App(t), spec: spec, clock: clock,
		locker: NewLocalLocker(clock), withFires: map[int]bool{}}
}

func (f *shareFleet) replica(id string) *Engine {
	s := newEngine(f.t, setupOpts{db: f.db, app: f.app, clock: f.clock}, func(o *Config) {
		o.InstanceID, o.Locker = id, f.locker
	})
	require.NoError(f.t, s.store.Migrate(context.Background()))
	for i := range 64 {
		code := fmt.Sprintf("report.%02d", i)
		s.view.adoptTask(store.Task{ID: int64(i + 1), App: f.app, Code: code, Kind: store.KindFunc,
			Spec: f.spec, TimeZone: "UTC", Status: store.TaskActive, MaxAttempts: 1,
			CreatedMs: f.clock.Now().Add(-time.Hour).UnixMilli(), Version: 1})
		f.withFires[bucketOf(code, s.opts.Buckets)] = true
	}
	return s
}

// held returns the buckets of minute m whose lock s holds.
func (f *shareFleet) held(s *Engine, m time.Time) map[int]bool {
	out := map[int]bool{}
	for _, k := range s.keeper.heldKeys() {
		if k.minute == m.Unix()/60 {
			out[k.bucket] = true
		}
	}
	return out
}

// requireDealt checks that each of replicas holds its share of minute m,
// and only that, and that every slot of m with fires is held by one of
// them.
func (f *shareFleet) requireDealt(m time.Time, replicas ...*Engine) {
	f.t.Helper()
	held := 0
	for _, s := range replicas {
		h := f.held(s, m)
		require.NotEmpty(f.t, h, "%s holds slots of %s", s.opts.InstanceID, m.Format(time.TimeOnly))
		require.Equal(f.t, f.share(s, m), h, "%s holds its share of %s", s.opts.InstanceID, m.Format(time.TimeOnly))
		held += len(h)
	}
	require.Len(f.t, f.withFires, held, "every slot of %s with fires is held once", m.Format(time.TimeOnly))
}

// share returns the buckets with fires of minute m that are s's share.
func (f *shareFleet) share(s *Engine, m time.Time) map[int]bool {
	out := map[int]bool{}
	for bucket := range f.withFires {
		s.planner.mu.Lock()
		mine := s.planner.sharesLocked(slotKey{m.Unix() / 60, bucket})
		s.planner.mu.Unlock()
		if mine {
			out[bucket] = true
		}
	}
	return out
}

// After an outage of the database long enough for every heartbeat to run
// out, the first replica back must not take the others for lost: they
// could not heart-beat either. rescueLost waits two heartbeat intervals
// from the database's return; a replica that has not heart-beaten by then
// is lost, and its run is settled.
func TestRescueWaitsForTheOthersAfterADatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	f := newShareFleet(t, t0, "0 * * * * *")
	a, b := f.replica("replica-a"), f.replica("replica-b")
	require.NoError(t, a.planner.heartbeat(ctx, f.clock.Now()))
	require.NoError(t, b.planner.heartbeat(ctx, f.clock.Now()))
	rows, err := b.store.InsertFires(ctx, []store.Execution{{App: f.app, TaskCode: "report.01", RunTime: t0.UnixMilli(),
		Status: store.StatusScheduled, Replica: "replica-b", MaxAttempts: 1}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	ok, err := b.store.StartAttempt(ctx, rows[0].ID, 1, "replica-b", t0.UnixMilli())
	require.NoError(t, err)
	require.True(t, ok)
	status := func() string {
		got, getErr := a.store.Execution(ctx, rows[0].ID)
		require.NoError(t, getErr)
		return got.Status
	}

	// The database is away 40 s, past ReplicaTimeout (30 s), for both. The
	// first tick back rescues before it notes its own result (noteDB).
	a.noteDB(errors.New("connection refused"))
	f.clock.Advance(40 * time.Second)
	require.NoError(t, a.planner.heartbeat(ctx, f.clock.Now()))
	require.NoError(t, a.planner.rescueLost(ctx, f.clock.Now()))
	require.Equal(t, store.StatusRunning, status(), "replica-b's run is left to it in the first tick back")
	a.noteDB(nil)
	require.NoError(t, a.planner.rescueLost(ctx, f.clock.Now()))
	require.Equal(t, store.StatusRunning, status(), "replica-b's run is left to it right after the outage")
	f.clock.Advance(9 * time.Second)
	require.NoError(t, a.planner.heartbeat(ctx, f.clock.Now()))
	require.NoError(t, a.planner.rescueLost(ctx, f.clock.Now()))
	require.Equal(t, store.StatusRunning, status(), "two heartbeat intervals are not over")

	// replica-b never heart-beats again: lost once the wait is over.
	f.clock.Advance(time.Second)
	require.NoError(t, a.planner.heartbeat(ctx, f.clock.Now()))
	require.NoError(t, a.planner.rescueLost(ctx, f.clock.Now()))
	require.Equal(t, store.StatusFailed, status(), "replica-b is lost: its run is settled")

	// A blip shorter than a heartbeat interval does not hold a rescue back.
	rows, err = b.store.InsertFires(ctx, []store.Execution{{App: f.app, TaskCode: "report.02", RunTime: t0.UnixMilli(),
		Status: store.StatusScheduled, Replica: "replica-b", MaxAttempts: 1}})
	require.NoError(t, err)
	ok, err = b.store.StartAttempt(ctx, rows[0].ID, 1, "replica-b", t0.UnixMilli())
	require.NoError(t, err)
	require.True(t, ok)
	a.noteDB(errors.New("connection reset"))
	f.clock.Advance(time.Second)
	a.noteDB(nil)
	back, length := a.health.lastOutage(f.clock.Now())
	require.True(t, back.Equal(f.clock.Now()), "back at %s", back)
	require.Equal(t, time.Second, length)
	require.NoError(t, a.planner.heartbeat(ctx, f.clock.Now()))
	require.NoError(t, a.planner.rescueLost(ctx, f.clock.Now()))
	require.Equal(t, store.StatusFailed, status(), "settled right after a 1 s blip")
}
