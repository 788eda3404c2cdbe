// Command replica is one replica process of the chaos harness (../main.go):
// it registers the chaos tasks on an xtimer.Scheduler and appends one line
// per handler call to its own file, which the harness reads to count how
// often each fire, or each shard of a fire, really ran. Execution rows
// cannot show a duplicate (they are unique by construction); these files
// can.
//
//	replica -app chaos -dsn postgres://... -redis 127.0.0.1:6380 -id r0-g1 -tasks 50 -log inv/r0-g1.log
//
// -redis-cluster (node addresses) or -sentinels with -master replace
// -redis for a Redis Cluster or a Sentinel-watched master.
//
// The invocation file is opened with O_APPEND and every line is written
// with one write(2): a line the handler wrote survives a SIGKILL of the
// process, since the kernel holds the data.
//
// SIGTERM stops the scheduler with a 10 s deadline and exits 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/xtimer-go/xtimer"
)

func main() {
	app := flag.String("app", "chaos", "xtimer App")
	dsn := flag.String("dsn", "", "PostgreSQL URL (postgres://user@host:port/db?sslmode=disable)")
	redisAddr := flag.String("redis", "", "Redis address for the slot lock")
	clusterAddrs := flag.String("redis-cluster", "", "Redis Cluster node addresses, comma-separated (instead of -redis)")
	sentinelAddrs := flag.String("sentinels", "", "Redis Sentinel addresses, comma-separated (instead of -redis; with -master)")
	masterName := flag.String("master", "", "the master name the Sentinels monitor")
	id := flag.String("id", "", "InstanceID of this replica")
	tasks := flag.Int("tasks", 50, "tasks chaos.t.000.. firing every second")
	extra := flag.Bool("extra", false, "also register chaos.extra (the rolling-deploy task)")
	skew := flag.Duration("skew", 0, "run this replica's clock off by this offset: ahead when positive, behind when negative (-skew=-30s)")
	logPath := flag.String("log", "", "append-only invocation file")
	flag.Parse()
	rdb, err := redisClient(*redisAddr, *clusterAddrs, *sentinelAddrs, *masterName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(2)
	}
	err = run(*app, *dsn, rdb, *id, *tasks, *extra, *skew, *logPath)
	_ = rdb.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
}

// redisClient connects to the Redis of exactly one of -redis (one
// server), -redis-cluster (redis.NewClusterClient) and -sentinels with
// -master (redis.NewFailoverClient). Every call is bounded by a second, as
// the slot lock's calls are.
func redisClient(addr, cluster, sentinels, master string) (redis.UniversalClient, error) {
	set := 0
	for _, f := range []string{addr, cluster, sentinels} {
		if f != "" {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("-redis %q, -redis-cluster %q, -sentinels %q: give exactly one", addr, cluster, sentinels)
	}
	if (sentinels == "") != (master == "") {
		return nil, fmt.Errorf("-sentinels %q, -master %q: give both or neither", sentinels, master)
	}
	const timeout = time.Second
	switch {
	case cluster != "":
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(cluster, ","), ContextTimeoutEnabled: true,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout}), nil
	case sentinels != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: strings.Split(sentinels, ","),
			ContextTimeoutEnabled: true, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout}), nil
	}
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout}), nil
}

// TaskCode is the code of the i-th chaos task; the harness uses the same
// format.
func TaskCode(i int) string { return fmt.Sprintf("chaos.t.%03d", i) }

// ExtraCode is the task only the "new build" registers during a rolling
// deploy.
const ExtraCode = "chaos.extra"

// The overlap tasks fire every two seconds and run 200 ms, but every
// sixth fire runs 5.5 s (BufferRun): the two fires due meanwhile wait
// (BufferAll), or one waits and one is skipped (BufferOne), or the next
// one stops the long run (CancelOther). Their handlers also append an end
// line when they return, the start line's fields with the time it ended
// and "end" after them, so that the harness can check that no run of
// theirs started before the one before it ended.
var BufferTasks = map[string]xtimer.OverlapPolicy{
	"chaos.buffer.one":   xtimer.OverlapBufferOne,
	"chaos.buffer.all":   xtimer.OverlapBufferAll,
	"chaos.cancel.other": xtimer.OverlapCancelOther,
}

// BufferSpec is the schedule of the buffer tasks.
const BufferSpec = "*/2 * * * * *"

// BufferRun is how long the fire of a buffer task at runTime (Unix ms)
// runs.
func BufferRun(runTime int64) time.Duration {
	if (runTime/2000)%6 == 0 {
		return 5500 * time.Millisecond
	}
	return 200 * time.Millisecond
}

