package engine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
)

// statusWriter is the status writer: it batches the writes of attempts'
// starts, results and skipped fires off the hot path. Nothing is dropped:
// a failed write is retried until Stop's context ends. It owns its queue
// (mu) and runs one loop of its own.
type statusWriter struct {
	startstop.Base
	store   statusStore
	replica string
	log     *slog.Logger
	metrics *metrics
	alerts  *alerter
	noteDB  func(error) // the database's health (health.go)

	now      func() time.Time
	flushing sync.Mutex // one flush at a time, so writes land in the order queued
	mu       sync.Mutex
	starts   []store.Start
	finishes []store.Finish
	skips    []skipUpdate
	// startRoom and finishRoom are the room take gives the next round's
	// queues (queueRoom).
	startRoom, finishRoom int
	// written are the starts and results written in the last
	// replayWindow, oldest first; replays, those queued to be written
	// again (replayLost).
	written     []written
	writtenText int // bytes of output and error in written
	replays     []written
	kick        startstop.Kick
}

// written is a start or a result the database acknowledged, and when.
type written struct {
	start  *store.Start
	finish *store.Finish
	at     time.Time
}

// A failover to an asynchronous standby can lose the last commits the
// old primary acknowledged: a result written there is gone, and its row
// says running on the new primary while no replica runs it (a start
// gone leaves it claimed, and rescued later as if its replica were
// lost). The status writer keeps the writes of the last replayWindow
// (at most replayMax of them, and replayMaxText bytes of their outputs
// and errors: a handler's output may be large) and, when the database
// answers again after it did not, writes them again (replayLost).
// MarkRunning and FinishAttempts are conditional on the row's state, so
// a write the database kept is not applied twice.
const (
	replayWindow  = 10 * time.Second
	replayMax     = 50_000
	replayMaxText = 32 << 20
)

// statusStore is what the status writer needs of the store.
type statusStore interface {
	MarkRunning(ctx context.Context, starts []store.Start) ([]bool, error)
	FinishAttempts(ctx context.Context, finishes []store.Finish) ([]bool, error)
	SkipFire(ctx context.Context, id int64, replica, reason string, atMs int64) (bool, error)
}

type skipUpdate struct {
	row    store.Execution
	reason string
	at     time.Time
}

func newStatusWriter(s *Engine) *statusWriter {
	return &statusWriter{store: s.store, replica: s.opts.InstanceID, log: s.log, metrics: s.metrics, alerts: s.alerts,
		noteDB: s.noteDB, now: s.clock.Now, kick: startstop.NewKick()}
}

func (q *statusWriter) started(r store.Execution, at time.Time) {
	q.mu.Lock()
	q.starts = append(q.starts, store.Start{ID: r.ID, Replica: q.replica, StartedMs: at.UnixMilli()})
	q.mu.Unlock()
	q.poke()
}

func (q *statusWriter) finished(f store.Finish) {
	q.mu.Lock()
	q.finishes = append(q.finishes, f)
	q.mu.Unlock()
	q.poke()
}

func (q *statusWriter) skip(r store.Execution, reason string, at time.Time) {
	q.log.Info("fire skipped", "task", r.TaskCode, "execution", r.ID, "run_time", time.UnixMilli(r.RunTime).UTC(), "reason", reason)
	q.metrics.fireEnded(r.TaskCode, store.StatusSkipped)
	q.alerts.skipped(r, reason, at)
	q.mu.Lock()
	q.skips = append(q.skips, skipUpdate{r, reason, at})
	q.mu.Unlock()
	q.poke()
}

func (q *statusWriter) poke() { q.kick.Poke() }

// replayLost queues the writes of the last replayWindow to be written
// again: the database answers again after it did not, and may be a
// standby promoted without them.
func (q *statusWriter) replayLost() {
	q.mu.Lock()
	q.replays = append(q.replays, q.written...)
	q.written, q.writtenText = nil, 0
	n := len(q.replays)
	q.mu.Unlock()
	if n > 0 {
		q.poke()
	}
}

// wrote keeps the writes the database acknowledged (oks), for replayLost.
func (q *statusWriter) wrote(starts []store.Start, startOKs []bool, finishes []store.Finish, finishOKs []bool) {
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	keep := func(w written) {
		q.written = append(q.written, w)
		q.writtenText += w.text()
	}
	for i, ok := range startOKs {
		if ok {
			keep(written{start: &starts[i], at: now})
		}
	}
	for i, ok := range finishOKs {
		if ok {
			keep(written{finish: &finishes[i], at: now})
		}
	}
	drop := 0
	for drop < len(q.written) && (len(q.written)-drop > replayMax || q.writtenText > replayMaxText ||
		now.Sub(q.written[drop].at) > replayWindow) {
		q.writtenText -= q.written[drop].text()
		drop++
	}
	if drop > 0 {
		q.written = slices.Delete(q.written, 0, drop)
	}
}

