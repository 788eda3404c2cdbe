package xtimer_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/xtimer-go/xtimer"
)

func ExampleRouteByOwner() {
	// Each team's notifier: a chat room, an email list (NewSlackNotifier,
	// NewEmailNotifier...). Here, functions that print.
	to := func(who string) xtimer.Notifier {
		return xtimer.NotifierFunc(func(ctx context.Context, e xtimer.Event) error {
			fmt.Println(strings.TrimSpace(fmt.Sprintf("%s: %s %s", who, e.Kind, e.Task)))
			return nil
		})
	}
	n := xtimer.RouteByOwner(map[string]xtimer.Notifier{
		"team-ledger":   to("ledger room"),
		"team-payments": to("payments room"),
	}, to("ops room")) // tasks of other owners or none, replica and Redis events
	// xtimer.Options{Notifier: n} routes every alert; tasks name their owner
	// with xtimer.WithOwner("team-ledger"). Here, three alerts by hand.
	ctx := context.Background()
	_ = n.Notify(ctx, xtimer.Event{Kind: xtimer.EventFailed, Task: "ledger.close-day", Owner: "team-ledger"})
	_ = n.Notify(ctx, xtimer.Event{Kind: xtimer.EventSilent, Task: "search.reindex", Owner: "team-search"})
	_ = n.Notify(ctx, xtimer.Event{Kind: xtimer.EventReplicaLost})
	// Output:
	// ledger room: execution.failed ledger.close-day
	// ops room: task.silent search.reindex
	// ops room: replica.lost
}
