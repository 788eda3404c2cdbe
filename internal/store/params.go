package store

import (
	"database/sql/driver"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// Params are the parameters a handler receives (Run.Params): the JSON of a
// task's WithParams on its row (Task.Params, part of its Definition), and
// on an execution row the override a manual run was triggered with
// (Execution.Params). "" is none, stored as NULL: a fire without its own
// parameters runs with its task's as they are when it starts. The column
// is MEDIUMTEXT on MySQL/MariaDB, whose TEXT stops one byte short of the
// 64 KiB WithParams allows (and an HTTP task's body may reach
// Options.HTTPMaxBody, 1 MiB at most), and TEXT elsewhere.
type Params string

// GormDataType is the column's generic type, for GORM's schema.
func (Params) GormDataType() string { return "text" }

// GormDBDataType gives the column type per dialect.
func (Params) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == "mysql" {
		return "mediumtext"
	}
	return "text"
}

// Value is NULL for none.
func (p Params) Value() (driver.Value, error) {
	if p == "" {
		return nil, nil
	}
	return string(p), nil
}

// Scan reads NULL as none.
func (p *Params) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*p = ""
	case []byte:
		*p = Params(v)
	case string:
		*p = Params(v)
	default:
		return fmt.Errorf("store: scan params from %T", v)
	}
	return nil
}

// MaxNoteBytes is the most an execution's Note holds.
const MaxNoteBytes = 1024
