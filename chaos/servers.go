package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The harness runs its own Redis and PostgreSQL, on free ports, with their
// data in its temp dir: faults are injected by stopping and starting these
// processes, so they must never be the machine's shared services.

// redisServer is a redis-server process without persistence: stopping it
// loses every key, as a restarted cache node does.
type redisServer struct {
	port int
	dir  string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *redisServer) start() error {
	logf, err := os.OpenFile(r.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err = cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(r.done)
	c := redis.NewClient(&redis.Options{Addr: r.addr(), DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer: %w (see %s)", r.addr(), err, r.log)
}

// stop ends the server (SIGTERM, SIGKILL after 5 s) and waits for it.
func (r *redisServer) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
}

// postgresServer is a PostgreSQL cluster initialised in the temp dir. As
// root, initdb and the server run as the postgres user (initdb refuses
// root), through runuser.
type postgresServer struct {
	bin  string // /usr/lib/postgresql/N/bin
	dir  string // owned by the server's user: data/, sock/, server.log
	port int
	// settings are more server options ("-c name=value ..."), after the
	// harness's own: a later -c wins. Empty for the single server.
	settings string
}

func (p *postgresServer) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// asServerUser runs a PostgreSQL binary, as the postgres user when we are
// root.
func (p *postgresServer) asServerUser(name string, args ...string) *exec.Cmd {
	bin := filepath.Join(p.bin, name)
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	}
	return exec.Command(bin, args...)
}

func (p *postgresServer) run(name string, args ...string) error {
	cmd := p.asServerUser(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func (p *postgresServer) init() error {
	if err := p.makeDirs(); err != nil {
		return err
	}
	return p.run("initdb", "-D", filepath.Join(p.dir, "data"), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-sync", "--no-instructions")
}

// makeDirs creates the server's dir and socket dir, owned by the postgres
// user when we are root.
func (p *postgresServer) makeDirs() error {
	for _, d := range []string{p.dir, filepath.Join(p.dir, "sock")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			u, err := user.Lookup("postgres")
			if err != nil {
				return fmt.Errorf("running as root needs a postgres user for initdb: %w", err)
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			if err := os.Chown(d, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *postgresServer) start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=300 -c fsync=off "+
		"-c synchronous_commit=off -c full_page_writes=off", p.port, filepath.Join(p.dir, "sock"))
	if p.settings != "" {
		opts += " " + p.settings
	}
	return p.run("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-l", filepath.Join(p.dir, "server.log"),
		"-w", "-t", "60", "-o", opts, "start")
}

// stop shuts the server down; mode fast disconnects every client at once
// (immediate, for cleanup, skips the shutdown checkpoint).
func (p *postgresServer) stop(mode string) error {
	return p.run("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", mode, "-w", "-t", "60", "stop")
}

// A primary and its streaming standby (the pg_failover fault,
// pgfailover.go): the standby is a copy of the primary's data taken with
// pg_basebackup -R, which also writes the standby.signal file and the
// primary_conninfo the standby streams from.

// basebackup fills p's data dir with a copy of primary's, streaming the
// WAL written during the copy, and configures p as its standby.
func (p *postgresServer) basebackup(primary *postgresServer) error {
	if err := p.makeDirs(); err != nil {
		return err
	}
	return p.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", filepath.Join(p.dir, "data"), "-R", "-X", "stream", "-c", "fast", "--no-sync")
}

// allowReplication makes sure the primary's pg_hba.conf lets a standby on
// 127.0.0.1 connect for replication without a password (initdb -A trust
// writes such a line already; it is checked, not assumed). It takes
// effect at the next start.
func (p *postgresServer) allowReplication() error {
	hba := filepath.Join(p.dir, "data", "pg_hba.conf")
	data, err := os.ReadFile(hba)
	if err != nil {
		return err
	}
	want := []string{"host", "replication", "all", "127.0.0.1/32", "trust"}
	for _, l := range strings.Split(string(data), "\n") {
		if slices.Equal(strings.Fields(l), want) {
			return nil
		}
	}
	f, err := os.OpenFile(hba, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, strings.Join(want, "\t"))
	return errors.Join(err, f.Close())
}

// promote ends the standby's recovery and waits until it accepts writes.
func (p *postgresServer) promote() error {
	return p.run("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-w", "-t", "60", "promote")
}

// killGroup SIGKILLs the postmaster and every backend: pg_ctl starts the
// postmaster in a session of its own, so its process group is the
// server's. Nothing is flushed or shut down, as when the machine dies
// (the operating system's page cache survives, which a power loss would
// not: with fsync=off that is the harness's one concession). It waits
// until the group is gone.
func (p *postgresServer) killGroup() error {
	data, err := os.ReadFile(filepath.Join(p.dir, "data", "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("read postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 1 {
		return fmt.Errorf("postmaster.pid: bad pid %q", first)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill process group %d: %w", pid, err)
	}
	for range 100 {
		if !groupAlive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("process group %d still alive 5 s after SIGKILL", pid)
}
