package store

import "github.com/xtimer-go/xtimer/cron"

// Schedule parses the schedule that applies to the task (Effective): its
// console override when set, the code-defined spec, dialect and zone
// otherwise. An empty dialect is the default one and an empty zone UTC, as
// Register stores them. The engine and the admin console both read a
// task's fire times through it, so the two never disagree.
func (t Task) Schedule() (cron.Schedule, error) {
	spec, dialect, zone := t.Effective()
	opts := []cron.Option{cron.WithDialect(cron.Dialect(dialect))}
	if zone != "" && zone != "UTC" {
		loc, err := cron.LoadZone(zone)
		if err != nil {
			return nil, err
		}
		opts = append(opts, cron.In(loc))
	}
	return cron.Parse(spec, opts...)
}
