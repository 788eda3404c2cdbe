package localsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServerBin is the binary every Redis process here runs: data nodes,
// cluster nodes and Sentinels (redis-server ... --sentinel) alike.
const RedisServerBin = "redis-server"

// ErrNoRedisServer is returned when redis-server is not on PATH.
var ErrNoRedisServer = errors.New("redis-server is not on PATH (apt-get install redis-server)")

// redisStartTries is how many free ports a process is tried on: another
// program may take the port FreePort found before redis-server binds it.
const redisStartTries = 3

// RedisProcess is one redis-server process on a port of 127.0.0.1, with its
// files (config, log, nodes.conf) in Dir. Start may be called again after
// Kill or Stop: the process comes back on the same port with the same
// configuration, which Redis may have rewritten meanwhile (a Sentinel
// turning a master into a replica, a cluster node's nodes.conf).
type RedisProcess struct {
	Port int
	Dir  string
	// args are the command-line arguments after the binary.
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Addr is host:port.
func (p *RedisProcess) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.Port) }

// Log is the file the process writes its log to.
func (p *RedisProcess) Log() string { return filepath.Join(p.Dir, "redis.log") }

// startRedis creates dir/<name> and starts a process in it on a free port,
// trying another port if the first is taken. args gives the arguments for
// a port and the process's dir (it may write a config file there).
func startRedis(ctx context.Context, dir, name string, args func(port int, dir string) ([]string, error)) (*RedisProcess, error) {
	if _, err := exec.LookPath(RedisServerBin); err != nil {
		return nil, ErrNoRedisServer
	}
	var lastErr error
	for range redisStartTries {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		d := filepath.Join(dir, name+"-"+strconv.Itoa(port))
		if err = os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		a, err := args(port, d)
		if err != nil {
			return nil, err
		}
		p := &RedisProcess{Port: port, Dir: d, args: a}
		if lastErr = p.Start(ctx); lastErr == nil {
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, lastErr
		}
	}
	return nil, lastErr
}

// Start starts the process and waits until it answers PING.
func (p *RedisProcess) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("redis-server on %s is running already", p.Addr())
	}
	logf, err := os.OpenFile(p.Log(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	defer logf.Close()
	cmd := exec.Command(RedisServerBin, p.args...)
	cmd.Dir = p.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// The servers die with the process that started them, even on SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err = cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start redis-server on %s: %w", p.Addr(), err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()

	c := redis.NewClient(&redis.Options{Addr: p.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		// PING only once the port accepts: the client logs the dials it
		// retries.
		var conn net.Conn
		if conn, err = (&net.Dialer{}).DialContext(pctx, "tcp", p.Addr()); err == nil {
			_ = conn.Close()
			err = c.Ping(pctx).Err()
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			p.reap()
			return fmt.Errorf("redis-server on %s exited at start (see %s)", p.Addr(), p.Log())
		case <-ctx.Done():
			p.Kill()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("redis-server on %s did not answer within 10 s: %w (see %s)", p.Addr(), err, p.Log())
		}
	}
}

// reap forgets a process that exited by itself.
func (p *RedisProcess) reap() {
	p.mu.Lock()
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
}

// Running reports whether the process is up (started and not exited).
func (p *RedisProcess) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to exit: it loses what it
// had not written or replicated, as a crashed host does.
func (p *RedisProcess) Kill() { p.end(syscall.SIGKILL, 0) }

// Stop sends SIGTERM, then SIGKILL after 5 s, and waits.
func (p *RedisProcess) Stop() { p.end(syscall.SIGTERM, 5*time.Second) }

func (p *RedisProcess) end(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-done:
			return
		case <-time.After(grace):
			_ = cmd.Process.Kill()
		}
	}
	<-done
}

// client is a plain client on the process, for the helpers' own checks.
func (p *RedisProcess) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: p.Addr(), DialTimeout: time.Second, ReadTimeout: time.Second,
		WriteTimeout: time.Second, MaxRetries: -1})
}

// nodeArgs are the arguments every data node shares: no persistence (a
// restarted node is empty, as a lost cache host is) and an initial sync
// without the default 5 s wait.
func nodeArgs(port int, dir string) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
}

// poll calls check every 100 ms until it returns nil, ctx ends or limit
// passes; the error then names what was awaited and check's last error.
func poll(ctx context.Context, limit time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		err := check(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %s: %w", what, limit, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopAll stops the processes, all at once.
func stopAll(ps []*RedisProcess) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(p.Stop)
	}
	wg.Wait()
}
