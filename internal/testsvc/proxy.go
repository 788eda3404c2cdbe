package testsvc

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Proxy is a TCP proxy in front of a service that a test can cut: the
// link of one replica to its database, say, while the others keep theirs.
// It accepts on a free port of 127.0.0.1, dials the upstream for each
// connection and copies both ways. Cut closes every connection and
// refuses new ones (they are accepted and closed at once, as a reset link
// looks to a client); Restore lets them through again. It closes when the
// test ends.
type Proxy struct {
	upstream string
	ln       net.Listener
	wg       sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
}

// NewProxy starts a Proxy to upstream (host:port).
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsvc: proxy to %s: listen: %v", upstream, err)
	}
	p := &Proxy{upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection through the proxy and refuses new ones
// until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Restore lets connections through again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve links one client connection to a new upstream connection until
// either side ends or Cut closes them.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		_ = client.Close()
		return
	}
	up, err := new(net.Dialer).DialContext(context.Background(), "tcp", p.upstream)
	if err != nil || !p.track(up) {
		_ = client.Close()
		if up != nil {
			_ = up.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(up, client)
	go pipe(client, up)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, up)
	p.mu.Unlock()
}

// track adds c to the connections Cut closes, unless the proxy is cut or
// closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// PostgresVia returns a pool on the database of db (one made by Postgres)
// whose connections go through proxy, a Proxy to the PostgreSQL server:
// a replica whose database link the test cuts. It is closed when the test
// ends.
func PostgresVia(t testing.TB, db *gorm.DB, proxy *Proxy) *gorm.DB {
	t.Helper()
	if db.Dialector.Name() != "postgres" {
		t.Fatalf("testsvc: PostgresVia works on postgres, not %s", db.Dialector.Name())
	}
	cfg, err := pgx.ParseConfig(env("XTIMER_POSTGRES_DSN", DefaultPostgresDSN))
	if err != nil {
		t.Fatalf("testsvc: XTIMER_POSTGRES_DSN: %v", err)
	}
	cfg.Database = db.Migrator().CurrentDatabase()
	host, port, err := net.SplitHostPort(proxy.Addr())
	if err != nil {
		t.Fatalf("testsvc: proxy address %q: %v", proxy.Addr(), err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatalf("testsvc: proxy port %q: %v", port, err)
	}
	cfg.Host, cfg.Port, cfg.Fallbacks = host, uint16(p), nil
	via, err := gorm.Open(postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cfg)}), gormConfig())
	if err != nil {
		t.Fatalf("testsvc: open PostgreSQL through %s: %v", proxy.Addr(), err)
	}
	limitPool(via)
	t.Cleanup(func() { closeDB(via) })
	return via
}

// PostgresAddr is the host:port of the PostgreSQL server the tests use
// (XTIMER_POSTGRES_DSN), for a Proxy to put in front of it.
func PostgresAddr(t testing.TB) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(env("XTIMER_POSTGRES_DSN", DefaultPostgresDSN))
	if err != nil {
		t.Fatalf("testsvc: XTIMER_POSTGRES_DSN: %v", err)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}
