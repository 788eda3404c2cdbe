// Command cluster runs the same tasks on several replica processes against
// Redis and MySQL/MariaDB or PostgreSQL, and then counts, from a table of its
// own that every handler call appends to, how often each fire ran: so a
// person can see with their own eyes that every fire ran once.
//
//	go run ./examples/cluster -replicas 3 -for 60s
//	go run ./examples/cluster -dsn mysql://root@127.0.0.1:3306/test -redis 127.0.0.1:6379
//
// The parent starts the replicas as separate processes (itself, with
// -child), stops them with SIGTERM at the end, and prints the summary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/backend"
)

// Invocation is one handler call, recorded outside xtimer's own tables
// (whose rows are unique by construction and so cannot show a duplicate).
type Invocation struct {
	ID        uint64 `gorm:"primaryKey;autoIncrement"`
	App       string `gorm:"size:64;index:cluster_inv_fire,priority:1"`
	Task      string `gorm:"size:128;index:cluster_inv_fire,priority:2"`
	RunTime   int64  `gorm:"index:cluster_inv_fire,priority:3"`
	StartedMs int64
	Replica   string `gorm:"size:128"`
}

// TableName keeps the example's table apart from xtimer's.
func (Invocation) TableName() string { return "cluster_invocations" }

func main() {
	replicas := flag.Int("replicas", 3, "replica processes to start")
	tasks := flag.Int("tasks", 50, "tasks, each firing every second")
	runFor := flag.Duration("for", 30*time.Second, "how long the replicas run")
	dsn := flag.String("dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "mysql://... or postgres://...")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis address for the slot lock")
	app := flag.String("app", "", "xtimer App (default: a new one per run)")
	child := flag.String("child", "", "internal: run as the replica with this ID")
	flag.Parse()
	var err error
	if *child != "" {
		err = runReplica(*child, *app, *dsn, *redisAddr, *tasks)
	} else {
		err = runParent(*replicas, *tasks, *runFor, *dsn, *redisAddr, *app)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func taskCode(i int) string { return fmt.Sprintf("cluster.task.%03d", i) }

func runReplica(id, app, dsn, redisAddr string, tasks int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	db, _, err := backend.OpenDB(dsn)
	if err != nil {
		return fmt.Errorf("-dsn %w", err)
	}
	rdb, err := backend.OpenRedis(ctx, redisAddr)
	if err != nil {
		return fmt.Errorf("-redis %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := xtimer.New(xtimer.Options{DB: db, Redis: rdb, App: app, InstanceID: id, Logger: log})
	if err != nil {
		return err
	}
	record := func(ctx context.Context, run *xtimer.Run) error {
		return db.WithContext(ctx).Create(&Invocation{App: app, Task: run.Code, RunTime: run.ScheduledAt.UnixMilli(),
			StartedMs: time.Now().UnixMilli(), Replica: id}).Error
	}
	for i := range tasks {
		if err := s.Register(taskCode(i), "* * * * * *", record); err != nil {
			return err
		}
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Stop(stopCtx)
}

func runParent(replicas, tasks int, runFor time.Duration, dsn, redisAddr, app string) error {
	if replicas < 1 || tasks < 1 || runFor < 10*time.Second {
		return errors.New("want -replicas >= 1, -tasks >= 1 and -for >= 10s")
	}
	if app == "" {
		app = fmt.Sprintf("cluster-%d", time.Now().Unix())
	}
	db, where, err := backend.OpenDB(dsn)
	if err != nil {
		return fmt.Errorf("-dsn %w", err)
	}
	if err = db.AutoMigrate(&Invocation{}); err != nil {
		return fmt.Errorf("create cluster_invocations: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("cluster: %d replica processes, %d tasks every second, for %s, on %s and Redis %s (app %s)\n",
		replicas, tasks, runFor, where, redisAddr, app)
	var procs []*exec.Cmd
	for i := range replicas {
		//nolint:gosec,noctx // G204: this program starts copies of itself; they are stopped by signal
		cmd := exec.Command(self, "-child", fmt.Sprintf("replica-%d", i), "-app", app, "-dsn", dsn, "-redis", redisAddr,
			"-tasks", fmt.Sprint(tasks))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, cmd)
	}
	started := time.Now()
	time.Sleep(runFor)
	stopped := time.Now()
	var wg sync.WaitGroup
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.Wait() }()
	}
	wg.Wait()
	// Count whole seconds well inside the run: the first seconds are start-up.
	from := started.Truncate(time.Second).Add(5 * time.Second)
	to := stopped.Truncate(time.Second).Add(-2 * time.Second)
	return summarize(db, app, tasks, from, to)
}

func summarize(db *gorm.DB, app string, tasks int, from, to time.Time) error {
	var rows []Invocation
	err := db.Where("app = ? AND run_time >= ? AND run_time < ?", app, from.UnixMilli(), to.UnixMilli()).Find(&rows).Error
	if err != nil {
		return err
	}
	type fire struct {
		task string
		at   int64
	}
	count := map[fire]int{}
	perReplica := map[string]int{}
	var late []int64
	for _, r := range rows {
		f := fire{r.Task, r.RunTime}
		if count[f]++; count[f] == 1 {
			late = append(late, r.StartedMs-r.RunTime)
		}
		perReplica[r.Replica]++
	}
	expected := int(to.Sub(from)/time.Second) * tasks
	once, dup, missed := 0, 0, 0
	for i := range tasks {
		for at := from; at.Before(to); at = at.Add(time.Second) {
			switch n := count[fire{taskCode(i), at.UnixMilli()}]; {
			case n == 0:
				missed++
			case n == 1:
				once++
			default:
				dup++
			}
		}
	}
	fmt.Printf("\nfires %s .. %s: expected %d, ran once %d, ran more than once %d, never ran %d\n",
		from.Format(time.TimeOnly), to.Format(time.TimeOnly), expected, once, dup, missed)
	names := make([]string, 0, len(perReplica))
	for n := range perReplica {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("  %-12s ran %d\n", n, perReplica[n])
	}
	if len(late) > 0 {
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		fmt.Printf("lateness (start - run time): p50 %dms, p99 %dms, max %dms\n",
			late[len(late)/2], late[len(late)*99/100], late[len(late)-1])
	}
	if dup > 0 || missed > 0 {
		return fmt.Errorf("%d fires ran more than once and %d never ran", dup, missed)
	}
	return nil
}
