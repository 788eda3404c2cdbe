package store

import (
	"fmt"
	"slices"
	"testing"
)

// groupBy keeps the order in which keys first come and, within a group,
// the order of the items, whether keys come in runs or interleaved.
func TestGroupByKeepsFirstComeOrder(t *testing.T) {
	items := []int{0, 1, 2, 3, 4, 5, 6, 7}
	keys := []string{"b", "b", "a", "b", "c", "c", "a", "b"}
	order, groups := groupBy(items, func(i int) string { return keys[i] })
	if want := []string{"b", "a", "c"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i, want := range [][]int{{0, 1, 3, 7}, {2, 6}, {4, 5}} {
		if !slices.Equal(groups[i], want) {
			t.Errorf("group %q: %v, want %v", order[i], groups[i], want)
		}
	}
	if order, groups := groupBy(nil, func(i int) string { return keys[i] }); len(order) != 0 || len(groups) != 0 {
		t.Errorf("no items: %v %v", order, groups)
	}
}

// BenchmarkGroupBy groups a chunk of fire rows by their shape, as
// insertFireRows does: one shape (a second of fires of tasks defined
// alike), or four interleaved.
func BenchmarkGroupBy(b *testing.B) {
	const n = 10_000
	for _, shapes := range []int{1, 4} {
		b.Run(fmt.Sprintf("shapes=%d", shapes), func(b *testing.B) {
			rows := make([]Execution, n)
			for i := range rows {
				rows[i] = Execution{App: "bench", TaskCode: fmt.Sprintf("tenant-%07d.report", i), RunTime: int64(i),
					Status: StatusScheduled, Source: SourceSchedule, MaxAttempts: 1, Replica: fmt.Sprintf("replica-%d", i%shapes)}
			}
			items := make([]int, n)
			for i := range items {
				items[i] = i
			}
			b.ReportAllocs()
			for b.Loop() {
				groupBy(items, func(i int) Execution {
					shape := rows[i]
					shape.TaskCode, shape.RunTime, shape.MaxAttempts = "", 0, 0
					return shape
				})
			}
		})
	}
}
