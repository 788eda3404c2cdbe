package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/xtimer-go/xtimer/internal/localsvc"
)

// Every run gets its own redis-server, and its own PostgreSQL or MariaDB
// when the system needs one, on free ports with their data in the run's
// temp dir: the machine's shared services (6379, 5432, 3306) are never
// touched, and no run sees the keys or rows of another. The database
// clusters are initialised once per coordinator into a template and
// copied for each run (cp -a takes milliseconds, initdb seconds).
//
// Each server is a direct child with Pdeathsig, so a coordinator that dies
// takes its servers with it.

// server is one service process of a run.
type server struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	stop syscall.Signal // the signal of a clean, quick shutdown
}

func startServer(name, logPath string, stop syscall.Signal, cred *syscall.Credential, bin string, args ...string) (*server, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, done: make(chan struct{}), stop: stop}
	go func() { _ = cmd.Wait(); close(s.done) }()
	return s, nil
}

// kill stops the server (its clean signal, SIGKILL after 10 s).
func (s *server) kill() { s.killWithin(10 * time.Second) }

// killWithin stops the server with its clean signal, SIGKILL after d.
func (s *server) killWithin(d time.Duration) {
	if s == nil || s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(s.stop)
	select {
	case <-s.done:
	case <-time.After(d):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// waitUp polls ping until it answers, the server exits or 60 s pass.
func waitUp(s *server, logPath string, ping func(context.Context) error) error {
	deadline := time.Now().Add(60 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if s.exited() {
			return fmt.Errorf("%s exited at start: %s", s.name, tail(logPath, 600))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = ping(ctx)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer in 60 s: %w (%s)", s.name, err, tail(logPath, 600))
}

// tail is the end of a log file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// services are the servers of one run.
type services struct {
	dir      string
	pgStats  bool // write PostgreSQL's costliest statements at close
	redis    *server
	redisAdr string
	pg       *server
	pgURL    string
	my       *server
	myDSN    string
}

func (s *services) env() (redisAddr, pgURL, myDSN string) { return s.redisAdr, s.pgURL, s.myDSN }

// database returns the kind (openSQL's) and address of the run's
// database, or two empty strings for a run without one.
func (s *services) database() (kind, dsn string) {
	switch {
	case s.pgURL != "":
		return "postgres", s.pgURL
	case s.myDSN != "":
		return "mysql", s.myDSN
	}
	return "", ""
}

// close stops every server; the caller removes dir. With
// XTIMER_BENCH_PGSTATS=1 it first writes PostgreSQL's costliest
// statements into dir (writePGStats).
func (s *services) close() {
	if s.pgStats && s.pg != nil && !s.pg.exited() {
		if err := writePGStats(s.pgURL, filepath.Join(s.dir, pgStatsFile)); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", pgStatsEnv, err)
		}
	}
	s.redis.kill()
	s.pg.kill()
	s.my.kill()
}

// pgStatsEnv names the environment variable that, set to 1, loads
// pg_stat_statements into each run's PostgreSQL and has the run write its
// costliest statements into its directory as it ends (pgStatsFile, kept
// with -keep). For tracing: the module's bookkeeping costs the server a
// little on every statement.
const pgStatsEnv = "XTIMER_BENCH_PGSTATS"

// pgStatsFile is the file of a run's directory that writePGStats writes.
const pgStatsFile = "pg_stat_statements.tsv"

// pgStatsRows is how many statements writePGStats writes.
const pgStatsRows = 30

// pgStats reports whether XTIMER_BENCH_PGSTATS asks for the statements'
// figures: 1 does, unset or empty does not, anything else is an error.
// The coordinator reads it once, before any run (templates.pgStats).
func pgStats() (bool, error) {
	switch v := os.Getenv(pgStatsEnv); v {
	case "":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want 1, or unset", pgStatsEnv, v)
	}
}

// writePGStats writes the pgStatsRows statements of the server at url
// with the most time inside it, as tab-separated columns under a header:
// calls, total milliseconds, rows, shared blocks hit and read, the
// statement on one line.
func writePGStats(url, path string) error {
	db, err := openSQL("postgres", url)
	if err != nil {
		return err
	}
	defer closeSQL(db)
	type stat struct {
		Calls, TotalMs, Rows, Hit, Read int64
		Query                           string
	}
	var stats []stat
	err = db.Raw(`SELECT calls, round(total_exec_time)::bigint AS total_ms, rows, shared_blks_hit AS hit, shared_blks_read AS read,
		regexp_replace(query, '\s+', ' ', 'g') AS query FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT ?`, pgStatsRows).Scan(&stats).Error
	if err != nil {
		return fmt.Errorf("read pg_stat_statements: %w", err)
	}
	var b strings.Builder
	b.WriteString("calls\ttotal_ms\trows\tshared_hit\tshared_read\tquery\n")
	for _, st := range stats {
		fmt.Fprintf(&b, "%d\t%d\t%d\t%d\t%d\t%s\n", st.Calls, st.TotalMs, st.Rows, st.Hit, st.Read, st.Query)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644) //nolint:gosec // G306: a report beside the run's logs
}

// templates are the database clusters initialised once per coordinator,
// empty or seeded with a history (history.go).
type templates struct {
	root   string // the coordinator's temp dir
	pgBin  string
	pgData string // "" until initialised
	pgCred *syscall.Credential
	myData string
	// pgStats loads pg_stat_statements into every PostgreSQL started
	// (pgStats()).
	pgStats bool
	// seeded are the clusters seeded with a history, by backend and rows.
	seeded map[seedKey]*seededCluster
}

// postgresCred is the postgres user when we are root (PostgreSQL refuses
// to run as root), nil otherwise.
func postgresCred() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func chownTo(cred *syscall.Credential, paths ...string) error {
	if cred == nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	return nil
}

func (t *templates) postgres() error {
	if t.pgData != "" {
		return nil
	}
	bin, err := localsvc.PostgresBin()
	if err != nil {
		return err
	}
	cred, err := postgresCred()
	if err != nil {
		return err
	}
	dir := filepath.Join(t.root, "pg-template")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := chownTo(cred, dir); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-sync", "--no-instructions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	t.pgBin, t.pgCred, t.pgData = bin, cred, filepath.Join(dir, "data")
	return nil
}

func (t *templates) mariadb() error {
	if t.myData != "" {
		return nil
	}
	dir := filepath.Join(t.root, "my-template")
	cmd := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+dir, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	t.myData = dir
	return nil
}

// copyDir copies a server's data dir and flushes it to disk before the
// server starts on it. Left in the page cache, a large copy (the 10M-row
// history's cluster) is written back by the kernel later, inside the
// measured window, and every commit's flush waits behind it: a stall of
// the harness's own making, which no user's database has (bench/README.md,
// "The history's tail was the harness's own copy").
func copyDir(from, to string) error {
	if err := roomToCopy(from, to); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %w\n%s", from, to, err, out)
	}
	syscall.Sync()
	return nil
}

// copyRoom is the free space a copy must leave on the filesystem it lands
// on.
const copyRoom = 2 << 30

// roomToCopy refuses to copy from into to (a path not made yet) when the
// copy would leave less than copyRoom free there. A full disk stops the
// run's databases and its replicas' invocation files mid-run, and every
// other process of the machine with them; with -keep every run's copy
// stays, and a 10M-row history's cluster is several GB.
func roomToCopy(from, to string) error {
	need, err := dirSize(from)
	if err != nil {
		return err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(to), &st); err != nil {
		return fmt.Errorf("free space of %s: %w", filepath.Dir(to), err)
	}
	return checkRoom(from, filepath.Dir(to), need, int64(st.Bavail)*st.Bsize) //nolint:gosec // G115: a filesystem's free blocks fit an int64
}

// checkRoom is roomToCopy's verdict on a copy of need bytes from from into
// dir, with free bytes free there.
func checkRoom(from, dir string, need, free int64) error {
	if free-need >= copyRoom {
		return nil
	}
	return fmt.Errorf("disk: copying %s (%s MiB) into %s would leave %s MiB free, under the %s MiB a run keeps free (runs kept by -keep hold their database copies: remove them)",
		from, num(need>>20), dir, num((free-need)>>20), num(copyRoom>>20))
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dir, err)
	}
	return n, nil
}

