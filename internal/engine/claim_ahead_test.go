package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The promise: fires are claimed a little ahead of their run time, so that
// handlers start on time without a database round trip; a claimed fire
// still starts at its run time, never before, and one claimed when the
// replica stops is handed on unstarted.
func TestFireClaimedAheadStartsAtItsRunTimeAndIsReleasedOnStop(t *testing.T) {
	t.Parallel()
	for _, stopFirst := range []bool{false, true} {
		name := "runs"
		if stopFirst {
			name = "stopped before its run time"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, app := testsvc.SQLite(t), testsvc.App(t)
			ctx := context.Background()
			clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
			iv := newInvocations()
			s := newEngine(t, setupOpts{db: db, app: app, clock: clock}, nil)
			mustRegister(t, s, "a", "0 * * * * *", iv.handler(nil))
			require.NoError(t, s.Start(ctx))
			stopOnCleanup(t, s)
			row := func(t assert.TestingT) store.Execution {
				var out []store.Execution
				assert.NoError(t, db.Where("app = ?", app).Find(&out).Error)
				if len(out) != 1 {
					return store.Execution{}
				}
				return out[0]
			}
			waitIdle(ctx, t, clock, s)
			clock.Advance(54*time.Second + 500*time.Millisecond) // 10:00:55: the 10:01 fire is recorded
			require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NotZero(c, row(c).ID) }, 10*time.Second, 10*time.Millisecond)
			runTime := time.Date(2026, 11, 30, 10, 1, 0, 0, time.UTC).UnixMilli()

			// 1 ms before the run time: within any claim lead (at least 2 ms).
			waitIdle(ctx, t, clock, s)
			clock.Advance(5*time.Second - time.Millisecond)
			require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NotZero(c, row(c).StartedMs) }, 10*time.Second, 10*time.Millisecond)
			r := row(t)
			require.Equal(t, runTime, r.StartedMs, "the start is recorded at the run time")
			require.Zero(t, r.LatenessMs)
			select {
			case run := <-iv.ch:
				t.Fatalf("handler called at %s, before its run time %s", clock.Now(), run.ScheduledAt)
			case <-time.After(200 * time.Millisecond):
			}

			if stopFirst {
				stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				require.NoError(t, s.Stop(stopCtx))
				r = row(t)
				require.Equal(t, store.StatusScheduled, r.Status)
				require.Zero(t, r.StartedMs, "unclaimed")
				require.Empty(t, r.Replica, "handed on for another replica to claim")
				require.Empty(t, iv.calls)
				return
			}
			clock.Advance(time.Millisecond) // 10:01:00
			run := iv.next(t, 10*time.Second)
			require.Equal(t, runTime, run.ScheduledAt.UnixMilli())
			require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, store.StatusSucceeded, row(c).Status) }, 10*time.Second, 10*time.Millisecond)
			require.Equal(t, runTime, row(t).StartedMs)
		})
	}
}

// The promise: fires due at one instant are claimed as far ahead as their
// claim is expected to take, so that a burst starts on time: with 20
// fires at 10:01 and 5 ms of claim per fire seen before, about 200 ms
// ahead, where one fire alone is claimed 2 ms ahead; a fire of the instant
// whose task forbids overlap still at its run time.
func TestFiresOfOneInstantAreClaimedAheadByTheirNumber(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
	iv := newInvocations()
	s := newEngine(t, setupOpts{db: db, app: app, clock: clock}, nil)
	s.dispatcher.claimPerFire.avg = 5 * time.Millisecond // as if measured by earlier claims
	require.Equal(t, 201*time.Millisecond, s.dispatcher.claimLead(20))
	for i := range 20 {
		mustRegister(t, s, fmt.Sprintf("burst.%02d", i), "0 * * * * *", iv.handler(nil))
	}
	// One of the instant's tasks forbids overlap: whether its previous fire
	// still runs is known only at the run time, so it is claimed then.
	mustRegister(t, s, "burst.forbid", "0 * * * * *", iv.handler(nil), func(d *store.Definition) { d.Overlap = OverlapForbid })
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)
	claimed := func(t assert.TestingT) (n int) {
		var rows []store.Execution
		assert.NoError(t, db.Where("app = ?", app).Find(&rows).Error)
		for _, r := range rows {
			if r.StartedMs != 0 {
				n++
			}
		}
		return n
	}
	waitIdle(ctx, t, clock, s)
	clock.Advance(54*time.Second + 500*time.Millisecond) // 10:00:55: the 10:01 fires are recorded
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int64
		if assert.NoError(c, db.Model(&store.Execution{}).Where("app = ?", app).Count(&n).Error) {
			assert.Equal(c, int64(21), n)
		}
	}, 10*time.Second, 10*time.Millisecond)

	waitIdle(ctx, t, clock, s)
	clock.Advance(4*time.Second + 700*time.Millisecond) // 10:00:59.700: 300 ms before
	time.Sleep(100 * time.Millisecond)                  // room for a wrong claim to land
	require.Zero(t, claimed(t), "not claimed 300 ms ahead")
	clock.Advance(150 * time.Millisecond) // 10:00:59.850: 150 ms before
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, 20, claimed(c)) }, 10*time.Second, 10*time.Millisecond,
		"the 20 fires claimed together, 150 ms ahead")
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, 20, claimed(t), "the overlap-forbid fire of the instant waits for its run time")
	select {
	case run := <-iv.ch:
		t.Fatalf("handler called at %s, before its run time %s", clock.Now(), run.ScheduledAt)
	case <-time.After(100 * time.Millisecond):
	}
	clock.Advance(150 * time.Millisecond) // 10:01:00
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, 21, claimed(c)) }, 10*time.Second, 10*time.Millisecond)
	for range 21 {
		iv.next(t, 10*time.Second)
	}
}

