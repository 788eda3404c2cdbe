package store

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// The mysql dialect's two servers learn what an InsertFires inserted in
// two ways: MariaDB from the INSERT's RETURNING, MySQL, which has none, by
// reading the rows back. The test server (MariaDB in CI) serves both: as
// what it says it is, and as MySQL when the store is told so. Either way
// a call returns exactly the rows it inserted, and leaves a row it found
// alone.
func TestInsertFiresLearnsItsRowsOnMariaDBAndMySQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testsvc.MySQL(t)
	require.NoError(t, New(db).Migrate(ctx))
	var version string
	require.NoError(t, db.Raw("SELECT VERSION()").Scan(&version).Error)
	for i, c := range []struct {
		name    string
		flavor  int32
		returns bool
	}{
		{"asked", flavorUnknown, strings.Contains(version, "MariaDB")},
		{"told mysql", flavorMySQL, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New(db)
			s.flavor.Store(c.flavor)
			returns, err := s.insertReturns(ctx, db)
			require.NoError(t, err)
			require.Equal(t, c.returns, returns)

			app := testsvc.App(t)
			at := func(runTimes ...int64) []Execution {
				out := make([]Execution, len(runTimes))
				for k, rt := range runTimes {
					out[k] = Execution{App: app, TaskCode: "billing.close", RunTime: rt + int64(i)*60_000}
				}
				return out
			}
			first, err := s.InsertFires(ctx, at(1000, 2000, 3000))
			require.NoError(t, err)
			require.Len(t, first, 3)
			second, err := s.InsertFires(ctx, at(3000, 2000, 4000))
			require.NoError(t, err)
			require.Len(t, second, 1, "only the fire that was not recorded")
			require.Equal(t, int64(4000)+int64(i)*60_000, second[0].RunTime)
			var stored Execution
			require.NoError(t, db.Where("id = ?", first[2].ID).Take(&stored).Error)
			require.Equal(t, first[2].Claim, stored.Claim, "the row found keeps its claim")
		})
	}
}