// text is how many bytes of output and error w holds.
func (w written) text() int {
	var r *store.Result
	switch {
	case w.finish != nil:
		r = &w.finish.Result
	case w.start.Finish != nil:
		r = w.start.Finish
	default:
		return 0
	}
	return len(r.Output) + len(r.Error)
}

// replay writes again what replayLost queued, starts before results:
// what the database had lost is written now; what it kept is not
// written twice, as both writes are conditional on the row's state.
func (q *statusWriter) replay(ctx context.Context) error {
	q.mu.Lock()
	replays := q.replays
	q.replays = nil
	q.mu.Unlock()
	var starts []store.Start
	var finishes []store.Finish
	for _, w := range replays {
		if w.start != nil {
			starts = append(starts, *w.start)
		} else {
			finishes = append(finishes, *w.finish)
		}
	}
	var ids []int64
	landed := func(oks []bool, id func(i int) int64) {
		for i, ok := range oks {
			if ok {
				ids = append(ids, id(i))
			}
		}
	}
	var err error
	if len(starts) > 0 {
		var oks []bool
		if oks, err = q.store.MarkRunning(ctx, starts); err == nil {
			landed(oks, func(i int) int64 { return starts[i].ID })
		}
	}
	if err == nil && len(finishes) > 0 {
		var oks []bool
		if oks, err = q.store.FinishAttempts(ctx, finishes); err == nil {
			landed(oks, func(i int) int64 { return finishes[i].ID })
		}
	}
	if err != nil { // all again: what landed is not written twice
		q.mu.Lock()
		q.replays = append(replays, q.replays...)
		q.mu.Unlock()
		return err
	}
	if len(ids) > 0 {
		q.log.Warn("writes the database had lost written again: it acknowledged them, then lost them (a failover to a standby that had not received them)",
			"writes", len(ids), "executions", ids[:min(len(ids), 10)])
	}
	return nil
}

// pending reports whether writes are queued or being written.
func (q *statusWriter) pending() bool {
	q.mu.Lock()
	queued := len(q.starts)+len(q.finishes)+len(q.skips)+len(q.replays) > 0
	q.mu.Unlock()
	if queued {
		return true
	}
	if !q.flushing.TryLock() {
		return true
	}
	q.flushing.Unlock()
	return false
}

func (q *statusWriter) start() error {
	return q.Base.Start(context.Background(), startstop.Loop{Run: q.loop})
}

// Writes of the queue: at most one every updateEvery, and the first
// updateGather after the first item queued.
const (
	updateEvery  = 50 * time.Millisecond
	updateGather = 20 * time.Millisecond
)

// loop writes what is queued, at most every updateEvery, so a burst of
// fires becomes a few transactions instead of one write each. It waits
// updateGather after the first start of a round before writing: the fires
// of one instant start together, and a write as soon as the first of them
// had started took its CPU while the others were starting (and wrote the
// others' starts and results later, two writes where one does).
//
// Its pauses are real time (startstop.Pause): batching is for the
// database's sake. What is queued when it stops is written by stop.
func (q *statusWriter) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.kick:
		}
		if !startstop.Pause(ctx, updateGather) {
			return
		}
		if err := q.flush(context.WithoutCancel(ctx)); err != nil {
			q.noteDB(err)
			if !startstop.Pause(ctx, time.Second) {
				return
			}
			q.poke()
			continue
		}
		if !startstop.Pause(ctx, updateEvery-updateGather) {
			return
		}
	}
}

// take empties the queues and returns what they held. The new queues
// have room for what the last rounds took (queueRoom), so that the next
// instant's fires append their starts and results without growing them:
// grown from nil, they were copied to twice their size again and again
// while the fires started, which is when a replica should allocate least
// (see dispatch's claim ahead). Their arrays cannot be reused: written
// points into them.
func (q *statusWriter) take() (starts []store.Start, finishes []store.Finish, skips []skipUpdate) {
	q.mu.Lock()
	defer q.mu.Unlock()
	starts, finishes, skips = q.starts, q.finishes, q.skips
	q.startRoom, q.finishRoom = queueRoom(q.startRoom, len(starts)), queueRoom(q.finishRoom, len(finishes))
	q.starts, starts = emptied(starts, q.startRoom)
	q.finishes, finishes = emptied(finishes, q.finishRoom)
	q.skips = nil
	return starts, finishes, skips
}