func TestClaimLeadGrowsWithTheFiresOfAnInstant(t *testing.T) {
	t.Parallel()
	d := &dispatcher{}
	require.Equal(t, minClaimLead, d.claimLead(1), "nothing measured yet")
	require.Equal(t, 2*380*assumedClaimPerFire+time.Millisecond, d.claimLead(380), "nothing measured yet")
	d.noteClaim(4*time.Millisecond, 1)     // a round trip
	d.noteClaim(90*time.Millisecond, 3000) // 30 µs a fire
	require.Equal(t, 4*time.Millisecond, d.claimRTT.avg)
	require.Equal(t, 30*time.Microsecond, d.claimPerFire.avg)
	// One sample each: the deviation starts at half of it, so the lead
	// is three times the expected claim, until more claims are timed.
	require.Equal(t, 3*(4*time.Millisecond+30*time.Microsecond)+time.Millisecond, d.claimLead(1))
	require.Equal(t, 3*(4*time.Millisecond+30*time.Millisecond)+time.Millisecond, d.claimLead(1000))
	require.Equal(t, maxClaimLead, d.claimLead(20_000), "bounded")
	d.noteClaim(50*time.Millisecond, 1000) // 50 µs a fire: the average moves a quarter of the way
	require.Equal(t, 35*time.Microsecond, d.claimPerFire.avg)
	require.Equal(t, 15*time.Microsecond+(20*time.Microsecond-15*time.Microsecond)/4, d.claimPerFire.dev, "and the deviation a quarter of the way from 15 µs to 20")
}

// The promise: a claim whose time varies (the commit's flush on a durable
// database has a long tail) is made further ahead than twice its mean: by
// four mean deviations, or by a quarter more than the slowest of the last
// claimRecent claims, so that the slow claims of the tail still end before
// the run time; a steady one keeps twice its mean.
func TestClaimLeadCoversTheSpreadOfClaimTimes(t *testing.T) {
	t.Parallel()
	steady := &dispatcher{}
	for range 20 {
		steady.noteClaim(4*time.Millisecond, 1)
	}
	// One fire: its round trip and the per-fire cost assumed until a big
	// claim is timed.
	require.Equal(t, 2*(4*time.Millisecond+assumedClaimPerFire)+time.Millisecond, steady.claimLead(1), "no spread: twice the mean")

	spread := &dispatcher{}
	for i := range 20 { // mostly 3 ms, every fifth claim 13 ms
		took := 3 * time.Millisecond
		if i%5 == 4 {
			took = 13 * time.Millisecond
		}
		spread.noteClaim(took, 1)
	}
	lead := spread.claimLead(1)
	expect := spread.claimRTT.avg + assumedClaimPerFire
	require.Greater(t, lead, 2*expect+time.Millisecond, "more than twice the mean")
	require.Equal(t, max(expect+4*spread.claimRTT.dev, 13*time.Millisecond*5/4)+time.Millisecond, lead)
	require.Greater(t, lead, 13*time.Millisecond, "the slow claims of the tail end before the run time")

	// One slow claim in a steady minute: the next minute's claims go a
	// quarter more ahead than it took, then, once claimRecent claims later
	// it is forgotten, back to twice the mean.
	spike := &dispatcher{}
	for range claimRecent {
		spike.noteClaim(20*time.Millisecond, 1)
	}
	spike.noteClaim(60*time.Millisecond, 1)
	require.Equal(t, 75*time.Millisecond+time.Millisecond, spike.claimLead(1))
	for range claimRecent {
		spike.noteClaim(20*time.Millisecond, 1)
	}
	require.Less(t, spike.claimLead(1), 60*time.Millisecond, "the spike forgotten")

	big := &dispatcher{} // per fire, for claims of bigClaim fires or more
	for i := range 20 {
		took := 300 * time.Millisecond
		if i%5 == 4 {
			took = 900 * time.Millisecond
		}
		big.noteClaim(took, 3000)
	}
	require.Greater(t, big.claimLead(3000), 900*time.Millisecond)
	require.LessOrEqual(t, big.claimLead(3000), maxClaimLead, "bounded")
}
