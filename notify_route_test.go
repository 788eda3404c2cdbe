package xtimer

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// An alert about a task carries the owner it was registered with, so that
// it can be routed to them (RouteByOwner); a task without one has none.
func TestFailureAlertCarriesTheTaskOwner(t *testing.T) {
	t.Parallel()
	f, log := alertFleet(t, func(o *Options) { o.AlertMissedRuns = -1 })
	f.fail = map[string]bool{"ledger.close": true, "orphan": true}
	f.opts = map[string][]TaskOption{"ledger.close": {WithOwner("team-ledger")}}
	f.start(map[string]string{"ledger.close": "*/10 * * * * *", "orphan": "*/10 * * * * *"})
	f.runUntil(hms(0, 10))

	owned := waitAlerts(log, EventFailed, "ledger.close", func(got []receivedAlert) bool { return len(got) > 0 })
	require.NotEmpty(t, owned)
	require.Equal(t, "team-ledger", owned[0].Owner)
	require.Equal(t, "ledger.close fails", owned[0].Error)
	orphan := waitAlerts(log, EventFailed, "orphan", func(got []receivedAlert) bool { return len(got) > 0 })
	require.NotEmpty(t, orphan)
	require.Empty(t, orphan[0].Owner)
}

// inbox is a Notifier keeping the IDs of the alerts it got, failing with
// err when set.
type inbox struct {
	mu  sync.Mutex
	ids []string
	err error
}

func (b *inbox) Notify(_ context.Context, e Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ids = append(b.ids, e.ID)
	return b.err
}

func (b *inbox) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ids
}

func TestRouteByOwnerSendsEachAlertToItsOwnersNotifier(t *testing.T) {
	t.Parallel()
	ledger, payments, rest := &inbox{}, &inbox{}, &inbox{}
	routes := map[string]Notifier{"team-ledger": ledger, "team-payments": payments}
	n := RouteByOwner(routes, rest)
	routes["team-ledger"] = rest // the routes were copied
	ctx := context.Background()
	for _, e := range []Event{
		{ID: "a1", Owner: "team-ledger"},
		{ID: "a2", Owner: "team-payments"},
		{ID: "a3", Owner: "team-ledger"},
	} {
		require.NoError(t, n.Notify(ctx, e))
	}
	require.Equal(t, []string{"a1", "a3"}, ledger.got())
	require.Equal(t, []string{"a2"}, payments.got())
	require.Empty(t, rest.got())
}

func TestRouteByOwnerSendsUnroutedAlertsToTheFallback(t *testing.T) {
	t.Parallel()
	ledger, rest := &inbox{}, &inbox{}
	n := RouteByOwner(map[string]Notifier{"team-ledger": ledger, "": ledger}, rest)
	ctx := context.Background()
	require.NoError(t, n.Notify(ctx, Event{ID: "a1", Owner: "team-search"}))
	require.NoError(t, n.Notify(ctx, Event{ID: "a2", Kind: EventReplicaLost}))
	require.Empty(t, ledger.got(), "an alert without an owner takes no route, not even one for \"\"")
	require.Equal(t, []string{"a1", "a2"}, rest.got())
}

func TestRouteByOwnerDropsWhatANilNotifierWouldGet(t *testing.T) {
	t.Parallel()
	ledger := &inbox{}
	n := RouteByOwner(map[string]Notifier{"team-ledger": ledger, "team-muted": nil}, nil)
	ctx := context.Background()
	require.NoError(t, n.Notify(ctx, Event{ID: "a1", Owner: "team-search"}), "no fallback: dropped")
	require.NoError(t, n.Notify(ctx, Event{ID: "a2"}), "no owner, no fallback: dropped")
	require.NoError(t, n.Notify(ctx, Event{ID: "a3", Owner: "team-muted"}), "a nil route: dropped")
	require.NoError(t, n.Notify(ctx, Event{ID: "a4", Owner: "team-ledger"}))
	require.Equal(t, []string{"a4"}, ledger.got())

	rest := &inbox{}
	n = RouteByOwner(map[string]Notifier{"team-muted": nil}, rest)
	require.NoError(t, n.Notify(ctx, Event{ID: "a5", Owner: "team-muted"}))
	require.Empty(t, rest.got(), "a nil route drops; it does not fall back")
	require.NoError(t, RouteByOwner(nil, nil).Notify(ctx, Event{ID: "a6", Owner: "team-ledger"}), "no routes at all")
}

func TestRouteByOwnerReturnsTheRoutedNotifiersError(t *testing.T) {
	t.Parallel()
	down := errors.New("chat down")
	n := RouteByOwner(map[string]Notifier{"team-ledger": &inbox{err: down}}, &inbox{err: down})
	err := n.Notify(context.Background(), Event{ID: "a1", Owner: "team-ledger"})
	require.ErrorIs(t, err, down, "an error makes the alert be tried again")
	require.ErrorContains(t, err, `alert a1 to owner "team-ledger"`)
	err = n.Notify(context.Background(), Event{ID: "a2", Owner: "team-search"})
	require.ErrorIs(t, err, down)
	require.ErrorContains(t, err, "alert a2 to the fallback notifier")
}

// A failing task registered WithOwner raises its alert through
// RouteByOwner to its owner's notifier, on the fake clock end to end.
func TestFailingTaskAlertReachesItsOwnersRoute(t *testing.T) {
	t.Parallel()
	ledger, rest := &alertLog{}, &alertLog{}
	f, _ := alertFleet(t, func(o *Options) {
		o.AlertMissedRuns = -1
		o.Notifier = RouteByOwner(map[string]Notifier{"team-ledger": ledger.notifier("replica-0")}, rest.notifier("replica-0"))
	})
	ledger.clock, rest.clock = f.clock, f.clock
	f.fail = map[string]bool{"ledger.close": true, "orphan": true}
	f.opts = map[string][]TaskOption{"ledger.close": {WithOwner("team-ledger")}}
	f.start(map[string]string{"ledger.close": "*/10 * * * * *", "orphan": "*/10 * * * * *"})
	f.runUntil(hms(0, 10))

	owned := waitAlerts(ledger, EventFailed, "ledger.close", func(got []receivedAlert) bool { return len(got) > 0 })
	require.NotEmpty(t, owned)
	require.Equal(t, "team-ledger", owned[0].Owner)
	orphan := waitAlerts(rest, EventFailed, "orphan", func(got []receivedAlert) bool { return len(got) > 0 })
	require.NotEmpty(t, orphan, "a task without an owner goes to the fallback")
	require.Empty(t, ledger.of(EventFailed, "orphan"))
	require.Empty(t, rest.of(EventFailed, "ledger.close"))
}
