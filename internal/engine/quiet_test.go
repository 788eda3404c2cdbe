package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/cron"
	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// A bucket whose tasks fire once a day is skipped in the minutes up to
// their next fire without a look at its tasks; a task adopted into it (a
// new one, a changed schedule, a resume) fires in the next minute all the
// same, and the day's fire is planned in its minute.
func TestQuietBucketIsSkippedUntilATaskOfItChanges(t *testing.T) {
	t.Parallel()
	s := newEngine(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, nil)
	created := mustTime(t, "2026-01-01T00:00:00Z").UnixMilli()
	adopt := func(id int64, code, spec string) {
		s.view.adoptTask(store.Task{ID: id, App: s.opts.App, Code: code, Kind: store.KindFunc, Spec: spec, TimeZone: "UTC",
			Status: store.TaskActive, MaxAttempts: 1, CreatedMs: created, Version: 1})
	}
	adopt(1, "daily", "0 0 3 * * *")
	b := bucketOf("daily", s.opts.Buckets)
	sameBucket := func(prefix string) string {
		for i := 0; ; i++ {
			if code := fmt.Sprintf("%s-%d", prefix, i); bucketOf(code, s.opts.Buckets) == b {
				return code
			}
		}
	}
	adopt(2, sameBucket("nightly"), "0 30 4 * * *")
	minute := func(at string) int64 { return mustTime(t, at).Unix() / 60 }

	require.Empty(t, s.view.firesIn(minute("2026-11-30T10:00:00Z"), b, nil))
	s.view.mu.Lock()
	require.Equal(t, mustTime(t, "2026-12-01T03:00:00Z"), s.view.bucketQuiet[b].until.UTC(), "quiet until the earliest next fire")
	// Put a task in the bucket behind the index's back: a minute of the
	// quiet span does not look at the tasks, so it does not see it.
	sneaked := &taskState{code: "sneaked", status: statusActive, createdMs: created, bucket: uint16(b),
		base: &taskBase{def: &store.Definition{Kind: store.KindFunc}}}
	var err error
	sneaked.base.sched, err = cron.Parse("* * * * * *")
	require.NoError(t, err)
	s.view.byBucket[b] = append(s.view.byBucket[b], bucketTask{t: sneaked})
	s.view.mu.Unlock()
	require.Empty(t, s.view.firesIn(minute("2026-11-30T10:01:00Z"), b, nil))
	s.view.mu.Lock()
	s.view.byBucket[b] = s.view.byBucket[b][:len(s.view.byBucket[b])-1]
	s.view.mu.Unlock()

	// A task adopted into the bucket ends the quiet span.
	often := sameBucket("often")
	adopt(3, often, "*/10 * * * * *")
	got := s.view.firesIn(minute("2026-11-30T10:02:00Z"), b, nil)
	require.Len(t, got, 6)
	for _, f := range got {
		require.Equal(t, often, f.task.code)
	}
	// And the daily fire is planned in its minute.
	got = s.view.firesIn(minute("2026-12-01T03:00:00Z"), b, nil)
	require.Len(t, got, 7)
}

// A minute planned again (a slot held by another replica, rechecked each
// time its lock may have run out) gets the fires found the first time
// without a walk of the bucket's tasks, until a task of the bucket
// changes: a new schedule, a pause, a task dropped, a task added.
func TestFiresOfAMinuteAreKeptUntilATaskOfItsBucketChanges(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(mustTime(t, "2026-11-30T10:00:30Z"))
	s := newEngine(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t), clock: clock}, nil)
	created := mustTime(t, "2026-01-01T00:00:00Z").UnixMilli()
	row := func(id int64, code, spec, status string, version int64) store.Task {
		return store.Task{ID: id, App: s.opts.App, Code: code, Kind: store.KindFunc, Spec: spec, TimeZone: "UTC",
			Status: status, MaxAttempts: 1, CreatedMs: created, Version: version}
	}
	s.view.adoptTask(row(1, "a", "0 * * * * *", store.TaskActive, 1))
	b := bucketOf("a", s.opts.Buckets)
	other := ""
	for i := 0; other == ""; i++ {
		if code := fmt.Sprintf("b-%d", i); bucketOf(code, s.opts.Buckets) == b {
			other = code
		}
	}
	m := mustTime(t, "2026-11-30T10:01:00Z").Unix() / 60 // after the changes below, which apply from now on
	at := func(sec int) string { return time.Unix(m*60+int64(sec), 0).UTC().Format("15:04:05") }
	fires := func() []string {
		var out []string
		for _, f := range s.view.firesIn(m, b, nil) {
			out = append(out, f.task.code+"@"+f.at.UTC().Format("15:04:05"))
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, []string{"a@" + at(0)}, fires())

	// Behind the view's back (no generation bump), a changed task is not
	// seen: the minute's fires are the ones kept.
	s.view.mu.Lock()
	kept := s.view.taskLocked("a")
	kept.status = statusPaused
	s.view.mu.Unlock()
	require.Equal(t, []string{"a@" + at(0)}, fires(), "kept, not walked again")
	s.view.mu.Lock()
	kept.status = statusActive
	s.view.mu.Unlock()

	s.view.adoptTask(row(1, "a", "30 * * * * *", store.TaskActive, 2)) // rescheduled
	require.Equal(t, []string{"a@" + at(30)}, fires())
	s.view.adoptTask(row(2, other, "15 * * * * *", store.TaskActive, 1)) // added
	require.Equal(t, []string{"a@" + at(30), other + "@" + at(15)}, fires())
	s.view.adoptTask(row(1, "a", "30 * * * * *", store.TaskPaused, 3)) // paused
	require.Equal(t, []string{other + "@" + at(15)}, fires())
	s.view.mu.Lock()
	s.view.dropTaskLocked(other) // deleted
	s.view.mu.Unlock()
	require.Empty(t, fires())
}
