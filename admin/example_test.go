package admin_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/admin"
)

func ExampleHandler() {
	s, stop := exampleScheduler("handler")
	defer stop()
	mux := http.NewServeMux()
	// No authorizer: loopback clients only, as a console on a developer's
	// machine. Anything else needs Options.Authorize.
	mux.Handle("/xtimer/", admin.Handler(s, admin.Options{}))
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	defer srv.Close()

	fmt.Println(status(srv.URL+"/xtimer/api/tasks", ""))
	// Output:
	// 200
}

func ExampleBasicAuth() {
	s, stop := exampleScheduler("basic")
	defer stop()
	mux := http.NewServeMux()
	mux.Handle("/xtimer/", admin.Handler(s, admin.Options{Authorize: admin.BasicAuth("ops", "correct horse battery")}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	fmt.Println(status(srv.URL+"/xtimer/api/tasks", ""))
	fmt.Println(status(strings.Replace(srv.URL, "http://", "http://ops:correct%20horse%20battery@", 1)+"/xtimer/api/tasks", ""))
	// Output:
	// 401
	// 200
}

func ExampleBearerToken() {
	s, stop := exampleScheduler("bearer")
	defer stop()
	const token = "a-token-of-at-least-16-bytes"
	mux := http.NewServeMux()
	mux.Handle("/xtimer/", admin.Handler(s, admin.Options{Authorize: admin.BearerToken(token)}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	fmt.Println(status(srv.URL+"/xtimer/api/tasks", "Bearer wrong-token-wrong-token"))
	fmt.Println(status(srv.URL+"/xtimer/api/tasks", "Bearer "+token))
	// Output:
	// 401
	// 200
}

func ExampleAnyOf() {
	s, stop := exampleScheduler("anyof")
	defer stop()
	const token = "a-token-for-the-ci-scripts"
	mux := http.NewServeMux()
	// People sign in with basic auth, scripts send a bearer token.
	mux.Handle("/xtimer/", admin.Handler(s, admin.Options{
		Authorize: admin.AnyOf(admin.BasicAuth("ops", "correct horse battery"), admin.BearerToken(token)),
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	fmt.Println(status(srv.URL+"/xtimer/api/tasks", "Bearer "+token))
	fmt.Println(status(strings.Replace(srv.URL, "http://", "http://ops:correct%20horse%20battery@", 1)+"/xtimer/api/tasks", ""))
	fmt.Println(status(srv.URL+"/xtimer/api/tasks", ""))
	// Output:
	// 200
	// 200
	// 401
}

func ExampleAuthorizer() {
	s, stop := exampleScheduler("authorizer")
	defer stop()
	// Your own authorizer: here, the identity your gateway put in a header
	// it sets (and strips from what clients send).
	fromGateway := admin.Authorizer(func(r *http.Request) (admin.Principal, error) {
		switch user := r.Header.Get("X-Gateway-User"); user {
		case "":
			return admin.Principal{}, fmt.Errorf("%w: no gateway identity", admin.ErrUnauthenticated)
		case "alice", "bob":
			return admin.Principal{Name: user}, nil
		default:
			return admin.Principal{}, fmt.Errorf("%w: %s is not on the operations team", admin.ErrForbidden, user)
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/xtimer/", admin.Handler(s, admin.Options{Authorize: fromGateway, ReadOnly: true}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, user := range []string{"", "mallory", "alice"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/xtimer/api/tasks", nil)
		req.Header.Set("X-Gateway-User", user)
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%q: %d\n", user, resp.StatusCode)
	}
	// Output:
	// "": 401
	// "mallory": 403
	// "alice": 200
}

func ExampleNew() {
	s, stop := exampleScheduler("new")
	defer stop()
	// New returns the error that Handler would panic with.
	_, err := admin.New(s, admin.Options{Prefix: "xtimer"})
	fmt.Println(err)
	// Output:
	// xtimer/admin: Options.Prefix "xtimer": want a path that starts and ends with /, such as "/xtimer/"
}

// status is the HTTP status of a GET of url, with an Authorization
// header when auth is not "".
func status(url, auth string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		log.Fatal(err)
	}
	req.Close = true // no idle connection outlives the example
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// exampleScheduler starts a scheduler with one task on a SQLite database
// in a temporary file, and returns it and the function that stops it.
func exampleScheduler(name string) (*xtimer.Scheduler, func()) {
	dir, err := os.MkdirTemp("", "xtimer-admin-example-"+name)
	if err != nil {
		log.Fatal(err)
	}
	dsn := "file:" + filepath.Join(dir, "xtimer.db") + "?_journal_mode=WAL&_busy_timeout=10000&_txlock=immediate"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	s, err := xtimer.New(xtimer.Options{DB: db, App: "example"})
	if err != nil {
		log.Fatal(err)
	}
	err = s.Register("example.report", "0 0 2 * * *", func(ctx context.Context, run *xtimer.Run) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	return s, func() {
		_ = s.Stop(ctx)
		if sqlDB, dbErr := db.DB(); dbErr == nil {
			_ = sqlDB.Close()
		}
		_ = os.RemoveAll(dir)
	}
}
