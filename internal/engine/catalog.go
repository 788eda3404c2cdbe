package engine

import (
	"context"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file is the writer of a deferred registration's rows
// (store.BeginRegistration; docs/architecture.md, "Deferred
// registration"): a replica whose Start found an app without tasks runs
// from its registrations at once, and writes their rows here, in the
// background, in chunks.

// DefaultDeferFrom is Config.DeferFrom's default: a first start that
// registers fewer tasks writes their rows before Start returns.
const DefaultDeferFrom = 10_000

// deferredChunk is how many rows one transaction of the writer inserts.
const deferredChunk = 10_000

// deferredWrite is a deferred registration whose rows this replica
// writes: what store.BeginRegistration returned, and the registrations
// it was given, in that order.
type deferredWrite struct {
	reg  store.Registration
	regs []*registration
}

// catalogWriter writes the rows of a deferred registration. It runs
// once, from Start, when registerAll deferred the write; done is closed
// when the rows are written (by this replica or others) and the view
// knows it, or the writer stopped.
type catalogWriter struct {
	startstop.Base
	store   *store.Store
	view    *view
	app     string
	replica string
	log     *slog.Logger
	chunk   int // rows a transaction writes: deferredChunk, smaller in tests
	done    chan struct{}
}

func newCatalogWriter(s *Engine) *catalogWriter {
	return &catalogWriter{store: s.store, view: &s.view, app: s.opts.App, replica: s.opts.InstanceID, log: s.log,
		chunk: deferredChunk, done: make(chan struct{})}
}

// start writes w's rows in the background; with w nil (nothing deferred)
// it only closes done.
func (c *catalogWriter) start(w *deferredWrite) error {
	if w == nil {
		close(c.done)
		return nil
	}
	return c.Start(context.Background(), startstop.Loop{Run: func(ctx context.Context) {
		defer close(c.done)
		c.run(ctx, w)
	}})
}

// The chunks of a deferred registration are runs of its tasks in the
// order of their codes, the same on every replica of the registration
// whatever order it registered them in; k of chunks is
// sorted[k*n/chunks : (k+1)*n/chunks]. In code order, a chunk's rows lie
// together in the table as in its (app, code) index, as a first start's
// rows always have: the rows' heads are read back at the next restart
// (loadTasks) without a random read per row.
func compareRegs(a, b *registration) int { return strings.Compare(a.code, b.code) }

// hashOf is FNV-1a of s, where a replica starts writing the chunks.
func hashOf(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

// run writes the chunks of w that no replica has written (compareRegs
// makes them), starting at one that depends on the replica, so that the
// replicas of a fleet starting together each begin on rows the others
// are not writing; the app's row marks each chunk written
// (store.WriteDeferred), and the replica that writes the last one marks
// the registration finished. A replica killed mid-write leaves its
// chunks to the others, or to the next replica that joins. After each
// chunk it wrote, the writer waits as long as the chunk took, so that
// the fires' own writes find the database free half the time.
//
// If a registration of other tasks superseded this one meanwhile, the
// rows may hold other definitions, or miss some: the replica registers
// its tasks the ordinary way (store.RegisterTasks), which writes what
// differs, as a replica starting later would, and reads the rows back
// (view.rereadRegistered). So it does too when the finished rows do not
// sum up as its view (TaskSums): a row that was there before its chunk
// (an HTTP task an operator created with one of the codes) is kept as it
// is, and the view must have it as it is.
func (c *catalogWriter) run(ctx context.Context, w *deferredWrite) {
	began := time.Now()
	n := len(w.regs)
	chunks := min(max((n+c.chunk-1)/c.chunk, 1), store.MaxDeferredChunks)
	sorted := w.regs
	if !slices.IsSortedFunc(sorted, compareRegs) {
		sorted = slices.Clone(sorted)
		slices.SortFunc(sorted, compareRegs)
	}
	first := int(hashOf(c.replica) % uint32(chunks)) //nolint:gosec // G115: chunks is 1 to store.MaxDeferredChunks
	state, wrote := store.DeferredPending, 0
	var defs []store.TaskDef
	for state == store.DeferredPending {
		for i := 0; i < chunks && state == store.DeferredPending; i++ {
			k := (first + i) % chunks
			var marks string
			if !c.retry(ctx, "read progress", func(ctx context.Context) (err error) {
				state, marks, err = c.store.DeferredProgress(ctx, c.app, w.reg)
				return err
			}) {
				return
			}
			if state != store.DeferredPending || len(marks) == chunks && marks[k] == '1' {
				continue
			}
			defs = defs[:0]
			for _, r := range sorted[k*n/chunks : (k+1)*n/chunks] {
				defs = append(defs, store.TaskDef{Code: r.code, Name: r.name(), Def: r.opts.Def})
			}
			t0, did := time.Now(), false
			if !c.retry(ctx, "write", func(ctx context.Context) (err error) {
				state, did, err = c.store.WriteDeferred(ctx, c.app, w.reg, k, chunks, defs)
				return err
			}) {
				return
			}
			if did {
				wrote++
				if !startstop.Pause(ctx, time.Since(t0)) {
					return
				}
			}
		}
	}
	reread := state == store.DeferredSuperseded
	if reread {
		c.log.Warn("other tasks were registered while this replica's task rows were written; recording them again", "tasks", n)
		all := make([]store.TaskDef, n)
		for i, r := range w.regs {
			all[i] = store.TaskDef{Code: r.code, Name: r.name(), Def: r.opts.Def}
		}
		if !c.retry(ctx, "register", func(ctx context.Context) error {
			_, err := c.store.RegisterTasks(ctx, c.app, all)
			return err
		}) {
			return
		}
	} else if !c.retry(ctx, "check", func(ctx context.Context) error {
		sums, err := c.store.TaskSums(ctx, c.app)
		c.view.mu.Lock()
		reread = err == nil && sums != store.TaskSums(c.view.viewSums)
		c.view.mu.Unlock()
		return err
	}) {
		return
	}
	if reread && !c.retry(ctx, "read back", func(ctx context.Context) error { return c.view.rereadRegistered(ctx) }) {
		return
	}
	c.view.mu.Lock()
	c.view.deferred = false
	c.view.mu.Unlock()
	c.log.Info("task rows written", "tasks", n, "chunks", chunks, "written_here", wrote, "read_back", reread,
		"took", time.Since(began).Round(time.Millisecond))
}

// retry runs fn until it succeeds (true) or ctx ends (false), waiting
// longer after each failure, up to 5 s: the rows wait for a database
// that is away, as the fires do.
func (c *catalogWriter) retry(ctx context.Context, what string, fn func(context.Context) error) bool {
	wait := 100 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.log.Warn("the deferred task rows wait for the database", "step", what, "err", err, "retry_in", wait)
		if !startstop.Pause(ctx, wait) {
			return false
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// adoptRegistered fills the view, at Start, with the tasks of w as its
// rows will hold them once written: version 1, created at
// w.reg.CreatedMs (which every replica of the registration has from the
// app's row, so that they agree on the fires the tasks have), active,
// with no override. It sets v.deferred, which the writer clears.
func (v *view) adoptRegistered(w *deferredWrite) {
	v.mu.Lock()
	v.deferred = true
	fresh := v.viewSums.Count == 0
	if fresh {
		v.sizeViewLocked(len(w.regs))
	}
	v.mu.Unlock()
	v.adoptAsWritten(w.regs, w.reg.CreatedMs)
}

// adoptAsWritten puts the tasks of regs in the view as a deferred
// registration writes their rows at createdMs (store.WriteDeferred):
// version 1, created and updated at createdMs, active, with no override.
func (v *view) adoptAsWritten(regs []*registration, createdMs int64) {
	now := v.clock.Now()
	for from := 0; from < len(regs); from += loadBatch {
		batch := regs[from:min(from+loadBatch, len(regs))]
		slab := make([]taskState, len(batch)) // one allocation per batch, not per task
		v.mu.Lock()
		for i, r := range batch {
			h := store.TaskHead{Code: r.code, Kind: store.KindFunc, Status: store.TaskActive, Version: 1,
				CreatedMs: createdMs, UpdatedMs: createdMs}
			t := &slab[i]
			*t = v.stateOf(h, &r.opts.base)
			t.excl = v.calendars.exclusionLocked(r.opts.Def)
			if r.state == nil {
				r.state = t
				v.placeLocked(t, nil)
				v.slots.reopenSlots(t, now)
			} else if old, rescheduled := v.adoptLocked(t, now); old != nil {
				v.logAdopted(old, t, rescheduled)
			}
		}
		v.mu.Unlock()
	}
}

// rereadRegistered adopts the rows of the tasks registered here that
// differ from the view's states (version, creation, status, overrides):
// after a deferred registration was superseded (catalogWriter.run), the
// rows another registration wrote.
func (v *view) rereadRegistered(ctx context.Context) error {
	type head struct {
		store.TaskHead
		reg *registration // nil: not registered here
	}
	heads := make([]head, 0, loadBatch)
	var stale []string
	check := func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		for i := range heads {
			h, r := &heads[i].TaskHead, heads[i].reg
			if r == nil {
				continue // the tick's sync adopts the others
			}
			t := r.state
			if t == nil || h.Kind != store.KindFunc || h.Version != t.version || h.CreatedMs != t.createdMs || h.Status != t.statusText() ||
				h.SpecOverride != nil || h.DialectOverride != nil || h.TZOverride != nil || h.OptionOverrides != "" {
				stale = append(stale, h.Code)
			}
		}
		heads = heads[:0]
	}
	var reg *registration
	intern := v.interner(&reg)
	err := v.store.TaskHeads(ctx, v.app, intern, func(h store.TaskHead) error {
		if heads = append(heads, head{h, reg}); len(heads) == loadBatch {
			check()
		}
		return nil
	})
	if err != nil {
		return err
	}
	check()
	rows, err := v.store.TasksByCode(ctx, v.app, stale)
	if err != nil {
		return err
	}
	for _, r := range rows {
		v.adoptTask(r)
	}
	return nil
}