// emptied returns an empty queue with room for room items to follow
// taken, a queue just taken, and what was taken: taken's own array, and
// nil taken, when it held nothing (nothing in it is written) and has the
// room, so that a round that took none of a queue's items allocates
// nothing for it; else a new array, and taken as it was.
func emptied[T any](taken []T, room int) (queue, took []T) {
	if len(taken) == 0 && cap(taken) >= room {
		return taken[:0:room], nil
	}
	return make([]T, 0, room), taken
}

// queueRoom is the room of a status queue after a round that took n of
// its items, room the room before: the most of the last rounds, an
// eighth less each round that took less (an instant's starts and its
// results may come in two rounds), within maxQueueRoom.
func queueRoom(room, n int) int {
	return min(max(n, room-room/8), maxQueueRoom)
}

// maxQueueRoom bounds the room queueRoom keeps: a burst of more fires
// grows the queues as it goes, and a round after it allocates no more
// than this.
const maxQueueRoom = 4096

// flush writes what is queued: starts (with the result when the attempt
// already ended), then other results, then skipped fires.
func (q *statusWriter) flush(ctx context.Context) error {
	q.flushing.Lock()
	defer q.flushing.Unlock()
	starts, finishes, skips := q.take()
	requeue := func(i, j, k int) {
		q.mu.Lock()
		q.starts = append(starts[i:], q.starts...)
		q.finishes = append(finishes[j:], q.finishes...)
		q.skips = append(skips[k:], q.skips...)
		q.mu.Unlock()
	}
	// A first attempt that started and ended since the last round is one write.
	// The start points at the result in finishes' array, which is not
	// written to again: the results left go to a new one.
	if len(starts) > 0 && len(finishes) > 0 {
		ended := make(map[int64]int, len(finishes))
		for j, f := range finishes {
			if f.Attempt == 1 {
				ended[f.ID] = j
			}
		}
		merged := make([]bool, len(finishes))
		n := 0
		for i := range starts {
			if j, ok := ended[starts[i].ID]; ok && starts[i].Finish == nil {
				starts[i].Finish = &finishes[j].Result
				merged[j] = true
				n++
			}
		}
		if n > 0 {
			rest := make([]store.Finish, 0, len(finishes)-n)
			for j, f := range finishes {
				if !merged[j] {
					rest = append(rest, f)
				}
			}
			finishes = rest
		}
	}
	if len(starts) > 0 {
		oks, err := q.store.MarkRunning(ctx, starts)
		if err != nil {
			requeue(0, 0, 0)
			return err
		}
		for i, ok := range oks {
			if !ok {
				q.log.Error("a started fire's row changed under it", "execution", starts[i].ID)
			}
		}
		q.wrote(starts, oks, nil, nil)
	}
	if len(finishes) > 0 {
		oks, err := q.store.FinishAttempts(ctx, finishes)
		if err != nil {
			requeue(len(starts), 0, 0)
			return err
		}
		for i, ok := range oks {
			if !ok {
				q.log.Warn("attempt result not recorded: the execution was settled elsewhere (timed out or rescued)",
					"execution", finishes[i].ID, "attempt", finishes[i].Attempt)
			}
		}
		q.wrote(nil, nil, finishes, oks)
	}
	for k, sk := range skips {
		if _, err := q.store.SkipFire(ctx, sk.row.ID, q.replica, sk.reason, sk.at.UnixMilli()); err != nil {
			requeue(len(starts), len(finishes), k)
			return err
		}
	}
	return q.replay(ctx)
}

// stop writes what is left, retrying until ctx ends.
func (q *statusWriter) stop(ctx context.Context) error {
	q.Base.Stop()
	if err := startstop.Drain(ctx, stopRetryEvery, q.flush); err != nil {
		q.mu.Lock()
		n := len(q.starts) + len(q.finishes) + len(q.skips) + len(q.replays)
		q.mu.Unlock()
		return fmt.Errorf("xtimer: stop: %d status updates not written: %w", n, err)
	}
	return nil
}

// stopRetryEvery paces the retries of the last writes at Stop.
const stopRetryEvery = 200 * time.Millisecond
