package xtimer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
	"github.com/xtimer-go/xtimer/internal/store"
	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// metachars are inputs that break naive SQL, HTML, logs or byte-oriented
// code: each must be refused or stored verbatim, never interpreted.
var metachars = []string{
	`'; DROP TABLE xtimer_tasks;--`,
	`<script>alert(1)</script>`,
	`代码`,
	"a\nb",
	`" OR "1"="1`,
	`\'; DELETE FROM xtimer_executions; --`,
}

// A handler that writes 10 MB: its row keeps the first MaxOutput bytes and
// says it was cut; the replica goes on running tasks.
func TestBadInputOutputOfTenMegabytesIsStoredCappedAndMarked(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		s := newScheduler(t, setupOpts{db: db, app: testsvc.App(t)}, nil)
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
		big, small := newInvocations(), newInvocations()
		require.NoError(t, s.Register("big.output", "0 0 29 2 *", big.handler(func(r *Run) error {
			r.Printf("header of %s", r.ID)
			for range 10 {
				n, err := r.Write(chunk)
				if err != nil {
					return fmt.Errorf("Write returned %d: %w", n, err)
				}
				if n != len(chunk) {
					return fmt.Errorf("Write returned %d of %d bytes", n, len(chunk))
				}
			}
			r.Printf("trailer %d", 42) // beyond the cap: dropped
			return nil
		})))
		require.NoError(t, s.Register("small.output", "0 0 29 2 *", small.handler(func(r *Run) error {
			r.Printf("still here")
			return nil
		})))
		ctx := context.Background()
		require.NoError(t, s.Start(ctx))
		stopOnCleanup(t, s)

		exec, err := s.Trigger(ctx, "big.output")
		require.NoError(t, err)
		run := big.next(t, 5*time.Second)
		row := waitRow(t, s, exec.ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })

		marker := fmt.Sprintf("[output truncated at %d bytes]", DefaultMaxOutput)
		require.Equal(t, "[output truncated at 65536 bytes]", marker)
		header := "header of " + run.ID + "\n"
		require.True(t, strings.HasPrefix(row.Output, header+"0123456789abcdef"), "output starts with what the handler wrote first: %.80q", row.Output)
		require.True(t, strings.HasSuffix(row.Output, marker), "output ends with the truncation marker: ...%q", tail(row.Output, 80))
		require.LessOrEqual(t, len(row.Output), DefaultMaxOutput+len(marker)+1)
		require.LessOrEqual(t, len(row.Output), store.MaxTextBytes, "fits MySQL's TEXT")
		require.NotContains(t, row.Output, "trailer")
		require.Empty(t, row.Error)

		exec, err = s.Trigger(ctx, "small.output")
		require.NoError(t, err)
		small.next(t, 5*time.Second)
		row = waitRow(t, s, exec.ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
		require.Equal(t, "still here\n", row.Output)
	})
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// Codes and specs with SQL, HTML, unicode and control characters are
// refused with the value quoted and the field named, and nothing is
// stored; free text (name, description, owner) holding the same
// characters is stored verbatim, and no table is harmed.
func TestBadInputMetacharactersAreRefusedInCodesAndSpecsAndStoredVerbatimInText(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		app := testsvc.App(t)
		s := newScheduler(t, setupOpts{db: db, app: app}, nil)
		ok := func(context.Context, *Run) error { return nil }
		for _, v := range metachars {
			err := s.Register(v, "* * * * *", ok)
			require.ErrorContains(t, err, fmt.Sprintf("xtimer: task code %q: want 1-128 characters", v))

			err = s.Register("metachar.spec", v, ok)
			require.ErrorContains(t, err, fmt.Sprintf(`task "metachar.spec": spec %q`, v))

			zoned := "CRON_TZ=" + v + " * * * * *"
			err = s.Register("metachar.zone", zoned, ok)
			require.ErrorContains(t, err, fmt.Sprintf(`task "metachar.zone": spec %q: time zone field %q`, zoned, strings.SplitN(v, " ", 2)[0]))

			long := strings.Repeat(v, 300)
			err = s.Register("metachar.name", "* * * * *", ok, WithName(long))
			require.EqualError(t, err, fmt.Sprintf(`xtimer: task "metachar.name": WithName(%q): name must be 1-255 bytes`, long))
		}
		// A spec whose fields are fine but for one metacharacter field.
		err := s.Register("metachar.field", "0 <script> * * *", ok)
		require.ErrorContains(t, err, `task "metachar.field": spec "0 <script> * * *": hour field "<script>"`)

		text := strings.Join(metachars, " | ")
		owner := metachars[0] + " " + metachars[2]
		require.NoError(t, s.Register("metachar.text", "0 0 29 2 *", ok,
			WithName(metachars[1]), WithDescription(text), WithOwner(owner)))
		ctx := context.Background()
		require.NoError(t, s.Start(ctx))
		stopOnCleanup(t, s)

		row, err := s.store.Task(ctx, app, "metachar.text")
		require.NoError(t, err)
		require.Equal(t, text, row.Description)
		require.Equal(t, owner, row.Owner)
		require.Equal(t, metachars[1], row.Name)

		tasks, err := s.store.Tasks(ctx, app)
		require.NoError(t, err)
		require.Len(t, tasks, 1, "only the valid task is stored")
		require.Equal(t, "metachar.text", tasks[0].Code)

		for _, table := range []string{"xtimer_tasks", "xtimer_executions", "xtimer_slots", "xtimer_replicas"} {
			require.True(t, db.Migrator().HasTable(table), table)
		}
		var n int64
		require.NoError(t, db.Table("xtimer_tasks").Where("app = ?", app).Count(&n).Error)
		require.Equal(t, int64(1), n)

		// The text survives a manual run and the console's view of it.
		exec, err := s.Trigger(ctx, "metachar.text")
		require.NoError(t, err)
		waitRow(t, s, exec.ID, func(r store.Execution) bool { return r.Status == store.StatusSucceeded })
	})
}

