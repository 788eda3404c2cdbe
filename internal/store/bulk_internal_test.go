package store

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The bulk update's columns are in name order, the order a statement
// assigns them in, and each has its own place among a row's values: one
// of texts for a text column, of nums for an integer one.
func TestBulkColumnsAreInNameOrderWithAPlaceEach(t *testing.T) {
	require.True(t, slices.IsSorted(columnNames[:]), "%v", columnNames)
	require.LessOrEqual(t, int(numColumns), 16, "a column is a bit of columns")
	var v rowValues
	for c := range numColumns {
		if columnText[c] {
			v.text(c, columnNames[c])
		} else {
			v.num(c, int64(c)+1)
		}
	}
	require.Equal(t, columns(1<<numColumns-1), v.cols)
	for c := range numColumns {
		if columnText[c] {
			require.Equal(t, columnNames[c], v.texts[columnSlots[c]], "column %s", columnNames[c])
		} else {
			require.Equal(t, int64(c)+1, v.nums[columnSlots[c]], "column %s", columnNames[c])
		}
	}
	w := v
	w.minusStarted(colDurationMs, v.nums[columnSlots[colDurationMs]])
	require.False(t, v.same(&w, colDurationMs), "n and n - started_ms differ")
	w.num(colDurationMs, v.nums[columnSlots[colDurationMs]])
	require.True(t, v.same(&w, colDurationMs), "a plain value again")
}
