package admin

import "time"

// Timeouts of the HTTP servers this project starts (xtimer-server, the
// quickstart), and the ones a service that mounts the console on its own
// http.Server should set as well. Without them a client that sends a
// request body slowly, or keeps an idle connection open, holds a
// connection and a goroutine for as long as it likes, before any
// authorizer has seen it. The console has no streaming endpoint, so no
// request needs longer.
const (
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout = 30 * time.Second
	// WriteTimeout bounds a request from the end of its headers to the
	// end of its response.
	WriteTimeout = 60 * time.Second
	// IdleTimeout closes a keep-alive connection that sends no request.
	IdleTimeout = 2 * time.Minute
)
