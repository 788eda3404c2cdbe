package store_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

const window = int64(60_000)

func raise(b *bundle, replica, occurrence string, atMs int64) store.AlertRaise {
	return store.AlertRaise{App: b.app, Kind: "execution.failed", Subject: "billing", Occurrence: occurrence, Count: 1,
		Event: fmt.Sprintf(`{"at":%d,"by":%q}`, atMs, replica), AtMs: atMs, WindowMs: window,
		Replica: replica, LeaseUntilMs: atMs + 60_000}
}

// Three replicas raising the same kind and subject at once: one claims
// the alert, the others' events are counted into the next one.
func TestRaiseAlertLetsOneReplicaClaimPerWindow(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		var mu sync.Mutex
		var claims []*store.AlertClaim
		var wg sync.WaitGroup
		for r := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					c, err := b.store.RaiseAlert(b.ctx, raise(b, fmt.Sprint("replica-", r), "", t0))
					if err != nil {
						t.Error(err)
						return
					}
					if c != nil {
						mu.Lock()
						claims = append(claims, c)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		require.Len(t, claims, 1)
		require.Zero(t, claims[0].Suppressed)
		require.False(t, claims[0].Digest)

		// Delivered; later in the window, more events are damped.
		require.NoError(t, b.store.AlertDone(b.ctx, claims[0].ID, "nobody"), "done by another replica changes nothing")
		due, err := b.store.DueAlerts(b.ctx, b.app, t0+1000, window, 10)
		require.NoError(t, err)
		require.Empty(t, due, "pending, and its lease has not ended")
		var row store.Alert
		require.NoError(t, b.db.First(&row, claims[0].ID).Error)
		require.NoError(t, b.store.AlertDone(b.ctx, claims[0].ID, row.Lease))
		c, err := b.store.RaiseAlert(b.ctx, raise(b, "replica-0", "", t0+30_000))
		require.NoError(t, err)
		require.Nil(t, c)

		// After the window the next event claims, carrying the 59 + 1 damped.
		c, err = b.store.RaiseAlert(b.ctx, raise(b, "replica-1", "", t0+window))
		require.NoError(t, err)
		require.NotNil(t, c)
		require.Equal(t, int64(60), c.Suppressed)
		require.Equal(t, t0, c.SinceMs, "the count covers the window since the alert before")
		require.JSONEq(t, fmt.Sprintf(`{"at":%d,"by":"replica-1"}`, t0+window), c.Event)
	})
}

// A window that ends with damped events and no new one is closed by one
// digest, claimed by one of the replicas that try.
func TestDigestOfADampedWindowIsClaimedOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		first, err := b.store.RaiseAlert(b.ctx, raise(b, "replica-0", "", t0))
		require.NoError(t, err)
		require.NotNil(t, first)
		require.NoError(t, b.store.AlertDone(b.ctx, first.ID, "replica-0"))
		for i := range 4 {
			c, raiseErr := b.store.RaiseAlert(b.ctx, raise(b, "replica-2", "", t0+int64(i+1)*1000))
			require.NoError(t, raiseErr)
			require.Nil(t, c)
		}
		due, err := b.store.DueAlerts(b.ctx, b.app, t0+window-1, window, 10)
		require.NoError(t, err)
		require.Empty(t, due, "the window has not ended")
		due, err = b.store.DueAlerts(b.ctx, b.app, t0+window, window, 10)
		require.NoError(t, err)
		require.Len(t, due, 1)

		var claims []*store.AlertClaim
		for r := range 3 {
			c, claimErr := b.store.ClaimAlert(b.ctx, due[0], t0+window, fmt.Sprint("replica-", r), t0+window+60_000)
			require.NoError(t, claimErr)
			if c != nil {
				claims = append(claims, c)
			}
		}
		require.Len(t, claims, 1)
		require.True(t, claims[0].Digest)
		require.Equal(t, int64(4), claims[0].Suppressed)
		require.Equal(t, t0, claims[0].SinceMs)
		require.JSONEq(t, fmt.Sprintf(`{"at":%d,"by":"replica-2"}`, t0+4000), claims[0].Event, "the latest damped event")

		// The claimer dies: after the lease another replica sends it again, the same.
		due, err = b.store.DueAlerts(b.ctx, b.app, t0+window+60_001, window, 10)
		require.NoError(t, err)
		require.Len(t, due, 1)
		again, err := b.store.ClaimAlert(b.ctx, due[0], t0+window+60_001, "replica-1", t0+window+120_000)
		require.NoError(t, err)
		require.NotNil(t, again)
		require.Equal(t, claims[0].Event, again.Event)
		require.Equal(t, int64(4), again.Suppressed)
		require.True(t, again.Digest)
		require.Equal(t, 2, again.Tries)
		require.NoError(t, b.store.AlertDone(b.ctx, again.ID, "replica-1"))
		due, err = b.store.DueAlerts(b.ctx, b.app, t0+10*window, window, 10)
		require.NoError(t, err)
		require.Empty(t, due)
	})
}

// Raises of one occurrence (a lost replica's last heartbeat, seen by every
// replica) count once; a new occurrence counts.
func TestRaiseAlertCountsAnOccurrenceOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		c, err := b.store.RaiseAlert(b.ctx, raise(b, "replica-0", "hb-1", t0))
		require.NoError(t, err)
		require.NotNil(t, c)
		require.NoError(t, b.store.AlertDone(b.ctx, c.ID, "replica-0"))
		for r := range 3 {
			again, raiseErr := b.store.RaiseAlert(b.ctx, raise(b, fmt.Sprint("replica-", r), "hb-1", t0+int64(r)*window))
			require.NoError(t, raiseErr)
			require.Nil(t, again, "the same occurrence, even windows later")
		}
		c, err = b.store.RaiseAlert(b.ctx, raise(b, "replica-1", "hb-2", t0+5*window))
		require.NoError(t, err)
		require.NotNil(t, c)
		require.Zero(t, c.Suppressed)
	})
}
