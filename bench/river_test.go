package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRiverAdapter(t *testing.T) {
	// River's leader is elected at start, but its maintenance services
	// start one after another, each after a random stagger of up to a
	// second: the periodic enqueuer may start some seconds later.
	calls, dups := runPeerReplicas(t, newRiver(), true, 15*time.Second, false)
	// The leader enqueues each fire once, with unique options: duplicates
	// are reported like every peer's, not asserted.
	t.Logf("river duplicates: %d", dups)
	for _, c := range calls {
		if l := c.started.Sub(c.scheduled); l > 2*time.Second {
			t.Logf("%s at %s started %v late", c.task, c.scheduled.Format("15:04:05"), l)
		}
	}
}

func TestRiverNeedsPostgres(t *testing.T) {
	err := newRiver().Run(context.Background(), ReplicaEnv{MySQLDSN: "root@tcp(127.0.0.1:1)/bench"}, nil, nil, func() {})
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("Run without PostgreSQL: %v", err)
	}
}
