package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/store"
)

// dispatchFakes are the dispatcher's collaborators, answering as a
// healthy database and an idle pool do: every claim is won.
type dispatchFakes struct{ begun chan int64 }

func (f dispatchFakes) fireTask(code string) (*taskState, *registration, bool) {
	def := taskDef("* * * * * *")
	return &taskState{code: code, status: statusActive, base: &taskBase{def: &def}}, nil, true
}
func (f dispatchFakes) StartFires(_ context.Context, _ string, ids []int64, _ string, _ int64) ([]int64, error) {
	return ids, nil
}
func (f dispatchFakes) RunningCount(context.Context, string, string, int64) (int64, error) {
	return 0, nil
}
func (f dispatchFakes) OverlapState(context.Context, string, string, int64, int64, int64) (store.Overlap, error) {
	return store.Overlap{}, nil
}
func (f dispatchFakes) BackfillState(context.Context, string, string, int64, int64) (store.Overlap, error) {
	return store.Overlap{}, nil
}
func (f dispatchFakes) RequestCancel(context.Context, string, string, int64, int64, int64) (int64, error) {
	return 0, nil
}
func (f dispatchFakes) started(store.Execution, time.Time)      {}
func (f dispatchFakes) skip(store.Execution, string, time.Time) {}
func (f dispatchFakes) Stats() (int, int)                       { return 0, 0 }
func (f dispatchFakes) MeanRun() (time.Duration, bool)          { return 0, false }
func (f dispatchFakes) Rate() (float64, bool)                   { return 0, false }

// fakeDispatcher is a dispatcher on f, started by hand (loop, dispatch);
// the test sets its start.
func fakeDispatcher(f dispatchFakes) *dispatcher {
	return &dispatcher{
		clock: SystemClock{}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), app: "a", replica: "r", workers: 4,
		view: f, store: f, status: f, pool: f, noteDB: func(error) {},
		armedIDs: map[int64]bool{}, armedAt: map[int64]int{}, wake: make(chan struct{}, 1),
		cancellable: map[int64]cancellable{}, backlogIDs: map[int64]bool{}, dispatching: map[int64]bool{},
	}
}

// The promise: a fire due for its claim while the dispatcher waits the
// last instant before the start of fires it claimed ahead (startEarly, on
// the system clock) is claimed and started after them. The loop popped it
// and went round again without it: it was never started, its row left
// scheduled and owned by a replica that lived (the chaos runs' stuck
// fires). Each round sets the scene afresh; a round whose loop runs late
// finds the claimed fire's start passed and does not wait for it, so
// several are run.
func TestFireDueWhileAClaimedStartIsAwaitedStarts(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		f := dispatchFakes{begun: make(chan int64, 2)}
		d := fakeDispatcher(f)
		d.start = func(_ *attempt, r store.Execution, _ time.Time) { f.begun <- r.ID }
		now := time.Now()
		// Claimed ahead, its start a millisecond away; and one due for its
		// claim already.
		d.claimed = fireHeap{{row: store.Execution{ID: 1, TaskCode: "claimed", Source: store.SourceManual}, due: now.Add(time.Millisecond)}}
		d.arm(store.Execution{ID: 2, TaskCode: "due", Source: store.SourceManual, RunTime: now.Add(-time.Millisecond).UnixMilli()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); d.loop(ctx) }()
		got := map[int64]bool{}
		for len(got) < 2 {
			select {
			case id := <-f.begun:
				got[id] = true
			case <-time.After(5 * time.Second):
				t.Errorf("round %d: fires started: %v; want 1 and 2", round, got)
				got[0], got[1], got[2] = true, true, true
			}
		}
		cancel()
		<-done
		if t.Failed() {
			return
		}
	}
}

// The promise: a fire claimed ahead of its run time has its attempt's
// memory from the claim, and starts in it at its run time, so that the
// fires of an instant allocate less as they start together; a fire
// claimed at or after its run time starts at once in a new attempt.
func TestFireClaimedAheadStartsInTheAttemptAllocatedAtItsClaim(t *testing.T) {
	t.Parallel()
	type begun struct {
		a  *attempt
		id int64
	}
	starts := make(chan begun, 2)
	f := dispatchFakes{}
	d := fakeDispatcher(f)
	d.start = func(a *attempt, r store.Execution, _ time.Time) { starts <- begun{a, r.ID} }
	now := time.Now()
	ahead := &armedFire{row: store.Execution{ID: 1, TaskCode: "ahead", Source: store.SourceManual,
		RunTime: now.Add(200 * time.Millisecond).UnixMilli()}}
	due := &armedFire{row: store.Execution{ID: 2, TaskCode: "due", Source: store.SourceManual,
		RunTime: now.Add(-time.Millisecond).UnixMilli()}}
	d.dispatch(context.Background(), []*armedFire{ahead, due}, now, now)

	var got begun
	select {
	case got = <-starts:
	default:
		t.Fatal("the fire due already did not start")
	}
	require.Equal(t, int64(2), got.id, "the fire due already starts at once")
	require.Nil(t, got.a, "in a new attempt")
	require.Equal(t, 1, d.claimed.Len(), "the other waits for its run time")
	att := d.claimed[0].att
	require.NotNil(t, att, "its attempt allocated at the claim")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.loop(ctx) }()
	select {
	case got = <-starts:
	case <-time.After(10 * time.Second):
		t.Fatal("the fire claimed ahead did not start")
	}
	cancel()
	<-done
	require.Equal(t, int64(1), got.id)
	require.Same(t, att, got.a, "it starts in the attempt allocated at its claim")
}

