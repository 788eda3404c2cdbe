package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// backfillCommand records the past fires of a range that have no row
// (POST api/tasks/CODE/backfill, Scheduler.Backfill), after saying how
// many the range holds.
var backfillCommand = command{
	args: []string{"CODE"},
	flags: func(fs *flag.FlagSet, c *call) {
		c.flag(fs, "from", "", "the start of the range, an RFC 3339 time such as 2026-11-30T00:00:00Z (included)")
		c.flag(fs, "to", "", "the end of the range, an RFC 3339 time, at or before now (excluded)")
	},
	run: func(ctx context.Context, c *call) error {
		from, to := c.str("from"), c.str("to")
		for _, f := range []struct{ name, value string }{{"from", from}, {"to", to}} {
			if _, err := time.Parse(time.RFC3339Nano, f.value); err != nil {
				return usageError(fmt.Sprintf("-%s %q: want an RFC 3339 time such as 2026-11-30T00:00:00Z", f.name, f.value))
			}
		}
		path := "tasks/" + url.PathEscape(c.args[0]) + "/backfill"
		var p struct {
			Fires int `json:"fires"`
			New   int `json:"new"`
		}
		if _, err := c.get(ctx, path, url.Values{"from": {from}, "to": {to}}, &p); err != nil {
			return err
		}
		var r struct {
			Recorded int `json:"recorded"`
		}
		if err := c.send(ctx, http.MethodPost, path, map[string]string{"from": from, "to": to}, &r); err != nil {
			return err
		}
		if c.output == "json" {
			return c.json(map[string]int{"fires": p.Fires, "recorded": r.Recorded})
		}
		fmt.Fprintf(c.stdout, "backfilled %s: %d of the range's %d fires recorded; they run one at a time, oldest first\n",
			c.args[0], r.Recorded, p.Fires)
		return nil
	},
}
