package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// table writes aligned columns: a header row (left out when every header
// is empty, for key-value tables), then the rows.
type table struct {
	w *tabwriter.Writer
}

func (c *call) table(headers ...string) *table {
	t := &table{w: tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)}
	if strings.Join(headers, "") != "" {
		t.row(headers...)
	}
	return t
}

// oneLine makes a cell one line: tabs and newlines would break the
// columns.
var oneLine = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")

func (t *table) row(cells ...string) {
	for i, s := range cells {
		cells[i] = oneLine.Replace(s)
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }

// time shows an instant in the display zone, to the second; "-" for none.
func (c *call) time(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.In(c.zone).Format("2006-01-02 15:04:05 MST")
}

// json writes v indented, for scripts (-o json).
func (c *call) json(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