// The promise of noteRunning and runningBesides: a task's attempts are
// counted by fire, the other shards of a fire do not count against it,
// another fire's attempts do, and once every attempt ended nothing is
// left behind (a million tasks run here over a day). A fire that is not
// sharded counts against its task's other fires. So for tasks registered
// here, counted on their registrations, and for HTTP callbacks, counted
// in the stripes.
func TestRunningCountsAttemptsByFire(t *testing.T) {
	t.Parallel()
	for _, registered := range []bool{true, false} {
		t.Run(fmt.Sprintf("registered=%v", registered), func(t *testing.T) {
			t.Parallel()
			regs := map[string]*registration{}
			if registered {
				for _, code := range []string{"a", "b", "c"} {
					regs[code] = &registration{code: code}
				}
			}
			d := &dispatcher{}
			shard := func(code string, runTime int64, n int) (store.Execution, *registration) {
				return store.Execution{TaskCode: code, RunTime: runTime, Shard: n, Shards: 2}, regs[code]
			}
			whole := func(code string, runTime int64) (store.Execution, *registration) {
				return store.Execution{TaskCode: code, RunTime: runTime}, regs[code]
			}
			note := func(delta int) func(store.Execution, *registration) {
				return func(r store.Execution, reg *registration) { d.noteRunning(r, reg, delta) }
			}
			in, out := note(1), note(-1)
			require.Zero(t, d.runningBesides(regs["a"], "a", 1000), "nothing ran yet")
			in(shard("a", 1000, 0))
			in(shard("a", 1000, 1)) // a second shard of the same fire
			in(whole("b", 1000))
			require.Zero(t, d.runningBesides(regs["a"], "a", 1000), "its own fire's shards")
			require.Equal(t, 2, d.runningBesides(regs["a"], "a", 2000), "both shards of the fire at 1000")
			require.Equal(t, 1, d.runningBesides(regs["b"], "b", 2000), "another task's attempts are not a's")
			require.Zero(t, d.runningBesides(regs["c"], "c", 1000), "nor c's")
			in(shard("a", 2000, 0))
			require.Equal(t, 1, d.runningBesides(regs["a"], "a", 1000), "the fire at 2000")
			out(shard("a", 1000, 0))
			out(shard("a", 1000, 1))
			out(shard("a", 2000, 0))
			out(whole("b", 1000))
			require.Zero(t, d.runningBesides(regs["a"], "a", 3000))
			require.Zero(t, d.runningBesides(regs["b"], "b", 2000))
			for i := range d.running {
				require.Empty(t, d.running[i].byTask, "no task left counted")
				require.Empty(t, d.running[i].byFire, "no fire left counted")
			}
			for _, reg := range regs {
				require.Zero(t, reg.running.Load(), "no attempt of %s left counted", reg.code)
			}
		})
	}
}

// An attempt counts where it began: an HTTP task's attempt still running
// when a Go handler is registered under its code (the task deleted and
// registered again) counts in the stripes, the handler's on its
// registration, and runningBesides sums both.
func TestRunningCountsAnAttemptWhereItBegan(t *testing.T) {
	t.Parallel()
	regs := map[string]*registration{}
	d := &dispatcher{}
	d.noteRunning(store.Execution{TaskCode: "a", RunTime: 1000}, nil, 1)
	regs["a"] = &registration{code: "a"}
	d.noteRunning(store.Execution{TaskCode: "a", RunTime: 2000}, regs["a"], 1)
	require.Equal(t, 2, d.runningBesides(regs["a"], "a", 3000))
	d.noteRunning(store.Execution{TaskCode: "a", RunTime: 1000}, nil, -1)
	require.Equal(t, 1, d.runningBesides(regs["a"], "a", 3000))
	d.noteRunning(store.Execution{TaskCode: "a", RunTime: 2000}, regs["a"], -1)
	require.Zero(t, d.runningBesides(regs["a"], "a", 3000))
}
