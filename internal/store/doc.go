// Package store keeps xtimer's state in SQL through GORM: task definitions,
// one execution row per fire, the slots whose fires are all recorded, and
// the replicas alive. The same code and the same tests run on MySQL 8 /
// MariaDB, PostgreSQL 13+ and SQLite.
//
// # Tables
//
// Every table is prefixed xtimer_ and namespaced by an app column, so that
// several services can share one database: tasks, executions, attempts
// (every attempt that ended, attempts.go), slots, replicas, actions,
// alerts, rollups, and apps (the task generation every
// task write bumps, which replicas poll instead of every task's version;
// see models.go). Migrate creates them with GORM's AutoMigrate;
// schema/mysql.sql and schema/postgres.sql say the same in plain DDL for
// DBAs. Every instant is a BIGINT of Unix milliseconds, UTC, so no driver
// or server time zone can shift a fire.
//
// # An execution's life
//
// A row is born by InsertFires, normally scheduled (or already skipped, for
// a misfire recorded during catch-up). Every later move is a conditional
// UPDATE that names the state it expects, so whichever replica's update
// lands first wins and the others learn they lost from a false result:
//
//	scheduled ──StartAttempt(1)──▶ running ──FinishAttempt──▶ succeeded | failed | timed_out
//	    │                            ▲   │
//	    │                            │   └──FinishAttempt(retrying)──▶ retrying
//	    │                            └──────StartAttempt(n+1)───────────┘
//	    └──SkipExecution (paused, overlap...)──▶ skipped ◀── retrying
//
// RetryExecution (retry.go) moves a failed or timed_out row back to
// retrying, once, for one more attempt an operator asked for.
//
// RequestCancel (overlap policy cancel_other) moves a retrying row
// straight to failed, and marks a started or running one (cancel_ms) for
// its replica, which settles it failed when the attempt has stopped.
//
// Attempt is the number of the attempt running or last run: 0 while
// scheduled, 1 for the first attempt. StartAttempt(n) requires attempt n-1
// and a startable status; FinishAttempt(n) requires running at attempt n.
// Hence a fire starts at most once per attempt number, a late result of an
// attempt that was already settled (timed out, rescued) is ignored, and a
// replica that read a retry just before another replica started it cannot
// start it again.
//
// First attempts go through claims.go. The replica that recorded a fire
// owns it (Replica is set at insert). At run time, StartFires claims every
// due fire of the replica in one round trip, conditional on the row being
// scheduled, not started (started_ms 0) and still its own; only the rows it
// claimed start. The claim writes unindexed columns only, so it is an
// in-place update; MarkRunning then moves the rows to running (or straight
// to their result) in batches. A slot whose owner stopped refreshing its
// lock is taken over with TakeOverFires; fires nobody owns, or whose owner
// died, are handed out by ClaimFires; starts of a replica that died before
// MarkRunning are promoted by PromoteLostStarts and rescued like any
// running attempt. Every one of these is a conditional update, so a fire's
// first attempt starts once, whichever replicas race for it.
//
// # Record, then run
//
// InsertFires returns only the rows its own call inserted; the engine arms
// timers for those and nothing else. Two replicas inserting the same fires
// at the same moment get disjoint answers whose union is every row. Each
// call stamps its rows with a random claim nonce and reads back the rows of
// its keys that carry it: portable, with no RETURNING needed (MySQL has
// none) and no reliance on affected-row counts.
//
// # Rescue and retries
//
// Nothing is held in memory that the database does not also know. A retry
// is a retrying row with next_attempt_ms; DueRetries finds it from any
// replica. A running row whose replica stopped heart-beating is found by
// LostExecutions and settled by FinishAttempt with ReasonReplicaLost, as
// retrying or failed by the task's policy.
//
// # Calls
//
// Every call takes a context first and runs under it; a context without a
// deadline gets the store's query timeout (DefaultQueryTimeout). Errors
// start with "store:", say what was being done and wrap the cause; a
// missing task or execution wraps ErrNotFound. Transactions that hit a
// deadlock or a serialization failure are retried from the start.
package store
