// Package admin is the xtimer console: server-rendered pages and a JSON API
// over a Scheduler, served by an http.Handler that a service mounts on its
// own mux.
//
//	mux.Handle("/xtimer/", admin.Handler(s, admin.Options{
//		Authorize: admin.AnyOf(admin.BasicAuth("ops", password), admin.BearerToken(token)),
//	}))
//
// Without Options.Authorize only loopback clients are served. The
// principal an authorizer returns has a Role (RoleViewer reads,
// RoleOperator also pauses, resumes, runs, retries and backfills,
// RoleAdmin also edits) and the Apps it may see; every route checks both. The pages and
// the API show tasks, their next fires, executions with their output and
// every attempt, and replicas, and let an operator pause, resume, run now,
// retry a failed execution and edit a schedule;
// every action is written to the task's history with the principal who
// made it. docs/console.md documents the API with curl.
package admin