// JitterTasks fire every five seconds (JitterSpec), each fire starting up
// to JitterMax after its nominal instant (WithJitter): the harness checks
// them once per fire like the others, and their lateness from the
// planned start their rows record.
var JitterTasks = []string{"chaos.jitter.a", "chaos.jitter.b", "chaos.jitter.c"}

const (
	JitterSpec = "*/5 * * * * *"
	JitterMax  = 4 * time.Second
)

// ShardTask fires every second (ShardSpec) in ShardCount shards
// (WithShards), dealt round the live replicas; BroadcastTask fires every
// second once on each live replica (WithBroadcast). Their handlers run
// ShardRun, so that a kill or a freeze may land in one, and the harness
// checks them once per (fire, shard).
const (
	ShardTask     = "chaos.shard"
	ShardCount    = 8
	BroadcastTask = "chaos.broadcast"
	ShardSpec     = "* * * * * *"
	ShardRun      = 300 * time.Millisecond
)

// skewedClock is a replica whose wall clock runs off by a fixed offset, as
// an unsynchronised host's would: Now is shifted, durations are not (a
// timer of d still rings after d of real time).
type skewedClock struct {
	xtimer.Clock
	skew time.Duration
}

func (c skewedClock) Now() time.Time { return c.Clock.Now().Add(c.skew) }

func run(app, dsn string, rdb redis.UniversalClient, id string, tasks int, extra bool, skew time.Duration, logPath string) error {
	if dsn == "" || id == "" || logPath == "" {
		return fmt.Errorf("-dsn, -id and -log are required")
	}
	inv, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer inv.Close()

	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return fmt.Errorf("open %s: %w", dsn, err)
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var clock xtimer.Clock = xtimer.SystemClock()
	if skew != 0 {
		clock = skewedClock{clock, skew}
		log.Info("clock skewed", "skew", skew)
	}
	s, err := xtimer.New(xtimer.Options{DB: db, Redis: rdb, App: app, InstanceID: id, Logger: log, Clock: clock})
	if err != nil {
		return err
	}

	// line is "code run_time_ms shard shards unix_ms replica attempt":
	// the run's shard (0 of 1 for a task that is not sharded), and the
	// real time, not the skewed clock: lateness is measured against the
	// harness's (the majority's) notion of time.
	line := func(r *xtimer.Run) string {
		return r.Code + " " + strconv.FormatInt(r.ScheduledAt.UnixMilli(), 10) + " " +
			strconv.Itoa(r.Shard) + " " + strconv.Itoa(r.Shards) + " " +
			strconv.FormatInt(time.Now().UnixMilli(), 10) + " " + id + " " + strconv.Itoa(r.Attempt)
	}
	// record appends the line of a handler call as it starts.
	record := func(_ context.Context, r *xtimer.Run) error {
		_, err := inv.Write([]byte(line(r) + "\n"))
		return err
	}
	for i := range tasks {
		if err := s.Register(TaskCode(i), "* * * * * *", record); err != nil {
			return err
		}
	}
	if extra {
		if err := s.Register(ExtraCode, "* * * * * *", record); err != nil {
			return err
		}
	}
	buffered := func(ctx context.Context, r *xtimer.Run) error {
		if err := record(ctx, r); err != nil {
			return err
		}
		var stopped error
		select {
		case <-time.After(BufferRun(r.ScheduledAt.UnixMilli())):
		case <-ctx.Done():
			stopped = ctx.Err() // cancelled by the next fire, or the replica stops
		}
		if _, err := inv.Write([]byte(line(r) + " end\n")); err != nil {
			return err
		}
		return stopped
	}
	for code, policy := range BufferTasks {
		if err := s.Register(code, BufferSpec, buffered, xtimer.WithOverlap(policy)); err != nil {
			return err
		}
	}
	for _, code := range JitterTasks {
		if err := s.Register(code, JitterSpec, record, xtimer.WithJitter(JitterMax)); err != nil {
			return err
		}
	}
	// The shard handlers ignore their context, as many do: a graceful
	// stop waits for them.
	shard := func(ctx context.Context, r *xtimer.Run) error {
		if err := record(ctx, r); err != nil {
			return err
		}
		time.Sleep(ShardRun)
		return nil
	}
	if err := s.Register(ShardTask, ShardSpec, shard, xtimer.WithShards(ShardCount)); err != nil {
		return err
	}
	if err := s.Register(BroadcastTask, ShardSpec, shard, xtimer.WithBroadcast()); err != nil {
		return err
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	startCtx, cancelStart := context.WithCancel(context.Background())
	go func() {
		<-sig
		cancelStart()
	}()
	if err := s.Start(startCtx); err != nil {
		if startCtx.Err() != nil {
			return nil // SIGTERM while waiting for the database
		}
		return err
	}
	<-startCtx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		log.Error("stop", "err", err)
	}
	return nil
}
