package xtimer

import (
	"context"
	"fmt"
	"maps"
)

// This file routes alerts to their owner's notifier (issue 22, "Alerts
// reach their owner"): the owner is the task's WithOwner, carried by
// Event.Owner.

// RouteByOwner returns a Notifier that sends each alert to
// routes[e.Owner], the notifier of the team or person owning the task
// (WithOwner), and to fallback when the owner has no route or the alert
// has none (a task without WithOwner; replica and Redis events; a route
// for "" is never taken).
//
// Nil drops: a nil fallback drops the alerts no route takes, and an owner
// whose route is nil has its alerts dropped, not sent to fallback. A
// dropped alert's Notify returns nil, so it counts as sent. An error of
// the notifier routed to is returned, and the alert is tried again
// (Notifier), by the same route. routes is copied: changing the map
// afterwards does not change the routes.
func RouteByOwner(routes map[string]Notifier, fallback Notifier) Notifier {
	return &ownerRoutes{routes: maps.Clone(routes), fallback: fallback}
}

type ownerRoutes struct {
	routes   map[string]Notifier
	fallback Notifier
}

func (r *ownerRoutes) Notify(ctx context.Context, e Event) error {
	n, routed := r.routes[e.Owner]
	if routed = routed && e.Owner != ""; !routed {
		n = r.fallback
	}
	if n == nil {
		return nil
	}
	if err := n.Notify(ctx, e); err != nil {
		if routed {
			return fmt.Errorf("xtimer: alert %s to owner %q: %w", e.ID, e.Owner, err)
		}
		return fmt.Errorf("xtimer: alert %s to the fallback notifier: %w", e.ID, err)
	}
	return nil
}