// A spec that never fires (30 February) is a valid task: Start works, the
// loop runs over it, NextRuns is empty and no row is ever written.
func TestBadInputSpecThatNeverFiresIsAcceptedAndRecordsNothing(t *testing.T) {
	t.Parallel()
	db, app := testsvc.SQLite(t), testsvc.App(t)
	ctx := context.Background()
	t0 := time.Date(2028, 2, 29, 23, 59, 0, 500_000_000, time.UTC)
	clock := fakeclock.New(t0)
	iv := newInvocations()
	s := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, nil)
	require.NoError(t, s.Register("never", "0 0 0 30 2 *", iv.handler(nil)))
	require.NoError(t, s.Register("never.quartz", "0 0 0 30 2 ? *", iv.handler(nil), WithQuartz()))

	for _, code := range []string{"never", "never.quartz"} {
		next, err := s.NextRuns(code, 5)
		require.NoError(t, err, code)
		require.NotNil(t, next, code)
		require.Empty(t, next, code)
	}
	require.NoError(t, s.Start(ctx))
	stopOnCleanup(t, s)

	// Three minutes of ticks, across the end of February of a leap year.
	for range 12 {
		waitIdle(ctx, t, clock, s)
		clock.Advance(15 * time.Second)
	}
	waitIdle(ctx, t, clock, s)

	for _, code := range []string{"never", "never.quartz"} {
		next, err := s.NextRuns(code, 5)
		require.NoError(t, err, code)
		require.Empty(t, next, code)
		row, err := s.store.Task(ctx, app, code)
		require.NoError(t, err)
		require.Equal(t, store.TaskActive, row.Status)
	}
	rows, _, err := s.store.ListExecutions(ctx, store.ExecutionFilter{App: app}, store.Cursor{}, 10)
	require.NoError(t, err)
	require.Empty(t, rows)
	require.Empty(t, iv.ch)
}

