// Package testsvc gives integration tests isolated handles on the real
// services xtimer runs against: Redis, MySQL/MariaDB, PostgreSQL and SQLite.
//
// Every handle is private to the test that asked for it, so tests can call
// t.Parallel freely and several packages can run their tests at once:
//
//   - MySQL and Postgres create a fresh database named xtimer_t_<random> and
//     drop it when the test ends.
//   - SQLite opens a file in t.TempDir() in WAL mode with a busy timeout.
//   - Redis returns a client of its own on the shared server. Nothing here
//     ever calls FLUSHDB or FLUSHALL; tests keep apart by putting a unique
//     namespace from App into their keys (xtimer does so with Options.App).
//
// Addresses come from environment variables; the defaults are the standard
// local ports:
//
//	XTIMER_REDIS_ADDR        Redis address        (default 127.0.0.1:6379)
//	XTIMER_MYSQL_DSN         go-sql-driver DSN    (default root@tcp(127.0.0.1:3306)/)
//	XTIMER_POSTGRES_DSN      libpq/pgx DSN        (default host=127.0.0.1 port=5432 user=postgres sslmode=disable)
//	XTIMER_REQUIRE_SERVICES  1 = a server that does not answer fails the test instead of skipping it
//	XTIMER_TEST_SQL          1 = log every SQL statement (GORM's logger is silent otherwise)
//
// The MySQL and PostgreSQL DSNs name a server, not a database: the database
// part, if any, is replaced by the per-test one. The account needs the right
// to create and drop databases.
//
// When a server does not answer, the test is skipped with a message saying
// how to start it, unless XTIMER_REQUIRE_SERVICES=1 (as .ci/run sets), in
// which case it fails. `bash .ci/run` starts all three servers and runs the
// whole suite.
//
// Tests that need a Redis topology of their own start one from the
// installed redis-server on free ports, stopped when the test ends:
// StartRedisCluster (three masters, a redis.ClusterClient) and
// StartRedisSentinel (a master, a replica and three Sentinels, a
// redis.NewFailoverClient, KillMaster and Rejoin for failovers). Without
// redis-server they skip, or fail under XTIMER_REQUIRE_SERVICES=1. The
// processes are internal/localsvc's, which the chaos harness shares.
//
// To run one test body on every SQL backend:
//
//	for _, b := range testsvc.Backends() {
//		t.Run(b.Name, func(t *testing.T) {
//			t.Parallel()
//			db := b.Open(t)
//			...
//		})
//	}
package testsvc
