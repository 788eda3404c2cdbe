package xtimer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xtimer-go/xtimer/internal/store"
)

// ErrExecutionNotFound is the error of Attempts and Retry for an
// execution ID that has no row (never had, or retention deleted it).
var ErrExecutionNotFound = errors.New("xtimer: execution not found")

// Attempt is one attempt of an execution: every attempt that ended is
// kept, not only the last one the Execution shows (see Scheduler.Attempts).
type Attempt struct {
	// Number is the attempt's number: 1 for the first, n+1 for the retry
	// after attempt n (Execution.Attempt).
	Number int
	// Replica is the replica that ran it.
	Replica    string
	StartedAt  time.Time
	FinishedAt time.Time // zero while running
	Duration   time.Duration
	// Status is how the attempt ended: StatusSucceeded, StatusFailed or
	// StatusTimedOut; StatusRunning for the attempt running now. An
	// attempt that was retried ended failed or timed_out, while its
	// execution went on to retrying.
	Status Status
	Output string
	Error  string
	// HTTPStatus is the response status of an HTTP callback attempt; 0
	// for Go handlers and for attempts that got no response.
	HTTPStatus int
}

// Attempts returns the attempts of an execution, oldest first: those
// that ended, then the one running now, if any. An execution that has not
// started has none. Times are in its task's zone, as Execution's are. An
// unknown execution is an error matching ErrExecutionNotFound.
func (s *Scheduler) Attempts(ctx context.Context, executionID int64) ([]Attempt, error) {
	row, rows, err := s.store.Attempts(ctx, executionID)
	if err != nil {
		return nil, fmt.Errorf("xtimer: read the attempts of execution %d: %w", executionID, execErr(err))
	}
	loc := s.eng.Zone(row.TaskCode)
	at := func(ms int64) time.Time {
		if ms == 0 {
			return time.Time{}
		}
		return time.UnixMilli(ms).In(loc)
	}
	out := make([]Attempt, len(rows))
	for i, a := range rows {
		out[i] = Attempt{Number: a.Attempt, Replica: a.Replica, StartedAt: at(a.StartedMs), FinishedAt: at(a.FinishedMs),
			Duration: time.Duration(a.DurationMs) * time.Millisecond, Status: Status(a.Status),
			Output: a.Output, Error: a.Error, HTTPStatus: a.HTTPStatus}
	}
	return out, nil
}

// execErr gives the store's ErrNotFound about one execution the root's
// sentinel, keeping the store's error (and its ErrNotFound) in the chain.
func execErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return sentinelError{ErrExecutionNotFound, err}
	}
	return err
}

// sentinelError reads as err and matches both err's chain and sentinel.
type sentinelError struct{ sentinel, err error }

func (e sentinelError) Error() string   { return e.err.Error() }
func (e sentinelError) Unwrap() []error { return []error{e.sentinel, e.err} }