// 3,000 tasks registered before Start: Start records them all.
func TestBadInputThousandsOfTasksRegisteredAtOnceAreAllRecordedByStart(t *testing.T) {
	t.Parallel()
	const n = 3000
	db, app := testsvc.SQLite(t), testsvc.App(t)
	// 10:00:00.5 on a Monday; every task fires at 09:MM daily, so none is due.
	clock := fakeclock.New(time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC))
	s := newScheduler(t, setupOpts{db: db, app: app, clock: clock}, nil)
	noop := func(context.Context, *Run) error { return nil }
	for i := range n {
		code := fmt.Sprintf("bulk.%04d", i)
		require.NoError(t, s.Register(code, fmt.Sprintf("0 %d 9 * * *", i%60), noop, WithDescription("task "+code)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	require.NoError(t, s.Start(ctx))
	t.Logf("Start with %d tasks on SQLite took %s", n, time.Since(began))
	stopOnCleanup(t, s)

	tasks, err := s.store.Tasks(ctx, app)
	require.NoError(t, err)
	require.Len(t, tasks, n)
	for i, row := range tasks {
		code := fmt.Sprintf("bulk.%04d", i)
		require.Equal(t, code, row.Code)
		require.Equal(t, fmt.Sprintf("0 %d 9 * * *", i%60), row.Spec, code)
		require.Equal(t, "task "+code, row.Description, code)
		require.Equal(t, int64(1), row.Version, code)
	}
	next, err := s.NextRuns("bulk.2999", 1)
	require.NoError(t, err)
	require.Equal(t, []time.Time{time.Date(2026, 12, 1, 9, 59, 0, 0, time.UTC)}, next)

	// The loop copes with them: a tick later, it still answers.
	waitIdle(ctx, t, clock, s)
	clock.Advance(time.Second)
	waitIdle(ctx, t, clock, s)
	rows, _, err := s.store.ListExecutions(ctx, store.ExecutionFilter{App: app}, store.Cursor{}, 10)
	require.NoError(t, err)
	require.Empty(t, rows)
}

// Stop is idempotent, a stopped scheduler stays stopped, and calls that
// need a running one say so.
func TestBadInputStopTwiceStartAfterStopAndTriggerBeforeStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ok := func(context.Context, *Run) error { return nil }

	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, nil)
	require.NoError(t, s.Register("job", "0 0 29 2 *", ok))
	_, err := s.Trigger(ctx, "job")
	require.ErrorIs(t, err, ErrNotStarted)
	require.NoError(t, s.Start(ctx))
	require.NoError(t, s.Stop(ctx))
	require.NoError(t, s.Stop(ctx))
	require.ErrorIs(t, s.Start(ctx), ErrStopped)
	require.ErrorIs(t, s.Register("job.after.stop", "0 0 29 2 *", ok), ErrStopped)
	_, err = s.Trigger(ctx, "job")
	require.Error(t, err, "a stopped scheduler records no manual run")

	// Never started: Stop twice is still fine, and Start refuses afterwards.
	idle := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, nil)
	require.NoError(t, idle.Stop(ctx))
	require.NoError(t, idle.Stop(ctx))
	require.ErrorIs(t, idle.Start(ctx), ErrStopped)
	require.ErrorIs(t, idle.Register("job", "0 0 29 2 *", ok), ErrStopped)

	// Two Stops at once (a signal handler and a deferred Stop) both return nil.
	both := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, nil)
	require.NoError(t, both.Register("job", "* * * * * *", ok))
	require.NoError(t, both.Start(ctx))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = both.Stop(ctx) }()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, both.Start(ctx), ErrStopped)
}

// Free text the databases cannot all store is refused at Register, naming
// the option, instead of stalling Start on a database error.
func TestBadInputFreeTextThatNoDatabaseStoresIsRefused(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t)}, nil)
	ok := func(context.Context, *Run) error { return nil }
	for _, c := range []struct {
		opt  TaskOption
		want string
	}{
		{WithDescription("a\x00b"), `WithDescription("a\x00b"): contains a NUL byte`},
		{WithDescription("bad \xff utf-8"), `WithDescription("bad \xff utf-8"): not valid UTF-8`},
		{WithDescription(strings.Repeat("x", 70_000)), `WithDescription(70000 bytes): at most 16384 bytes`},
		{WithName("n\x00"), `WithName("n\x00"): contains a NUL byte`},
		{WithOwner("\xfe"), `WithOwner("\xfe"): not valid UTF-8`},
	} {
		err := s.Register("text.check", "* * * * *", ok, c.opt)
		require.EqualError(t, err, `xtimer: task "text.check": `+c.want)
	}
}

// validCode is the regular expression of the docs, ^[a-z0-9][a-z0-9._:-]{0,127}$,
// written as a loop: the same answer for every string of the alphabet
// around it, short and long.
func TestValidCodeIsTheDocumentedPattern(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^[a-z0-9][a-z0-9._:-]{0,127}$`)
	alphabet := []byte("az09._:-A/ \x00\xff")
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(code string) {
		require.Equal(t, pattern.MatchString(code), validCode(code), "%q", code)
	}
	check("")
	for _, n := range []int{1, 2, 3, 127, 128, 129, 200} {
		for range 2000 {
			b := make([]byte, n)
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
				if rng.IntN(4) > 0 { // mostly valid bytes, so long valid codes occur too
					b[i] = alphabet[rng.IntN(8)]
				}
			}
			check(string(b))
		}
	}
}

// A second Register of a code is refused and leaves the first one as it
// was (its handler and registration order: internal/engine/register_test.go).
func TestDuplicateRegisterKeepsTheFirstRegistration(t *testing.T) {
	t.Parallel()
	s, err := New(Options{DB: testsvc.SQLite(t), App: testsvc.App(t)})
	require.NoError(t, err)
	called := ""
	first := func(context.Context, *Run) error { called = "first"; return nil }
	second := func(context.Context, *Run) error { called = "second"; return nil }
	require.NoError(t, s.Register("a", "0 * * * * *", first, WithTimeout(time.Minute)))
	require.NoError(t, s.Register("b", "0 * * * * *", first))
	err = s.Register("a", "30 * * * * *", second)
	require.ErrorIs(t, err, ErrDuplicateTask)
	require.EqualError(t, err, `xtimer: task already registered: "a"`)
	// The first registration stays: its schedule, not the refused one's.
	next, err := s.NextRuns("a", 1)
	require.NoError(t, err)
	require.Zero(t, next[0].Second(), "a's spec is the first one, 0 * * * * *")
	require.Empty(t, called, "no handler ran")
}
