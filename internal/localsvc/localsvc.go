// Package localsvc has what the harnesses that start their own servers
// share (chaos/ and bench/, which run Redis, PostgreSQL and MariaDB on free
// ports with their data in a temp dir, never the machine's services).
package localsvc

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// FreePort asks the kernel for a port nobody listens on.
func FreePort() (int, error) {
	l, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PostgresBin returns the directory of the newest PostgreSQL server
// binaries installed from Debian's packages (/usr/lib/postgresql/N/bin).
func PostgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
				return d, nil
			}
		}
	}
	return "", errors.New("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
}
