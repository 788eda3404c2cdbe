// Package backend opens the database and Redis that the examples and
// cmd/xtimer-server run on, from the same kind of flag values everywhere: a
// DSN (mysql://, postgres:// or a SQLite file path) and a Redis address.
package backend

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// ConnectTimeout bounds the first connection to a database or to Redis, so
// that a wrong host fails at start instead of hanging.
const ConnectTimeout = 5 * time.Second

// ErrBadDSN is wrapped by the errors of OpenDB about the DSN's form, as
// opposed to a database that does not answer.
var ErrBadDSN = errors.New("bad DSN")

// badDSN is an error about the form of a DSN; errors.Is(err, ErrBadDSN).
type badDSN struct{ msg string }

func (e badDSN) Error() string        { return e.msg }
func (e badDSN) Is(target error) bool { return target == ErrBadDSN }

func badDSNf(format string, args ...any) error { return badDSN{fmt.Sprintf(format, args...)} }

// OpenDB opens dsn, one of
//
//	mysql://user:pass@host:port/db[?param=value]   (MySQL or MariaDB)
//	postgres://user:pass@host:port/db?sslmode=disable   (or postgresql://)
//	path/to/file.db   (SQLite, created if missing)
//
// and checks that it answers. It also returns a description of where the
// data lives that is safe to print (the password is masked). Errors start
// with the quoted DSN, password masked, so a caller prefixes the flag name:
// fmt.Errorf("-db %w", err).
func OpenDB(dsn string) (*gorm.DB, string, error) {
	cfg := &gorm.Config{Logger: logger.Discard}
	scheme, _, isURL := strings.Cut(dsn, "://")
	if !isURL {
		if dsn == "" {
			return nil, "", badDSNf(`"": want mysql://user:pass@host:port/db, postgres://user:pass@host:port/db or the path of a SQLite file`)
		}
		db, err := gorm.Open(sqlite.Open("file:"+dsn+"?_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate"), cfg)
		if err != nil {
			return nil, "", fmt.Errorf("%q: open SQLite file: %w", dsn, err)
		}
		return db, "sqlite " + dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		// url.Parse quotes the whole input, password included: say less.
		return nil, "", badDSNf("%s: not a valid URL", redactUnparsed(dsn))
	}
	shown := fmt.Sprintf("%q", u.Redacted())
	database := strings.TrimPrefix(u.Path, "/")
	switch scheme {
	case "mysql":
		if u.Host == "" || database == "" || strings.Contains(database, "/") {
			return nil, "", badDSNf("%s: want mysql://user:pass@host:port/db (host and database name required)", shown)
		}
		my := gomysql.NewConfig()
		my.User = u.User.Username()
		my.Passwd, _ = u.User.Password()
		my.Net, my.Addr, my.DBName = "tcp", u.Host, database
		my.ParseTime = true
		my.Timeout = ConnectTimeout
		for k, v := range u.Query() {
			if my.Params == nil {
				my.Params = map[string]string{}
			}
			my.Params[k] = v[len(v)-1]
		}
		db, err := gorm.Open(mysql.Open(my.FormatDSN()), cfg)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", shown, err)
		}
		return db, "mysql " + u.Host + "/" + database, nil
	case "postgres", "postgresql":
		if u.Host == "" || database == "" {
			return nil, "", badDSNf("%s: want postgres://user:pass@host:port/db?sslmode=disable (host and database name required)", shown)
		}
		q := u.Query()
		if q.Get("connect_timeout") == "" {
			q.Set("connect_timeout", fmt.Sprint(int(ConnectTimeout/time.Second)))
			u.RawQuery = q.Encode()
		}
		db, err := gorm.Open(postgres.Open(u.String()), cfg)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", shown, err)
		}
		return db, "postgres " + u.Host + "/" + database, nil
	}
	return nil, "", badDSNf("%s: unknown scheme %q: want mysql://, postgres:// or the path of a SQLite file", shown, scheme)
}

// redactUnparsed masks what may be a password in a DSN that url.Parse
// refused: everything between "://" and the last "@".
func redactUnparsed(dsn string) string {
	scheme, rest, _ := strings.Cut(dsn, "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "xxxxx" + rest[at:]
	}
	return fmt.Sprintf("%q", scheme+"://"+rest)
}

// OpenRedis connects to addr ("" for none: it returns nil) and checks it
// answers. Errors start with the address, so a caller prefixes the flag
// name: fmt.Errorf("-redis %w", err).
func OpenRedis(ctx context.Context, addr string) (redis.UniversalClient, error) {
	if addr == "" {
		return nil, nil
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: time.Second})
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return rdb, nil
}
