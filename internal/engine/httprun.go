package engine

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xtimer-go/xtimer/executor"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file runs the attempts of HTTP callback tasks (httptask.go). Every
// replica can run them: the handler is the built-in caller, so wherever
// the engine asks whether this replica can run a task (runsHereLocked), an
// HTTP task says yes. Requests go through two queues, both first in, first
// out, so that nothing is dropped and the wait shows as lateness: one per
// task, holding what exceeds the task's MaxConcurrent, then the replica's
// HTTP pool of Options.HTTPWorkers, apart from the pool of Go handlers.

func (v *view) runsHere(code string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.runsHereLocked(code)
}

// maxClaimCodes bounds the task codes ClaimFires sends in one query.
const maxClaimCodes = 1000

// claimCodes names the tasks this replica can run, for ClaimFires, in as
// few codes as it takes: the shorter of the list of those it runs and the
// list of the stored tasks it does not run (none, usually: every replica
// of a service registers the same handlers, and then no code is sent),
// if it holds at most maxClaimCodes, otherwise maxClaimCodes of those it
// runs, the next ones at each call. It is recomputed only when the
// handlers or the tasks changed (s.view.codesGen), since the tasks can be
// a million.
func (v *view) claimCodes() store.CodeSet {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.claimSet.gen != v.codesGen || !v.claimSet.valid {
		// The list of codes this replica runs is built only when it is
		// sent: with a million handlers and no other task, sorting them
		// each time a task came or went spent CPU on a list never sent.
		var others []string
		runs := v.handlers.len()
		for c, t := range v.others { // registered tasks are never HTTP tasks
			if t.httpSpec() != nil {
				runs++
			} else {
				others = append(others, c)
			}
		}
		v.claimSet = claimSet{gen: v.codesGen, valid: true, others: others}
		if runs <= len(others) && runs <= maxClaimCodes || len(others) > maxClaimCodes {
			v.claimSet.runs = v.runCodesLocked()
		}
	}
	cs := &v.claimSet
	switch {
	case cs.runs != nil && len(cs.runs) <= maxClaimCodes:
		return store.CodeSet{Codes: slices.Clip(cs.runs)}
	case len(cs.others) <= maxClaimCodes:
		return store.CodeSet{Codes: slices.Clip(cs.others), Except: true}
	}
	if cs.next >= len(cs.runs) {
		cs.next = 0
	}
	in := cs.runs[cs.next:min(cs.next+maxClaimCodes, len(cs.runs))]
	cs.next += len(in)
	return store.CodeSet{Codes: slices.Clip(in)}
}

// runCodesLocked lists, sorted, the codes of the tasks this replica runs:
// its handlers and the HTTP tasks. v.mu is held.
func (v *view) runCodesLocked() []string {
	runs := make([]string, 0, v.handlers.len())
	for r := range v.handlers.all() {
		runs = append(runs, r.code)
	}
	for c, t := range v.others {
		if t.httpSpec() != nil {
			runs = append(runs, c)
		}
	}
	slices.Sort(runs)
	return runs
}

// claimSet caches claimCodes's lists, for the handlers and tasks of
// codesGen.
type claimSet struct {
	gen   int
	valid bool
	// runs is nil when others, the shorter, is what is sent.
	runs, others []string
	next         int // where the next rotating chunk of runs starts
}

// httpQueues holds, per task, the requests beyond its MaxConcurrent.
type httpQueues struct {
	mu    sync.Mutex
	tasks map[string]*httpQueue
}

type httpQueue struct {
	running int
	limit   int
	waiting []func()
}

// submitHTTP runs fn on the HTTP pool once fewer than limit requests of
// the task run on this replica, after the ones submitted before it.
func (s *Engine) submitHTTP(code string, limit int, fn func()) {
	qs := &s.httpQueues
	qs.mu.Lock()
	if qs.tasks == nil {
		qs.tasks = map[string]*httpQueue{}
	}
	q := qs.tasks[code]
	if q == nil {
		q = &httpQueue{}
		qs.tasks[code] = q
	}
	q.limit = max(limit, 1) // an update applies to what waits too
	q.waiting = append(q.waiting, fn)
	ready := s.takeReadyLocked(code, q)
	qs.mu.Unlock()
	for _, f := range ready {
		s.httpPool.Submit(f)
	}
}

