package xtimer

import (
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
