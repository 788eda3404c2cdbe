// Package cron reads cron specs into Schedules whose Next gives the fire
// times of a task. It is xtimer's schedule layer, usable on its own: Parse
// is a pure function of the spec and its options, and Next a pure function
// of its input, so every replica of a service computes the same instants.
//
//	s, err := cron.Parse("0 0 12 ? * 2-6", cron.Quartz(), cron.In(shanghai))
//	next := s.Next(time.Now()) // 12:00 Shanghai time, Monday to Friday
//	fmt.Println(s.Describe())  // at 12:00 on Monday through Friday, Asia/Shanghai
//
// # Dialects
//
// The default dialect (DialectCron) reads Unix cron specs of 5 fields
// (minute hour day-of-month month day-of-week) or 6 with seconds first, as
// Spring writes them. Day-of-week is 0-7, 0 and 7 being Sunday; names
// (JAN-DEC, SUN-SAT) are read in any case. When both day fields restrict, a
// day matches if either matches (Vixie cron); "*", "?" and "*/1" restrict
// nothing. Descriptors are @yearly, @annually, @monthly, @weekly, @daily,
// @midnight, @hourly and @every d, where d is a whole number of seconds, at
// least one, and the fires are the instants that are whole multiples of d
// since 1970-01-01 00:00 UTC, whenever a replica started.
//
// The Quartz dialect (DialectQuartz, selected by Quartz or WithDialect)
// reads org.quartz.CronExpression 2.3: 6 fields with seconds first, or 7
// with a year 1970-MaxYear; day-of-week is 1-7 = SUN-SAT; exactly one of
// day-of-month and day-of-week must be "?"; ranges may wrap (22-2, FRI-MON).
// It has no descriptors, and L alone in day-of-week is Saturday. Where
// Quartz accepts a spec silently and reads it in a surprising way (more
// than 7 fields, L, W or # inside a list, a step after a name, years
// outside 1970-MaxYear, steps beyond a field's range), Parse refuses it.
//
// Both dialects know, in day-of-month, L (the last day of the month), L-n
// (n days before it), LW (the last weekday) and nW (the weekday nearest day
// n, without leaving the month); in day-of-week, nL (the last day n of the
// month: FRIL is the last Friday) and n#k (the k-th: MON#2 is the second
// Monday). The default dialect also takes them inside lists.
//
// A spec that never fires, such as "0 0 0 30 2 ?", parses; its Next returns
// the zero time at once. Every error Parse returns is a *SpecError naming
// the field and the value, and matches ErrBadSpec; Parse never panics,
// whatever the input.
//
// # Time zones
//
// A spec is read in UTC unless In names a zone or the spec starts with a
// CRON_TZ= or TZ= prefix, which wins over In. The machine's local zone is
// refused in both: replicas in different zones would disagree on every
// fire.
//
// # Daylight saving
//
// Next follows cronie's rule. A spec is fixed-time when neither its minute
// nor its hour field starts with a wildcard ("30 2 * * *",
// "0 0 9 ? * MON-FRI"); otherwise it is a wildcard spec ("*/15 * * * *",
// "0 * * * *").
//
//   - A fixed-time fire whose wall time does not exist (spring forward)
//     runs once, at the first instant after the gap. Fires in the same gap
//     run once together.
//   - A fixed-time fire whose wall time happens twice (fall back) runs
//     once, at the first occurrence.
//   - Wildcard specs follow elapsed time: every matching instant that
//     exists, both occurrences in a repeated hour, nothing in the gap.
//     @every ignores the wall clock entirely.
//
// Quartz skips the gap and picks the second occurrence; robfig/cron skips
// the gap and runs twice in the repeated hour. This package deliberately
// does neither, so that a daily job runs exactly once a day.
//
// A Schedule is also a robfig/cron/v3 Schedule, so it plugs into code that
// expects one.
package cron