// takeReadyLocked removes from q what may start now, wrapped to start the
// next one when it ends. httpQueues.mu is held.
func (s *Engine) takeReadyLocked(code string, q *httpQueue) []func() {
	var ready []func()
	for q.running < q.limit && len(q.waiting) > 0 {
		fn := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		q.running++
		ready = append(ready, func() {
			defer s.doneHTTP(code)
			fn()
		})
	}
	return ready
}

func (s *Engine) doneHTTP(code string) {
	qs := &s.httpQueues
	qs.mu.Lock()
	q := qs.tasks[code]
	q.running--
	ready := s.takeReadyLocked(code, q)
	if q.running == 0 && len(q.waiting) == 0 {
		delete(qs.tasks, code)
	}
	qs.mu.Unlock()
	for _, f := range ready {
		s.httpPool.Submit(f)
	}
}

// httpAttempt is the work of one attempt of an HTTP task: the request its
// stored target describes, with the fire's X-Xtimer-* headers, signed with
// the target's secret or Options.HTTPSigningSecret. The response lands in
// run's output: a first line ("HTTP 200 OK in 12 ms", or the error) and
// the body, capped at MaxOutput; its status in *status.
//
// The target's secrets are decrypted here, for this request only
// (secrets.go). When they do not decrypt on this replica, the attempt
// sends nothing: it fails with a *secretError, which settle records
// without a retry (ReasonSecretUndecryptable) and the alerter reports as
// EventSecretUndecryptable.
func (s *Engine) httpAttempt(stored *HTTPSpec, r store.Execution, out *Output, status *atomic.Int64) func(context.Context) error {
	sp, err := s.secrets.openSecrets(r.TaskCode, stored)
	if err != nil {
		return func(context.Context) error {
			out.Printf("refused, nothing sent: %v", err)
			return err
		}
	}
	headers := make([][2]string, len(sp.Headers))
	for i, h := range sp.Headers {
		headers[i] = [2]string{h.Name, h.Value}
	}
	call := executor.HTTPCall{
		Method: sp.Method, URL: sp.URL, Headers: headers, Body: sp.Body,
		Secret: sp.Secret, ID: RunID(s.opts.App, r),
		Execution: r.ID, Task: r.TaskCode, ScheduledAt: time.UnixMilli(r.RunTime), Attempt: r.Attempt, Shard: r.Shard, Shards: r.Shards,
		SuccessCodes: sp.SuccessCodes,
	}
	if r.Params != "" {
		// A manual run's override (TriggerWith) replaces the body: an HTTP
		// task's parameters are its body.
		call.Body = string(r.Params)
	}
	if call.Secret == "" {
		call.Secret = s.opts.HTTPSigningSecret
	}
	return func(ctx context.Context) error {
		resp, err := s.caller.Do(ctx, call)
		status.Store(int64(resp.Status))
		if resp.Status == 0 {
			out.Printf("%v", err)
			return err
		}
		out.Printf("HTTP %d %s in %d ms", resp.Status, http.StatusText(resp.Status), resp.Elapsed.Milliseconds())
		_, _ = out.Write([]byte(resp.Body))
		if resp.Truncated {
			out.Truncate()
		}
		return err
	}
}

// attemptWork returns how this replica runs one attempt of r's task t
// (nil if deleted) with cfg its registration here (nil without one), and
// on which queue: the registered handler on the pool of Go handlers, or the
// HTTP caller behind the task's queue on the HTTP pool; an error when it
// cannot (the task was deleted in between). pool is the pool it runs on,
// which an attempt past its timeout leaves (Pool.Overrun).
func (s *Engine) attemptWork(r store.Execution, t *taskState, cfg *registration, a *Attempt, status *atomic.Int64) (work func(context.Context) error, submit func(func()), pool *executor.Pool, timeout time.Duration) {
	if t != nil {
		timeout = time.Duration(t.def().TimeoutMs) * time.Millisecond
	}
	code := r.TaskCode // the closures capture it, not r: no heap copy of the row
	switch {
	case cfg != nil:
		return func(ctx context.Context) error { return s.opts.Invoke(ctx, cfg.handler, a) }, s.pool.Submit, s.pool, timeout
	case t != nil && t.httpSpec() != nil:
		spec := t.httpSpec()
		return s.httpAttempt(spec, r, a.Out, status), func(fn func()) { s.submitHTTP(code, spec.MaxConcurrent, fn) }, s.httpPool, timeout
	}
	return func(context.Context) error {
		return fmt.Errorf("xtimer: task %q deleted before its attempt started", code)
	}, s.pool.Submit, s.pool, 0
}
