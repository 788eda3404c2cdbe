// Command xtimer is the command line of the xtimer console: it lists and
// reads tasks, executions and replicas, and pauses, resumes, triggers and
// reschedules tasks, through the console's JSON API (admin.Handler, or
// xtimer-server).
//
//	xtimer tasks                          # every task, its state and next run
//	xtimer executions -task billing.reconcile -since 24h
//	xtimer executions -follow             # new executions as they happen
//	xtimer pause billing.reconcile
//	xtimer retry 1042                     # one more attempt of a failed execution
//	xtimer schedule billing.reconcile '0 30 9 * * 1-5' -zone Europe/Paris
//	xtimer preview '0 0 12 ? * 6L' -quartz -n 5
//
// Global flags, also accepted after the command: -server URL (default
// http://127.0.0.1:8080/xtimer/, or XTIMER_SERVER), -token (XTIMER_TOKEN)
// or -token-file, -o table|json, -zone (the zone times are shown in; UTC,
// the API's, by default). Exit status: 0 done, 1 the API refused or could
// not be reached (its message on stderr), 2 a usage error.
//
// Install it with go install github.com/xtimer-go/xtimer/cmd/xtimer@latest.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitAPI   = 1
	exitUsage = 2
)

// run runs one command line and returns its exit status. getenv reads the
// environment (XTIMER_SERVER, XTIMER_TOKEN).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	name, rest := args[0], args[1:]
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "xtimer: unknown command %q\n\n%s", name, usage)
		return exitUsage
	}
	c, err := newCall(name, cmd, rest, stdout, stderr, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "xtimer %s: %v\n", name, err)
		return exitUsage
	}
	if err := cmd.run(ctx, c); err != nil {
		fmt.Fprintf(stderr, "xtimer %s: %v\n", name, err)
		var usageErr usageError
		if errors.As(err, &usageErr) {
			return exitUsage
		}
		return exitAPI
	}
	return exitOK
}

const usage = `xtimer: the command line of the xtimer console

Usage: xtimer COMMAND [flags] [arguments]

Commands:
  tasks [-status active|paused] [-q TEXT]     list the tasks
  task CODE                                   one task: schedule, next runs, recent executions
  executions [-task CODE] [-status S] [-since DURATION] [-follow]
                                              list executions, newest first; -follow prints new ones as they come
  execution ID                                one execution, with its output and error
  pause CODE [-note TEXT]                     pause a task on every replica, saying why
  resume CODE [-note TEXT]                    resume a paused task; the note replaces the pause's
  trigger CODE [-params JSON] [-note TEXT]    run a task now (a manual run), with its own parameters
  retry ID                                    one more attempt of a failed or timed_out execution
  backfill CODE -from T -to T                 run the past fires of a range that never ran, oldest first
  schedule CODE SPEC [-quartz] [-zone Z]      store a schedule that wins over the code's
  preview SPEC [-n N] [-quartz] [-zone Z]     the next fires of a cron expression
  replicas                                    the replicas of the app
  health                                      the scheduler's health (exit 1 when not OK)

Flags of every command:
  -server URL     the console (default http://127.0.0.1:8080/xtimer/, or $XTIMER_SERVER)
  -token TOKEN    a bearer token (or $XTIMER_TOKEN); -token-file FILE reads it from a file
  -o table|json   output format (default table)
  -zone ZONE      the zone times are shown in (default UTC; "Local" for this machine's)

Exit status: 0 done, 1 the API refused or could not be reached, 2 a usage error.
`
