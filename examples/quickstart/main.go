// Command quickstart runs three demo tasks on xtimer with nothing else
// running: a SQLite file in a temp dir and the in-process lock. It prints
// every execution as it settles and a summary at the end, and serves the
// console on 127.0.0.1 (its URL is printed at start).
//
//	go run ./examples/quickstart              # until Ctrl-C
//	go run ./examples/quickstart -for 30s
//	go run ./examples/quickstart -console 127.0.0.1:9000
//	go run ./examples/quickstart -console 0.0.0.0:8080 -password "$(openssl rand -hex 12)"   # reachable from other hosts, user admin; at least 16 bytes
//	go run ./examples/quickstart -redis 127.0.0.1:6379 -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/admin"
	"github.com/xtimer-go/xtimer/internal/backend"
)

func main() {
	runFor := flag.Duration("for", 0, "stop after this long (0: until Ctrl-C)")
	redisAddr := flag.String("redis", "", "Redis address for the slot lock (default: in-process lock)")
	dsn := flag.String("dsn", "", "mysql://... or postgres://... (default: SQLite in a temp dir)")
	verbose := flag.Bool("v", false, "log at debug level")
	consoleAddr := flag.String("console", "127.0.0.1:8080", `address of the console ("off": none); without -password only loopback clients are served`)
	password := flag.String("password", "", "protect the console with basic auth, user admin and this password (at least 16 bytes)")
	flag.Parse()
	if err := run(*runFor, *redisAddr, *dsn, *verbose, *consoleAddr, *password); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(runFor time.Duration, redisAddr, dsn string, verbose bool, consoleAddr, password string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, runFor)
		defer cancel()
	}
	dir, err := os.MkdirTemp("", "xtimer-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if dsn == "" {
		dsn = filepath.Join(dir, "xtimer.db")
	}
	db, where, err := backend.OpenDB(dsn)
	if err != nil {
		return fmt.Errorf("-dsn %w", err)
	}
	rdb, err := backend.OpenRedis(ctx, redisAddr)
	if err != nil {
		return fmt.Errorf("-redis %w", err)
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	app := fmt.Sprintf("quickstart-%d", time.Now().Unix())
	s, err := xtimer.New(xtimer.Options{
		DB: db, Redis: rdb, App: app,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	})
	if err != nil {
		return err
	}

	// 1. Every 2 seconds.
	err = s.Register("demo.tick", "*/2 * * * * *", func(ctx context.Context, run *xtimer.Run) error {
		run.Printf("tick %s", run.ScheduledAt.Format(time.TimeOnly))
		return nil
	}, xtimer.WithDescription("says tick every 2 seconds"))
	if err != nil {
		return err
	}
	// 2. Fails on its first attempt, succeeds on the retry.
	err = s.Register("demo.flaky", "*/10 * * * * *", func(ctx context.Context, run *xtimer.Run) error {
		if run.Attempt == 1 {
			return errors.New("upstream not ready (first attempt fails on purpose)")
		}
		run.Printf("succeeded on attempt %d of fire %s", run.Attempt, run.ID)
		return nil
	}, xtimer.WithRetry(3), xtimer.WithBackoff(time.Second, 5*time.Second))
	if err != nil {
		return err
	}
	// 3. Takes longer than its timeout.
	err = s.Register("demo.slow", "*/15 * * * * *", func(ctx context.Context, run *xtimer.Run) error {
		select {
		case <-time.After(5 * time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, xtimer.WithTimeout(2*time.Second))
	if err != nil {
		return err
	}

	if err := s.Start(ctx); err != nil {
		return err
	}
	fmt.Printf("xtimer quickstart: app %s on %s, lock %s; Ctrl-C to stop\n", app, where, lockName(redisAddr))
	if consoleAddr != "off" {
		url, closeConsole, err := serveConsole(s, consoleAddr, password)
		if err != nil {
			return err
		}
		defer closeConsole()
		fmt.Printf("console: %s\n", url)
	}
	fmt.Printf("%-12s %-11s %-10s %-9s %9s %9s  %s\n", "time", "task", "status", "attempt", "lateness", "duration", "output / error")

	var printed atomic.Int64
	seen := map[int64]string{}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		page, err := s.Executions(context.Background(), xtimer.ExecutionFilter{Limit: 200})
		if err != nil {
			fmt.Fprintln(os.Stderr, "list executions:", err)
			continue
		}
		rows := page.Executions
		sort.Slice(rows, func(i, j int) bool { return rows[i].FinishedAt.Before(rows[j].FinishedAt) })
		for _, r := range rows {
			key := fmt.Sprintf("%s/%d", r.Status, r.Attempt)
			if seen[r.ID] == key || !(r.Status.Final() || r.Status == xtimer.StatusRetrying) {
				continue
			}
			seen[r.ID] = key
			printed.Add(1)
			note := r.Output
			if r.Error != "" {
				note = r.Error
			}
			fmt.Printf("%-12s %-11s %-10s %-9s %9s %9s  %s\n", r.FinishedAt.Local().Format("15:04:05.000"),
				r.Code, r.Status, fmt.Sprintf("%d/%d", r.Attempt, r.MaxAttempts),
				ms(r.Lateness), ms(r.Duration), oneLine(note))
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		return err
	}
	return summary(s, time.Now())
}

// summary counts the executions of fires up to the stop; the rows of later
// fires, recorded ahead, wait for a replica that will never come.
func summary(s *xtimer.Scheduler, stopped time.Time) error {
	counts := map[string]map[xtimer.Status]int{}
	var lateness []int64
	f := xtimer.ExecutionFilter{To: stopped, Limit: xtimer.MaxPageLimit}
	for {
		page, err := s.Executions(context.Background(), f)
		if err != nil {
			return err
		}
		for _, r := range page.Executions {
			if counts[r.Code] == nil {
				counts[r.Code] = map[xtimer.Status]int{}
			}
			counts[r.Code][r.Status]++
			if !r.StartedAt.IsZero() && r.Source == xtimer.SourceSchedule && r.Attempt == 1 {
				lateness = append(lateness, r.Lateness.Milliseconds())
			}
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	fmt.Println("\nsummary (executions by task and status):")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	statuses := []xtimer.Status{xtimer.StatusSucceeded, xtimer.StatusFailed, xtimer.StatusTimedOut, xtimer.StatusRetrying,
		xtimer.StatusSkipped, xtimer.StatusRunning, xtimer.StatusScheduled}
	fmt.Fprint(w, "task")
	for _, st := range statuses {
		fmt.Fprintf(w, "\t%s", st)
	}
	fmt.Fprintln(w)
	codes := make([]string, 0, len(counts))
	for c := range counts {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		fmt.Fprint(w, c)
		for _, st := range statuses {
			fmt.Fprintf(w, "\t%d", counts[c][st])
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	if len(lateness) > 0 {
		sort.Slice(lateness, func(i, j int) bool { return lateness[i] < lateness[j] })
		fmt.Printf("lateness of first attempts on schedule: p50 %dms, p99 %dms, max %dms over %d starts\n",
			lateness[len(lateness)/2], lateness[len(lateness)*99/100], lateness[len(lateness)-1], len(lateness))
	}
	return nil
}

// serveConsole mounts the admin console at /xtimer/ on addr and returns
// its full URL.
func serveConsole(s *xtimer.Scheduler, addr, password string) (string, func(), error) {
	opts := admin.Options{Prefix: "/xtimer/"}
	if password != "" {
		opts.Authorize = admin.BasicAuth("admin", password)
	}
	h, err := admin.New(s, opts)
	if err != nil {
		return "", nil, err
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("console on %s: %w (choose another address with -console, or -console off)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/xtimer/", h)
	mux.Handle("/", http.RedirectHandler("/xtimer/", http.StatusFound))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: admin.ReadHeaderTimeout, ReadTimeout: admin.ReadTimeout,
		WriteTimeout: admin.WriteTimeout, IdleTimeout: admin.IdleTimeout}
	go func() { _ = srv.Serve(ln) }()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/xtimer/", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

func lockName(addr string) string {
	if addr == "" {
		return "in-process"
	}
	return "redis " + addr
}

func ms(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

func oneLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
