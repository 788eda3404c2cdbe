// Package executor runs handlers for xtimer: a bounded pool that starts work
// in the order it was submitted (Pool), one attempt under a timeout with
// panics turned into errors (Call), and the retry back-off (Backoff).
//
// It knows nothing of tasks, rows or replicas: the scheduler decides what to
// run and records what happened; this package only runs it.
package executor
