package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// A task's parameters are part of its definition: registered, they land
// on the row (64 KiB of them too: MEDIUMTEXT on MySQL); registered
// changed, the registration's digest differs and the row follows; gone,
// the column is NULL again.
func TestRegisterTasksStoresAndUpdatesTheParams(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		big := `"` + strings.Repeat("x", 64<<10-2) + `"`
		withParams := func(p string) []store.TaskDef {
			def := *everyMinute
			def.Params = p
			ds := defs(3, &def)
			return ds
		}
		read := func() []string {
			all, err := b.store.Tasks(b.ctx, b.app)
			require.NoError(t, err)
			var got []string
			for _, row := range all {
				require.Equal(t, string(row.Params), row.Definition().Params, row.Code)
				got = append(got, string(row.Params))
			}
			return got
		}
		gen, err := b.store.RegisterTasks(b.ctx, b.app, withParams(`{"region":"eu"}`))
		require.NoError(t, err)
		require.Equal(t, int64(1), gen)
		require.Equal(t, []string{`{"region":"eu"}`, `{"region":"eu"}`, `{"region":"eu"}`}, read())

		gen, err = b.store.RegisterTasks(b.ctx, b.app, withParams(big))
		require.NoError(t, err)
		require.Equal(t, int64(2), gen, "other params: another digest, rows written")
		require.Equal(t, []string{big, big, big}, read())

		gen, err = b.store.RegisterTasks(b.ctx, b.app, withParams(""))
		require.NoError(t, err)
		require.Equal(t, int64(3), gen)
		require.Equal(t, []string{"", "", ""}, read())
		var nulls int64
		require.NoError(t, b.db.Model(&store.Task{}).Where("app = ? AND params IS NULL", b.app).Count(&nulls).Error)
		require.Equal(t, int64(3), nulls, "no params is NULL")
	})
}

// A manual run's parameters and note land on its row; the rows of other
// fires inserted with it leave both columns alone.
func TestInsertFiresRecordsAManualRunsParamsAndNote(t *testing.T) {
	eachDB(t, func(t *testing.T, b *bundle) {
		big := strings.Repeat("y", 64<<10)
		rows, err := b.store.InsertFires(b.ctx, []store.Execution{
			{App: b.app, TaskCode: "job", RunTime: t0, Source: store.SourceManual, Params: store.Params(big), Note: "rerun for EU"},
			{App: b.app, TaskCode: "job", RunTime: t0 + 1, Source: store.SourceManual, Note: "no params"},
			{App: b.app, TaskCode: "job", RunTime: t0 + 2},
		})
		require.NoError(t, err)
		require.Len(t, rows, 3)
		for i, want := range []struct{ params, note string }{{big, "rerun for EU"}, {"", "no params"}, {"", ""}} {
			got, readErr := b.store.Execution(b.ctx, rows[i].ID)
			require.NoError(t, readErr)
			require.Equal(t, want.params, string(got.Params), "row %d", i)
			require.Equal(t, want.note, got.Note, "row %d", i)
		}
		_, err = b.store.InsertFires(b.ctx, []store.Execution{{App: b.app, TaskCode: "job", RunTime: t0 + 3,
			Note: strings.Repeat("n", store.MaxNoteBytes+1)}})
		require.EqualError(t, err, fmt.Sprintf("store: insert fires: row 0 (job at %d) note of 1025 bytes: want at most 1024", t0+3))
	})
}
