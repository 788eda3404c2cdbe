package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

// peerMemRecorder keeps every invocation in memory, for the adapters'
// tests.
type peerMemRecorder struct {
	mu    sync.Mutex
	calls []peerCall
}

type peerCall struct {
	task      string
	scheduled time.Time
	started   time.Time
	replica   int
}

type peerReplicaRecorder struct {
	m       *peerMemRecorder
	replica int
}

func (r peerReplicaRecorder) Record(task string, _ int, scheduled, started time.Time) {
	r.m.mu.Lock()
	r.m.calls = append(r.m.calls, peerCall{task, scheduled, started, r.replica})
	r.m.mu.Unlock()
}

// runPeerReplicas runs sys as two in-process replicas against the private
// services of a run (the harness's own startServices), with 20 tasks
// every second, until about five seconds after the first fire (which must
// come within settle of ready), and checks what they recorded: every fire
// scheduled in the window where the system runs steadily is recorded at
// least once, every scheduled instant is a whole second and precedes its
// start. It returns the records and the duplicate count. With
// lateAttributed, the system's fires may be attributed to a later second
// than theirs (asynq's: a fire that starts more than a period late), so a
// second with no record is reported, not asserted.
func runPeerReplicas(t *testing.T, sys System, needPG bool, settle time.Duration, lateAttributed bool) ([]peerCall, int) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts services and runs for seconds")
	}
	dir := t.TempDir()
	if needPG {
		openToPostgres(t, dir)
	}
	tpl := &templates{root: dir}
	svc, err := startServices(tpl, dir, needPG, false, false, 0)
	if err != nil {
		t.Fatalf("services: %v", err)
	}
	t.Cleanup(svc.close)
	redisAddr, pgURL, _ := svc.env()

	const replicas, nTasks = 2, 20
	tasks := make([]TaskSpec, nTasks)
	for i := range tasks {
		tasks[i] = TaskSpec{Code: taskCode(i), Spec: "* * * * * *"}
	}
	mem := &peerMemRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	readyCh := make(chan int, replicas)
	for r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := ReplicaEnv{Replica: r, RedisAddr: redisAddr, PostgresURL: pgURL, Workers: 8}
			var once sync.Once
			errs <- sys.Run(ctx, env, tasks, peerReplicaRecorder{mem, r}, func() { once.Do(func() { readyCh <- r }) })
		}()
	}
	for range replicas {
		select {
		case <-readyCh:
		case err := <-errs:
			t.Fatalf("replica failed at start: %v", err)
		case <-time.After(60 * time.Second):
			t.Fatal("replicas not ready in 60 s")
		}
	}
	// The check window opens a second after the first fire anybody
	// recorded (River's leader starts its periodic enqueuer up to several
	// seconds after the election) and runs for four seconds.
	var first time.Time
	for deadline := time.Now().Add(settle); time.Now().Before(deadline) && first.IsZero(); {
		time.Sleep(100 * time.Millisecond)
		mem.mu.Lock()
		for _, c := range mem.calls {
			if first.IsZero() || c.scheduled.Before(first) {
				first = c.scheduled
			}
		}
		mem.mu.Unlock()
	}
	if first.IsZero() {
		cancel()
		t.Fatalf("no fire recorded within %v of ready", settle)
	}
	time.Sleep(time.Until(first.Add(5*time.Second + 500*time.Millisecond)))
	end := time.Now()
	cancel()
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("replicas did not stop within 15 s of the end")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	}

	mem.mu.Lock()
	calls := append([]peerCall(nil), mem.calls...)
	mem.mu.Unlock()
	type key struct {
		task string
		at   int64
	}
	count := map[key]int{}
	perReplica := map[int]int{}
	var late []time.Duration
	for _, c := range calls {
		count[key{c.task, c.scheduled.Unix()}]++
		perReplica[c.replica]++
		if !c.scheduled.Equal(c.scheduled.Truncate(time.Second)) {
			t.Errorf("%s: scheduled %v is not a whole second", c.task, c.scheduled)
		}
		if c.started.Before(c.scheduled) {
			t.Errorf("%s: started %v before scheduled %v", c.task, c.started, c.scheduled)
		}
		late = append(late, c.started.Sub(c.scheduled))
	}
	dups := 0
	for _, n := range count {
		dups += n - 1
	}
	from := first.Add(time.Second)
	to := end.Add(-time.Second).Truncate(time.Second)
	missing := 0
	for at := from; !at.After(to); at = at.Add(time.Second) {
		for _, tk := range tasks {
			if count[key{tk.Code, at.Unix()}] == 0 {
				missing++
				if missing <= 5 && !lateAttributed {
					t.Errorf("%s at %s: not recorded", tk.Code, at.Format("15:04:05"))
				}
			}
		}
	}
	if missing > 0 && !lateAttributed {
		t.Errorf("%d fires between %s and %s not recorded", missing, from.Format("15:04:05"), to.Format("15:04:05"))
	}
	if missing > 0 && lateAttributed {
		t.Logf("%s: %d fires between %s and %s have no record of their own second (started a period late or more, or missed)",
			sys.Name(), missing, from.Format("15:04:05"), to.Format("15:04:05"))
	}
	if from.After(to) {
		t.Fatalf("empty check window")
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	if len(late) > 0 {
		t.Logf("%s: %d invocations (per replica %v), %d distinct fires, %d duplicates, lateness p50 %v max %v",
			sys.Name(), len(calls), perReplica, len(count), dups, late[len(late)/2], late[len(late)-1])
	}
	return calls, dups
}

func TestGocronAdapter(t *testing.T) {
	_, dups := runPeerReplicas(t, newGocron(), false, 5*time.Second, false)
	// gocron's Redis lock is held only while the handler runs, so a replica
	// whose timer fires after the winner released runs the fire again: the
	// count is reported, not asserted.
	t.Logf("gocron-redislock duplicates: %d", dups)
}

func TestPeerCronLastAtOrBefore(t *testing.T) {
	for _, tc := range []struct {
		spec string
		at   string
		want string
	}{
		{"* * * * * *", "2026-01-02T03:04:05.999Z", "2026-01-02T03:04:05Z"},
		{"* * * * * *", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z"},
		{"0 * * * * *", "2026-01-02T03:04:05.5Z", "2026-01-02T03:04:00Z"},
		{"0 * * * * *", "2026-01-02T03:04:00.001Z", "2026-01-02T03:04:00Z"},
		{"7 30 2 * * *", "2026-01-02T01:00:00Z", "2026-01-01T02:30:07Z"},
	} {
		c, err := parsePeerCron(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		at, _ := time.Parse(time.RFC3339Nano, tc.at)
		want, _ := time.Parse(time.RFC3339Nano, tc.want)
		if got := c.lastAtOrBefore(at); !got.Equal(want) {
			t.Errorf("%q at %s: got %s, want %s", tc.spec, tc.at, got, want)
		}
	}
}

// openToPostgres lets the postgres user, which PostgreSQL runs as, reach
// a data dir under dir, one of the test's 0700 temp dirs.
func openToPostgres(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
