package xtimer

import (
	"time"

	"github.com/xtimer-go/xtimer/cron"
)

// The schedule layer is package cron. The names below keep code written
// against the root package compiling unchanged: the types are aliases, so a
// value of one is a value of the other and errors.Is and errors.As match
// either name.

// Schedule is the same as cron.Schedule: it answers "when is the next fire"
// for one task.
type Schedule = cron.Schedule

// Dialect is the same as cron.Dialect: it names a cron expression language.
type Dialect = cron.Dialect

const (
	// DialectCron is the same as cron.DialectCron, the default dialect.
	DialectCron = cron.DialectCron
	// DialectQuartz is the same as cron.DialectQuartz.
	DialectQuartz = cron.DialectQuartz
)

// MaxYear is the same as cron.MaxYear: the last year a Schedule looks at.
const MaxYear = cron.MaxYear

// ScheduleOption is the same as cron.Option: it changes how ParseSchedule
// reads a spec.
type ScheduleOption = cron.Option

// SpecError is the same as cron.SpecError: it reports a spec that cannot be
// parsed, naming the field and its value.
type SpecError = cron.SpecError

// ErrBadSpec is the same as cron.ErrBadSpec: every error ParseSchedule
// returns matches it with errors.Is.
var ErrBadSpec = cron.ErrBadSpec

// ParseSchedule is the same as cron.Parse: it reads a cron spec.
func ParseSchedule(spec string, opts ...ScheduleOption) (Schedule, error) {
	return cron.Parse(spec, opts...)
}

// Quartz is the same as cron.Quartz: it selects the Quartz dialect.
func Quartz() ScheduleOption { return cron.Quartz() }

// WithDialect is the same as cron.WithDialect: it selects a dialect by name.
func WithDialect(d Dialect) ScheduleOption { return cron.WithDialect(d) }

// In is the same as cron.In: it sets the time zone the spec is read in.
func In(loc *time.Location) ScheduleOption { return cron.In(loc) }

// NextFires is the same as cron.NextFires: it returns up to n fire times of
// sched after after, stopping before endAt when it is not zero.
func NextFires(sched Schedule, after time.Time, n int, endAt time.Time) []time.Time {
	return cron.NextFires(sched, after, n, endAt)
}

// loadZone is cron.LoadZone, for the zones HTTP tasks and SetSchedule keep
// beside their spec.
func loadZone(name string) (*time.Location, error) { return cron.LoadZone(name) }

// localZoneReason is cron's reason for refusing the machine's local zone,
// in the same words, for WithLocation.
const localZoneReason = `the machine's local zone differs between replicas; name a zone such as "Asia/Shanghai"`
