package xtimer

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// reportParams are the parameters of the tasks of this file.
type reportParams struct {
	Region string `json:"region"`
	Limit  int    `json:"limit"`
}

func TestWithParamsRefusesWhatDoesNotEncode(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, setupOpts{db: testsvc.SQLite(t), app: testsvc.App(t)}, nil)
	noop := func(context.Context, *Run) error { return nil }
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"channel", make(chan int), `xtimer: task "job": WithParams(chan int): cannot be encoded as JSON: json: unsupported type: chan int`},
		{"function", func() {}, `xtimer: task "job": WithParams(func()): cannot be encoded as JSON: json: unsupported type: func()`},
		{"bad raw JSON", json.RawMessage(`{"a":`), `xtimer: task "job": WithParams(json.RawMessage): cannot be encoded as JSON: json: error calling MarshalJSON for type json.RawMessage: unexpected end of JSON input`},
		{"over 64 KiB", map[string]string{"blob": strings.Repeat("x", 64<<10)}, `xtimer: task "job": WithParams(map[string]string): 65547 bytes of JSON: at most 65536`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.Register("job", "0 0 3 * * *", noop, WithParams(c.v))
			require.EqualError(t, err, c.want)
			var oe *taskOptionError
			require.True(t, errors.As(err, &oe))
			require.Equal(t, "WithParams", oe.option)
		})
	}
	// 64 KiB exactly is allowed: a string of 65,534 bytes and its quotes.
	require.NoError(t, s.Register("job", "0 0 3 * * *", noop, WithParams(strings.Repeat("x", 64<<10-2))))
}

func TestBindNamesTheTaskAndTypeWhenTheParamsDoNotFit(t *testing.T) {
	t.Parallel()
	run := &Run{Code: "report", Params: json.RawMessage(`{"region":"eu","limit":"ten"}`)}
	var p reportParams
	err := run.Bind(&p)
	require.EqualError(t, err, `xtimer: task "report": bind params into *xtimer.reportParams: json: cannot unmarshal string into Go struct field reportParams.limit of type int`)
	var typeErr *json.UnmarshalTypeError
	require.True(t, errors.As(err, &typeErr))

	// A run without parameters leaves the target as it is.
	p = reportParams{Region: "default"}
	require.NoError(t, (&Run{Code: "report"}).Bind(&p))
	require.Equal(t, reportParams{Region: "default"}, p)
}

// paramLog records, per run time ("15:04:05"), the parameters each call
// of a handler got, raw and bound.
type paramLog struct {
	mu    sync.Mutex
	raw   map[string][]string
	bound map[string][]reportParams
	errs  []error
	// byID is the parameters of each attempt, per execution.
	byID map[int64][]string
	// failFirst makes the first attempt of a manual run fail.
	failFirst bool
}

func newParamLog() *paramLog {
	return &paramLog{raw: map[string][]string{}, bound: map[string][]reportParams{}, byID: map[int64][]string{}}
}

// paramsOf returns the parameters each attempt of an execution got.
func (l *paramLog) paramsOf(id int64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.byID[id]...)
}

func (l *paramLog) handle(_ context.Context, run *Run) error {
	var p reportParams
	err := run.Bind(&p)
	at := run.ScheduledAt.UTC().Format("15:04:05")
	l.mu.Lock()
	defer l.mu.Unlock()
	l.raw[at] = append(l.raw[at], string(run.Params))
	l.bound[at] = append(l.bound[at], p)
	l.byID[run.ExecutionID] = append(l.byID[run.ExecutionID], string(run.Params))
	if err != nil {
		l.errs = append(l.errs, err)
	}
	if l.failFirst && run.Source == SourceManual && run.Attempt == 1 {
		return errors.New("first attempt fails")
	}
	return err
}

func (l *paramLog) snapshot() (map[string][]string, map[string][]reportParams, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	raw, bound := map[string][]string{}, map[string][]reportParams{}
	for k, v := range l.raw {
		raw[k] = append([]string(nil), v...)
	}
	for k, v := range l.bound {
		bound[k] = append([]reportParams(nil), v...)
	}
	return raw, bound, append([]error(nil), l.errs...)
}

// Every scheduled fire of a task registered WithParams gets them, on
// whichever replica runs it, and the stored task shows them.
func TestParamsReachEveryScheduledFire(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		f := newEditFleet(t, db)
		l := newParamLog()
		params := WithParams(reportParams{Region: "eu", Limit: 3})
		s := startWith(f, l.handle, params)
		startWith(f, l.handle, params)
		end := hms(0, 30)
		f.runUntil(end.Add(500 * time.Millisecond))
		f.waitRows("job", end, lines(hms(0, 10), end, 10*time.Second, "succeeded schedule")...)
		raw, bound, errs := l.snapshot()
		require.Empty(t, errs)
		want, wantBound := map[string][]string{}, map[string][]reportParams{}
		for _, at := range []string{"12:00:10", "12:00:20", "12:00:30"} {
			want[at] = []string{`{"region":"eu","limit":3}`}
			wantBound[at] = []reportParams{{Region: "eu", Limit: 3}}
		}
		require.Equal(t, want, raw)
		require.Equal(t, wantBound, bound)

		tasks, err := s.Tasks(context.Background(), TaskFilter{CodePrefix: "job"})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		require.JSONEq(t, `{"region":"eu","limit":3}`, string(tasks[0].Params))
	})
}
