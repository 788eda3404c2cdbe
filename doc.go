// Package xtimer runs a service's scheduled work on every replica, with each
// scheduled fire executed once across the fleet and every attempt recorded.
//
// Register handlers by task code and cron spec on a Scheduler, Start it on
// every replica, and each fire of each task runs once:
//
//   - Every replica runs the same tick loop. For each minute and bucket of
//     tasks (a slot), the replica that takes the slot's Redis lock records the
//     slot's fires as execution rows, unique on (app, task, run time), and
//     arms a timer for each row it inserted.
//   - A handler starts only for a row that exists (record-then-run), on the
//     replica that inserted it, or after winning a conditional update when
//     it starts late or takes a fire over from another replica.
//   - An execution moves scheduled → running → succeeded | failed |
//     timed_out, through retrying between attempts, or ends skipped (paused,
//     overlap, misfire) without running. Retries, the rescue of runs on lost
//     replicas and catch-up after an outage are driven from the rows, so they
//     survive the death of any replica.
//
// Schedules come from package cron (ParseSchedule here): Unix cron and
// Spring-style specs with seconds, Quartz expressions (Quartz()),
// descriptors such as @daily and @every 30s, per-task time zones, and a
// daylight-saving rule under which a daily job runs exactly once a day.
//
// The examples directory has a zero-setup quickstart (SQLite and an
// in-process lock) and a multi-process cluster demonstration.
package xtimer
