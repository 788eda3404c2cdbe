package store

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// slotWithNote is xtimer_slots as a later version might declare it: one
// column more.
type slotWithNote struct {
	Slot
	Note string `gorm:"column:note;size:64;not null;default:''"`
}

func (slotWithNote) TableName() string { return "xtimer_slots" }

// slotWithNoteIndexed is slotWithNote with an index of its note: the
// same columns, one index more.
type slotWithNoteIndexed struct {
	Slot
	Note string `gorm:"column:note;size:64;not null;default:'';index:xtimer_slots_note"`
}

func (slotWithNoteIndexed) TableName() string { return "xtimer_slots" }

// The schema's fingerprint is the same for the same models, and another
// for a column or an index more, or for another database: a version whose
// schema differs never takes another's mark for its own.
func TestSchemaFingerprintChangesWithTheSchema(t *testing.T) {
	t.Parallel()
	pg, lite := testsvc.Postgres(t), testsvc.SQLite(t)
	with := func(slot any) []any {
		tables := models()
		for i, m := range tables {
			if _, ok := m.(*Slot); ok {
				tables[i] = slot
			}
		}
		return tables
	}
	fingerprint := func(db *gorm.DB, of []any) func() (string, error) {
		return func() (string, error) {
			fp, _, err := fingerprintOf(db, of)
			return fp, err
		}
	}
	seen := map[string]string{}
	for _, c := range []struct {
		name   string
		fp     func() (string, error)
		sameAs string
	}{
		{"postgres", fingerprint(pg, models()), ""},
		{"postgres again", fingerprint(pg, models()), "postgres"},
		{"sqlite", fingerprint(lite, models()), ""},
		{"a column more", fingerprint(pg, with(&slotWithNote{})), ""},
		{"an index more", fingerprint(pg, with(&slotWithNoteIndexed{})), ""},
	} {
		fp, err := c.fp()
		require.NoError(t, err, c.name)
		require.Len(t, fp, 64, c.name)
		if c.sameAs != "" {
			require.Equal(t, seen[c.sameAs], fp, c.name)
			continue
		}
		for other, ofp := range seen {
			require.NotEqual(t, ofp, fp, "%s against %s", c.name, other)
		}
		seen[c.name] = fp
	}
}
