package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/internal/store"
)

func TestTaskScheduleIsTheCodeSpecInItsZone(t *testing.T) {
	t.Parallel()
	sched, err := store.Task{Spec: "0 0 9 * * *", TimeZone: "Asia/Shanghai"}.Schedule()
	require.NoError(t, err)
	require.Equal(t, "0 0 9 * * *", sched.String())
	require.Equal(t, cron.DialectCron, sched.Dialect())
	require.Equal(t, "Asia/Shanghai", sched.Location().String())
	after := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	require.Equal(t, "2026-11-30T09:00:00+08:00", sched.Next(after).Format(time.RFC3339))
}

func TestTaskScheduleWithoutDialectOrZoneIsCronInUTC(t *testing.T) {
	t.Parallel()
	sched, err := store.Task{Spec: "*/15 * * * *"}.Schedule()
	require.NoError(t, err)
	require.Equal(t, cron.DialectCron, sched.Dialect())
	require.Equal(t, "UTC", sched.Location().String())
}

func TestTaskScheduleAppliesEachOverride(t *testing.T) {
	t.Parallel()
	spec, dialect, zone := "0 0 12 ? * 2-6", string(cron.DialectQuartz), "Europe/London"
	task := store.Task{Spec: "0 9 * * *", Dialect: string(cron.DialectCron), TimeZone: "UTC",
		SpecOverride: &spec, DialectOverride: &dialect, TZOverride: &zone}
	sched, err := task.Schedule()
	require.NoError(t, err)
	require.Equal(t, "0 0 12 ? * 2-6", sched.String())
	require.Equal(t, cron.DialectQuartz, sched.Dialect())
	require.Equal(t, "Europe/London", sched.Location().String())

	// The zone alone overrides: the code's spec is read in it.
	task = store.Task{Spec: "0 9 * * *", TimeZone: "UTC", TZOverride: &zone}
	sched, err = task.Schedule()
	require.NoError(t, err)
	require.Equal(t, "0 9 * * *", sched.String())
	require.Equal(t, "Europe/London", sched.Location().String())
}

func TestTaskScheduleErrorsNameTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		task         store.Task
		field, value string
	}{
		{store.Task{Spec: "0 9 * * *", TimeZone: "Mars/Base"}, "time zone", "Mars/Base"},
		{store.Task{Spec: "0 9 * * *", TimeZone: "Local"}, "time zone", "Local"},
		{store.Task{Spec: "60 9 * * *"}, "minute", "60"},
		{store.Task{Spec: "0 9 * * *", Dialect: "vixie"}, "dialect", "vixie"},
		{store.Task{Spec: "0 9 * * *", Dialect: string(cron.DialectQuartz)}, "", ""},
	}
	for _, c := range cases {
		sched, err := c.task.Schedule()
		require.Nil(t, sched, "%+v", c.task)
		require.ErrorIs(t, err, cron.ErrBadSpec)
		var se *cron.SpecError
		require.ErrorAs(t, err, &se)
		require.Equal(t, c.field, se.Field, err.Error())
		require.Equal(t, c.value, se.Value, err.Error())
	}
}
