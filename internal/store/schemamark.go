package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// schemaRevision is the part of the schema's fingerprint that the models
// do not show: raise it when Migrate's own steps (migrate: the retry
// index, the retired indexes, the search indexes, the fill factor) change
// in a way schemaFingerprint does not already see.
const schemaRevision = 1

// schemaMarkID is the key of the one row of xtimer_schema.
const schemaMarkID = 1

// SchemaMark is the one row of xtimer_schema: the fingerprint of the schema
// the last complete Migrate made (schemaFingerprint), and when. A Migrate
// that finds its own fingerprint there and every table in place has
// nothing to change, and returns after two reads instead of running
// AutoMigrate's hundred-odd queries of the catalog (a replica's restart
// waits for them).
type SchemaMark struct {
	ID          int64  `gorm:"column:id;primaryKey;autoIncrement:false"`
	Fingerprint string `gorm:"column:fingerprint;size:64;not null;default:''"`
	MigratedMs  int64  `gorm:"column:migrated_ms;not null;default:0"`
}

// TableName is xtimer_schema, whatever the caller's naming strategy.
func (SchemaMark) TableName() string { return "xtimer_schema" }

// schemaFingerprint is a hash of everything that decides what Migrate makes
// on db's dialect: each model's table, columns with their full types as
// the dialect writes them, and indexes; the statements and names of
// Migrate's own steps; and schemaRevision. Two versions of xtimer whose
// Migrate would make the same schema have the same fingerprint, and a
// change to a model's column or index changes it. tables are the
// models' table names, which Migrate looks for (schemaCurrent).
func schemaFingerprint(db *gorm.DB) (fingerprint string, tables []string, err error) {
	return fingerprintOf(db, models())
}

// fingerprintOf is schemaFingerprint for the models of these tables.
func fingerprintOf(db *gorm.DB, of []any) (fingerprint string, tables []string, err error) {
	dialect := db.Dialector.Name()
	var b strings.Builder
	b.WriteString("revision " + strconv.Itoa(schemaRevision) + "\ndialect " + dialect + "\n")
	m := db.Migrator()
	for _, model := range of {
		stmt := &gorm.Statement{DB: db}
		if err := stmt.Parse(model); err != nil {
			return "", nil, fmt.Errorf("store: migrate: parse the model of %T: %w", model, err)
		}
		tables = append(tables, stmt.Schema.Table)
		b.WriteString("table " + stmt.Schema.Table + "\n")
		for _, f := range stmt.Schema.Fields {
			if f.DBName == "" {
				continue
			}
			fmt.Fprintf(&b, "column %s %s primary=%t auto=%t\n", f.DBName, m.FullDataTypeOf(f).SQL, f.PrimaryKey, f.AutoIncrement)
		}
		for _, idx := range stmt.Schema.ParseIndexes() {
			fmt.Fprintf(&b, "index %s class=%s type=%s where=%s option=%s", idx.Name, idx.Class, idx.Type, idx.Where, idx.Option)
			for _, f := range idx.Fields {
				fmt.Fprintf(&b, " (%s %s %s %d %s)", f.DBName, f.Sort, f.Collate, f.Length, f.Expression)
			}
			b.WriteString("\n")
		}
	}
	_, retry := retryIndex(dialect)
	b.WriteString("retry " + retry + "\n")
	for _, old := range retiredIndexes(dialect) {
		b.WriteString("retired " + old.name + "\n")
	}
	for _, idx := range trgmIndexes {
		b.WriteString("trgm " + strings.Join(idx[:], " ") + "\n")
	}
	b.WriteString("fulltext " + fulltextIndex + "\nfillfactor " + strconv.Itoa(executionsFillFactor) + "\n")
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:]), tables, nil
}

// schemaCurrent reports whether the database holds every one of tables
// and the mark of fingerprint: then Migrate has nothing to do. Tables
// first, so that a database without xtimer_schema is not asked for its
// row (an error in the server's log). Any error answers false: the full
// migration that follows reports what is wrong.
func schemaCurrent(ctx context.Context, db *gorm.DB, fingerprint string, tables []string) bool {
	var q string
	switch db.Dialector.Name() {
	case "postgres":
		q = "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name IN ?"
	case "mysql":
		q = "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ?"
	case "sqlite":
		q = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ?"
	default:
		return false
	}
	db = db.WithContext(ctx)
	var n int
	if err := db.Raw(q, tables).Scan(&n).Error; err != nil || n != len(tables) {
		return false
	}
	var got []string
	if err := db.Model(&SchemaMark{}).Where("id = ?", schemaMarkID).Pluck("fingerprint", &got).Error; err != nil {
		return false
	}
	return len(got) == 1 && got[0] == fingerprint
}

// markSchema records, inside the migration that made it, that the
// schema of fingerprint is in place.
func markSchema(db *gorm.DB, fingerprint string, nowMs int64) error {
	mark := SchemaMark{ID: schemaMarkID, Fingerprint: fingerprint, MigratedMs: nowMs}
	err := db.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "id"}},
		DoUpdates: clause.AssignmentColumns([]string{"fingerprint", "migrated_ms"}),
	}).Create(&mark).Error
	if err != nil {
		return fmt.Errorf("store: migrate: record the schema's fingerprint: %w", err)
	}
	return nil
}
