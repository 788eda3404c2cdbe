package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is pause on failure (the root's WithPauseOnFailure, the row's
// pause_after): a task whose last n scheduled fires ended failed or
// timed_out is paused, fleet-wide, with a note, and EventTaskPaused is
// raised.
//
// The streak is read from the rows, never counted in memory, so it holds
// whichever replicas ran the fires: each replica that settles a fire
// failed after its last attempt (settle, or rescueLost for a lost
// replica's run) queues a check of the task here; the check first writes
// what the status writer holds (so the row it just settled is final in
// the database), then reads the task's last n final fires
// (store.FailureStreak) and, when all n failed, pauses the task in one
// conditional update on the version it read (store.PauseFailing). Of two
// replicas settling the last failures at once, the one that reads last
// sees both; of two that both see the streak, one update wins, and only
// its replica raises the alert.

// pauser checks the failure streaks of tasks with pause on failure and
// pauses them. It owns its queue of tasks to check (mu) and runs one loop.
type pauser struct {
	startstop.Base

	// What it is wired to (newPauser), fixed after.
	app    string
	store  pauseStore
	view   *view
	flush  func(context.Context) error // the status writer's
	alerts *alerter
	clock  Clock
	log    *slog.Logger
	noteDB func(error)

	mu  sync.Mutex
	due []string // task codes to check, oldest first, each once
	// busy: a check is under way; backoff: the last one failed and the
	// loop waits before trying again (pending ignores the queue then).
	busy, backoff bool
	kick          startstop.Kick
}

// pauseStore is what the pauser needs of the store.
type pauseStore interface {
	FailureStreak(ctx context.Context, app, code string, n int) (store.Streak, error)
	PauseFailing(ctx context.Context, app, code string, version int64, note string) (store.Task, bool, error)
}

func newPauser(s *Engine) *pauser {
	return &pauser{app: s.opts.App, store: s.store, view: &s.view, flush: s.updates.flush, alerts: s.alerts,
		clock: s.clock, log: s.log, noteDB: s.noteDB, kick: startstop.NewKick()}
}

// countsToward reports whether a settled fire can extend a failure
// streak: a fire of the schedule (on time or caught up) that ended failed
// or timed_out after its last attempt, not stopped by the next fire.
func countsToward(r store.Execution, f store.Finish) bool {
	return (f.Status == store.StatusFailed || f.Status == store.StatusTimedOut) && f.Reason != store.ReasonCancelled &&
		(r.Source == store.SourceSchedule || r.Source == store.SourceCatchup)
}

// failed queues a check of r's task when r's result f can complete its
// failure streak. The caller has queued f on the status writer, or
// written it.
func (p *pauser) failed(r store.Execution, f store.Finish) {
	if !countsToward(r, f) || p.pauseAfter(r.TaskCode) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, code := range p.due {
		if code == r.TaskCode {
			return
		}
	}
	p.due = append(p.due, r.TaskCode)
	p.kick.Poke()
}

// pauseAfter is the task's pause_after as this replica's view has it; 0
// for none (or a task it does not know).
func (p *pauser) pauseAfter(code string) int {
	p.view.mu.Lock()
	defer p.view.mu.Unlock()
	if t := p.view.taskLocked(code); t != nil {
		return t.def().PauseAfter
	}
	return 0
}

// pending reports whether a check is queued or under way: a test moving
// a fake clock waits for it to be false (Engine.WakePending).
func (p *pauser) pending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy || len(p.due) > 0 && !p.backoff
}

func (p *pauser) start() error {
	return p.Base.Start(context.Background(), startstop.Loop{Run: p.loop})
}

// loop runs the checks as they are queued; after a database error it
// waits a second (real time, as the status writer does) and tries again.
func (p *pauser) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		if err := p.drain(context.WithoutCancel(ctx)); err != nil {
			p.noteDB(err)
			p.mu.Lock()
			p.backoff = true
			p.mu.Unlock()
			ok := startstop.Pause(ctx, time.Second)
			p.mu.Lock()
			p.backoff = false
			p.mu.Unlock()
			if !ok {
				return
			}
			p.kick.Poke()
		}
	}
}

// drain checks every queued task, stopping at the first error (the task
// stays queued).
func (p *pauser) drain(ctx context.Context) error {
	for {
		p.mu.Lock()
		if len(p.due) == 0 {
			p.mu.Unlock()
			return nil
		}
		code := p.due[0]
		p.due, p.busy = p.due[1:], true
		p.mu.Unlock()
		err := p.check(ctx, code)
		p.mu.Lock()
		p.busy = false
		if err != nil {
			p.due = append([]string{code}, p.due...)
		}
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// stop ends the loop and runs the checks still queued, until ctx ends.
func (p *pauser) stop(ctx context.Context) error {
	p.Base.Stop()
	if err := startstop.Drain(ctx, stopRetryEvery, p.drain); err != nil {
		return fmt.Errorf("xtimer: stop: pause on failure not checked: %w", err)
	}
	return nil
}

// check pauses a task whose last pause_after fires failed.
func (p *pauser) check(ctx context.Context, code string) error {
	n := p.pauseAfter(code)
	if n == 0 {
		return nil
	}
	if err := p.flush(ctx); err != nil {
		return err
	}
	st, err := p.store.FailureStreak(ctx, p.app, code, n)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted meanwhile
		}
		return err
	}
	if !st.Active || st.Failures < n {
		return nil
	}
	note := pauseNote(n, st.Last.Error)
	row, paused, err := p.store.PauseFailing(ctx, p.app, code, st.Version, note)
	if err != nil || !paused {
		return err // another replica paused it, or it changed since the read
	}
	p.view.adoptTask(row)
	p.log.Warn("task paused after consecutive failures", "task", code, "failures", n, "execution", st.Last.ID,
		"run_time", time.UnixMilli(st.Last.RunTime).UTC())
	p.alerts.raise(Event{Kind: EventTaskPaused, Task: code, At: p.clock.Now(), ExecutionID: st.Last.ID,
		ScheduledAt: time.UnixMilli(st.Last.RunTime).UTC(), Error: st.Last.Error, Missed: n,
		Message: fmt.Sprintf("task %s %s", code, note)}, code, strconv.FormatInt(row.Version, 10))
	return nil
}

// pauseErrorMax is how much of the last error a pause note quotes.
const pauseErrorMax = 512

// pauseNote is the note of a pause on failure: "paused after 3
// consecutive failures; last: <the error, cut short>", storable as it is
// (store.MaxPauseNote, valid UTF-8, no NUL).
func pauseNote(n int, lastErr string) string {
	lastErr = strings.ReplaceAll(strings.ToValidUTF8(lastErr, "\uFFFD"), "\x00", "")
	if len(lastErr) > pauseErrorMax {
		cut := pauseErrorMax
		for cut > 0 && !utf8.RuneStart(lastErr[cut]) {
			cut--
		}
		lastErr = lastErr[:cut] + "…"
	}
	what := "failures"
	if n == 1 {
		what = "failure"
	}
	return fmt.Sprintf("paused after %d consecutive %s; last: %s", n, what, lastErr)
}
