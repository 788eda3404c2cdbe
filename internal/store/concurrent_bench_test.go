package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/xtimer-go/xtimer/internal/store"
)

// BenchmarkInsertFiresConcurrent records one instant of a fleet at once:
// replicas=3 callers, each inserting its share of the instant's fires
// (its own tasks) at the same time, as replicas started together do for
// their slots. One op is the fleet's instant: it ends when the slowest
// caller's insert commits.
func BenchmarkInsertFiresConcurrent(b *testing.B) {
	eachBenchDB(b, func(b *testing.B, d *benchDB) {
		for _, c := range []struct{ replicas, n int }{{1, 3333}, {3, 1000}, {3, 3333}} {
			replicas, n := c.replicas, c.n
			b.Run(fmt.Sprintf("replicas=%d/fires=%d", replicas, n), func(b *testing.B) {
				shares := make([][]store.Execution, replicas)
				for r := range shares {
					shares[r] = make([]store.Execution, n)
					for j := range shares[r] {
						shares[r][j] = store.Execution{App: d.app, TaskCode: fmt.Sprintf("replica-%d.task-%05d", r, j),
							Status: store.StatusScheduled, Source: store.SourceSchedule, MaxAttempts: 3, Replica: benchReplica}
					}
				}
				b.ReportAllocs()
				for b.Loop() {
					for _, rows := range shares {
						for j := range rows {
							rows[j].RunTime = d.minute
						}
					}
					d.minute += 1000
					errs := make([]error, replicas)
					var wg sync.WaitGroup
					for r, rows := range shares {
						wg.Go(func() {
							got, err := d.store.InsertFires(d.ctx, rows)
							if err == nil && len(got) != len(rows) {
								err = fmt.Errorf("%d of %d inserted", len(got), len(rows))
							}
							errs[r] = err
						})
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						b.Fatalf("InsertFires of %d shares of %d fires: %v", replicas, n, err)
					}
				}
			})
		}
	})
}
