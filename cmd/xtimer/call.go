package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultServer is the console a quickstart or an xtimer-server on this
// machine serves.
const DefaultServer = "http://127.0.0.1:8080/xtimer/"

// requestTimeout bounds one API request.
const requestTimeout = 30 * time.Second

// usageError is a mistake on the command line: exit status 2.
type usageError string

func (e usageError) Error() string { return string(e) }

// command is one subcommand: its own flags, how many arguments it takes
// (names, for the usage line), and what it does.
type command struct {
	args  []string // the names of its positional arguments
	flags func(fs *flag.FlagSet, c *call)
	run   func(ctx context.Context, c *call) error
}

// call is one command line, parsed: the global flags, the command's own,
// its arguments, and where it writes.
type call struct {
	server    *url.URL
	token     string
	output    string // table or json
	zone      *time.Location
	zoneName  string // -zone as given ("" when not)
	args      []string
	stdout    io.Writer
	stderr    io.Writer
	client    *http.Client
	cmdFlags  map[string]any
	pollEvery time.Duration // -follow's period
}

// newCall parses a command's arguments: the global flags and the
// command's own, in any order, around its positional arguments.
func newCall(name string, cmd command, args []string, stdout, stderr io.Writer, getenv func(string) string) (*call, error) {
	c := &call{stdout: stdout, stderr: stderr, cmdFlags: map[string]any{}, pollEvery: 2 * time.Second,
		client: &http.Client{Timeout: requestTimeout}}
	fs := flag.NewFlagSet("xtimer "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	server := fs.String("server", cmp.Or(getenv("XTIMER_SERVER"), DefaultServer), "the console's URL")
	token := fs.String("token", getenv("XTIMER_TOKEN"), "a bearer token")
	tokenFile := fs.String("token-file", "", "a file holding the bearer token")
	fs.StringVar(&c.output, "o", "table", "output: table or json")
	fs.StringVar(&c.zoneName, "zone", "", "the zone times are shown in")
	if cmd.flags != nil {
		cmd.flags(fs, c)
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != len(cmd.args) {
		return nil, fmt.Errorf("want %d argument(s) (%s), got %d: %q", len(cmd.args), strings.Join(cmd.args, " "), len(pos), pos)
	}
	c.args = pos
	switch c.output {
	case "table", "json":
	default:
		return nil, fmt.Errorf("-o %q: want table or json", c.output)
	}
	c.zone = time.UTC
	if c.zoneName != "" {
		if c.zone, err = time.LoadLocation(c.zoneName); err != nil {
			return nil, fmt.Errorf("-zone %q: not a time zone this machine knows (want an IANA name such as Europe/Paris, UTC or Local)", c.zoneName)
		}
	}
	if *tokenFile != "" {
		b, readErr := os.ReadFile(*tokenFile) //nolint:gosec // G703: the user names their own token file
		if readErr != nil {
			return nil, fmt.Errorf("-token-file %q: %w", *tokenFile, readErr)
		}
		*token = strings.TrimSpace(string(b))
	}
	c.token = *token
	u, err := url.Parse(*server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-server %q: want the console's absolute http or https URL, such as %s", *server, DefaultServer)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	c.server = u
	return c, nil
}

// parseInterleaved parses flags that come before, between and after the
// positional arguments, and returns those. After "--" everything is an
// argument.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		n := len(args)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := n - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// envelope is the API's one success shape, and its error shape.
type envelope struct {
	Data  json.RawMessage `json:"data"`
	Next  string          `json:"next"`
	Error *apiError       `json:"error"`
}

// apiError is the API's error body.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
	Value   string `json:"value"`
	status  int
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (HTTP %d, %s)", e.Message, e.status, e.Code)
}

// get reads path (relative to the API, "tasks") with the query q into
// out, and returns the next page's cursor.
func (c *call) get(ctx context.Context, path string, q url.Values, out any) (next string, err error) {
	return c.do(ctx, http.MethodGet, path, q, nil, out)
}

// send makes a state-changing request with a JSON body.
func (c *call) send(ctx context.Context, method, path string, body, out any) error {
	if body == nil {
		body = struct{}{}
	}
	_, err := c.do(ctx, method, path, nil, body, out)
	return err
}

func (c *call) do(ctx context.Context, method, path string, q url.Values, body, out any) (string, error) {
	u := c.server.JoinPath("api", path)
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return "", err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd) //nolint:gosec // G704: the user names the console (-server)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req) //nolint:gosec // G704: the user names the console (-server)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", fmt.Errorf("%s %s: reading the answer: %w", method, u.Redacted(), err)
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return "", fmt.Errorf("%s %s: HTTP %d, not the console's JSON API (is -server the console's URL, such as %s?): %.200s",
			method, u.Redacted(), resp.StatusCode, DefaultServer, strings.TrimSpace(string(raw)))
	}
	if env.Error != nil {
		env.Error.status = resp.StatusCode
		return "", env.Error
	}
	if out != nil && len(env.Data) > 0 {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return "", fmt.Errorf("%s %s: unexpected answer: %w", method, u.Redacted(), err)
		}
	}
	if resp.StatusCode >= 300 {
		// The health check answers 503 with its usual body, read above.
		return "", &statusError{status: resp.StatusCode, what: method + " " + u.Redacted()}
	}
	return env.Next, nil
}

// statusError is an answer with a failure status and no error body.
type statusError struct {
	status int
	what   string
}

func (e *statusError) Error() string { return fmt.Sprintf("%s: HTTP %d", e.what, e.status) }

// hasStatus tells whether err is an answer of the given HTTP status.
func hasStatus(err error, status int) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == status
}
