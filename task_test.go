package xtimer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

func TestRegisterNamesTheTaskAndKeepsTheOptionsTypedError(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t)}, nil)
	ok := func(context.Context, *Run) error { return nil }

	err := s.Register("retry.check", "* * * * *", ok, WithTimeout(time.Second), WithRetry(0))
	require.EqualError(t, err, `xtimer: task "retry.check": WithRetry(0): attempts must be 1-100 (1 means no retry)`)
	var te *taskError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "retry.check", te.code)
	var oe *taskOptionError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, taskOptionError{option: "WithRetry", value: "0", reason: "attempts must be 1-100 (1 means no retry)"}, *oe)

	err = s.Register("zone.check", "* * * * *", ok, WithLocation(nil))
	require.EqualError(t, err, `xtimer: task "zone.check": WithLocation(<nil>): location is nil`)
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "WithLocation", oe.option)
}

func TestRegisterNamesTheTaskAndKeepsTheSpecError(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t)}, nil)
	ok := func(context.Context, *Run) error { return nil }

	err := s.Register("spec.check", "0 60 * * *", ok)
	require.EqualError(t, err, `xtimer: task "spec.check": spec "0 60 * * *": hour field "60": value 60 out of range 0-23`)
	require.ErrorIs(t, err, ErrBadSpec)
	var se *SpecError
	require.ErrorAs(t, err, &se)
	require.Equal(t, SpecError{Spec: "0 60 * * *", Field: "hour", Value: "60", Reason: "value 60 out of range 0-23"}, *se)
	var oe *taskOptionError
	require.False(t, errors.As(err, &oe), "a spec error is not an option's")
}

// SpecError.Detail says what SpecError.Error says after "xtimer: ", for every
// shape of SpecError: with and without the spec, with and without a field.
func TestSpecDetailIsTheSpecErrorsMessageWithoutThePrefix(t *testing.T) {
	t.Parallel()
	for _, se := range []*SpecError{
		{Spec: "0 60 * * *", Field: "hour", Value: "60", Reason: "value 60 out of range 0-23"},
		{Spec: "", Reason: "empty spec"},
		{Field: "location", Value: "Local", Reason: localZoneReason},
		{Spec: "@every 0s", Reason: "interval must be at least 1s"},
	} {
		require.Equal(t, se.Error(), "xtimer: "+se.Detail())
	}
	for _, spec := range []string{"0 60 * * *", "", "* * *", "@every -1s", "CRON_TZ=Mars/Base * * * * *", "0 0 L-40 * *"} {
		_, err := ParseSchedule(spec)
		var se *SpecError
		require.ErrorAs(t, err, &se, spec)
		require.Equal(t, err.Error(), "xtimer: "+se.Detail(), spec)
	}
}