// startServices starts redis-server and, when asked, PostgreSQL and
// MariaDB for one run, in dir, at the databases' default durability;
// durabilityOff (-durability-off) makes the trade described below instead.
// history > 0 starts the databases from a cluster whose executions table
// holds that many seeded rows (history.go), seeded once per coordinator.
func startServices(t *templates, dir string, needPG, needMy, durabilityOff bool, history int64) (_ *services, err error) {
	s := &services{dir: dir, pgStats: needPG && t.pgStats}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	port, err := localsvc.FreePort()
	if err != nil {
		return nil, err
	}
	rdir := filepath.Join(dir, "redis")
	if err = os.Mkdir(rdir, 0o755); err != nil {
		return nil, err
	}
	rlog := filepath.Join(dir, "redis.log")
	s.redis, err = startServer("redis-server", rlog, syscall.SIGTERM, nil, "redis-server", "--port", strconv.Itoa(port),
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", rdir, "--daemonize", "no")
	if err != nil {
		return nil, err
	}
	s.redisAdr = "127.0.0.1:" + strconv.Itoa(port)
	c := redis.NewClient(&redis.Options{Addr: s.redisAdr})
	err = waitUp(s.redis, rlog, func(ctx context.Context) error { return c.Ping(ctx).Err() })
	_ = c.Close()
	if err != nil {
		return nil, err
	}

	if needPG {
		from, err := t.postgresData(history)
		if err != nil {
			return nil, err
		}
		if s.pg, s.pgURL, err = startPostgres(t, dir, from, durabilityOff); err != nil {
			return nil, err
		}
	}
	if needMy {
		from, err := t.mariadbData(history)
		if err != nil {
			return nil, err
		}
		if s.my, s.myDSN, err = startMariaDB(dir, from, durabilityOff); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// startPostgres copies the cluster from into dir/pg/data and starts
// PostgreSQL on it.
func startPostgres(t *templates, dir, from string, durabilityOff bool) (*server, string, error) {
	pdir := filepath.Join(dir, "pg")
	if err := os.Mkdir(pdir, 0o700); err != nil {
		return nil, "", err
	}
	if err := chownTo(t.pgCred, pdir); err != nil {
		return nil, "", err
	}
	if err := copyDir(from, filepath.Join(pdir, "data")); err != nil {
		return nil, "", err
	}
	port, err := localsvc.FreePort()
	if err != nil {
		return nil, "", err
	}
	plog := filepath.Join(dir, "postgres.log")
	// -durability-off turns fsync, synchronous_commit and full_page_writes
	// off: the data is thrown away after the run, and every system on
	// PostgreSQL gets the same settings.
	args := []string{"-D", filepath.Join(pdir, "data"), "-p", strconv.Itoa(port), "-k", pdir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=256MB"}
	if durabilityOff {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	if t.pgStats {
		args = append(args, "-c", "shared_preload_libraries=pg_stat_statements")
	}
	srv, err := startServer("postgres", plog, syscall.SIGINT, t.pgCred, filepath.Join(t.pgBin, "postgres"), args...)
	if err != nil {
		return nil, "", err
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err = waitUp(srv, plog, func(ctx context.Context) error { return pingSQL(ctx, "postgres", url) }); err != nil {
		srv.kill()
		return nil, "", err
	}
	if t.pgStats {
		if err = createPGStats(url); err != nil {
			srv.kill()
			return nil, "", fmt.Errorf("%s: %w", pgStatsEnv, err)
		}
	}
	return srv, url, nil
}

// startMariaDB copies the data dir from into dir/mariadb and starts
// MariaDB on it, with a database bench.
func startMariaDB(dir, from string, durabilityOff bool) (*server, string, error) {
	mdir := filepath.Join(dir, "mariadb")
	if err := copyDir(from, mdir); err != nil {
		return nil, "", err
	}
	port, err := localsvc.FreePort()
	if err != nil {
		return nil, "", err
	}
	mlog := filepath.Join(dir, "mariadb.log")
	// -durability-off makes the same trade as PostgreSQL's: the redo log
	// is written at commit but not flushed, no doublewrite. No binlog
	// either way (MariaDB's default).
	args := []string{"--no-defaults",
		"--datadir=" + mdir, "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(dir, "mariadb.sock"), "--pid-file=" + filepath.Join(dir, "mariadb.pid"),
		"--user=root", "--skip-log-bin", "--innodb-buffer-pool-size=256M", "--max-connections=500"}
	if durabilityOff {
		args = append(args, "--innodb-flush-log-at-trx-commit=2", "--innodb-doublewrite=0")
	}
	srv, err := startServer("mariadbd", mlog, syscall.SIGTERM, nil, "mariadbd", args...)
	if err != nil {
		return nil, "", err
	}
	root := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
	if err = waitUp(srv, mlog, func(ctx context.Context) error { return pingSQL(ctx, "mysql", root) }); err != nil {
		srv.kill()
		return nil, "", err
	}
	db, err := openSQL("mysql", root)
	if err != nil {
		srv.kill()
		return nil, "", err
	}
	// A seeded data dir has it already.
	err = db.Exec("CREATE DATABASE IF NOT EXISTS bench").Error
	closeSQL(db)
	if err != nil {
		srv.kill()
		return nil, "", fmt.Errorf("create database bench: %w", err)
	}
	return srv, fmt.Sprintf("root@tcp(127.0.0.1:%d)/bench?parseTime=true&loc=UTC", port), nil
}

// openSQL opens a GORM connection for the coordinator's own queries.
func openSQL(kind, dsn string) (*gorm.DB, error) {
	cfg := &gorm.Config{Logger: logger.Discard}
	if kind == "postgres" {
		return gorm.Open(postgres.Open(dsn), cfg)
	}
	return gorm.Open(mysql.Open(dsn), cfg)
}

// createPGStats creates the pg_stat_statements extension in the server
// at url, whose statements it then counts from zero: a cluster copied
// from one seeded with the module loaded (history.go) brings the
// seeding's statements along, which the module saved at its shutdown.
func createPGStats(url string) error {
	db, err := openSQL("postgres", url)
	if err != nil {
		return err
	}
	defer closeSQL(db)
	if err = db.Exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").Error; err != nil {
		return err
	}
	return db.Exec("SELECT pg_stat_statements_reset()").Error
}

func closeSQL(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

func pingSQL(ctx context.Context, kind, dsn string) error {
	db, err := openSQL(kind, dsn)
	if err != nil {
		return err
	}
	defer closeSQL(db)
	return db.WithContext(ctx).Exec("SELECT 1").Error
}
