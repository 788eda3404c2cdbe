package executor

import (
	"sync"
	"time"
)

// Pool runs functions with at most Size at once. Work beyond that waits in
// submission order (first in, first out): a burst of fires at the top of a
// minute is started in run-time order as slots free up, and the wait shows
// as lateness; nothing is dropped.
type Pool struct {
	size   int
	onDone func() // set by OnDone before the first Submit

	mu      sync.Mutex
	running int
	over    int // running functions past their deadline (Overrun): not counted against size
	queue   []func()
	idle    *sync.Cond
	// parked are the workers that ran out of work, each waiting on its
	// channel for the next function (the last parked takes the next):
	// a new goroutine for each start grew its stack anew through the
	// handler's calls, a twentieth of the CPU of starting an instant's
	// fires. At most size are kept; Close ends them.
	parked []chan func()
	closed bool
	// meanRun is a moving average of how long functions run, in real
	// time (0 before the first returns, unless seeded): MeanRun. measured
	// tells it has measured a run of its own.
	meanRun  time.Duration
	measured bool
	// The busy spell under way, if the queue is not empty: since when, and
	// how many queued functions started since; rate is a moving average
	// of the starts per second of the spells past (Rate).
	spellFrom   time.Time
	spellStarts int
	rate        float64
	now         func() time.Time // time.Now; tests replace it
}

// minSpell is the fewest starts a busy spell needs to count in Rate: a
// queue of a few says little about the pace.
const minSpell = 32

// NewPool returns a pool that runs at most size functions at once. size must
// be at least 1; the scheduler validates it before calling.
func NewPool(size int) *Pool {
	p := &Pool{size: max(size, 1), now: time.Now}
	p.idle = sync.NewCond(&p.mu)
	return p
}

// Submit runs fn on the pool, now if a slot is free, otherwise after the
// functions submitted before it. It never blocks.
func (p *Pool) Submit(fn func()) {
	p.mu.Lock()
	if p.running >= p.size+p.over {
		if len(p.queue) == 0 {
			p.spellFrom, p.spellStarts = p.now(), 0
		}
		p.queue = append(p.queue, fn)
		p.mu.Unlock()
		return
	}
	p.running++
	p.startLocked(fn)
}

// startLocked runs fn on a parked worker, or on a new one, and unlocks
// p.mu. fn is counted in running already.
func (p *Pool) startLocked(fn func()) {
	if n := len(p.parked); n > 0 {
		w := p.parked[n-1]
		p.parked[n-1] = nil
		p.parked = p.parked[:n-1]
		p.mu.Unlock()
		w <- fn // room for one: never blocks
		return
	}
	p.mu.Unlock()
	go p.work(make(chan func(), 1), fn)
}

// work runs fn, then the waiting functions while there are any, then
// parks on in until it is handed the next (Submit) or the pool closes.
func (p *Pool) work(in chan func(), fn func()) {
	for fn != nil {
		began := p.now()
		fn()
		took := p.now().Sub(began)
		p.mu.Lock()
		if !p.measured {
			p.meanRun, p.measured = max(took, 1), true
		} else {
			p.meanRun += (took - p.meanRun) / 8
		}
		park := false
		if len(p.queue) > 0 && p.running <= p.size+p.over {
			fn = p.nextLocked()
		} else {
			fn = nil
			p.running--
			if p.running == 0 {
				p.idle.Broadcast()
			}
			if park = !p.closed && len(p.parked) < p.size; park {
				p.parked = append(p.parked, in)
			}
		}
		p.mu.Unlock()
		if p.onDone != nil {
			p.onDone()
		}
		if park {
			fn = <-in // nil once closed
		}
	}
}

// Close ends the parked workers, and those that finish from now on. A
// function submitted after it still runs, on a worker of its own.
func (p *Pool) Close() {
	p.mu.Lock()
	parked := p.parked
	p.parked, p.closed = nil, true
	p.mu.Unlock()
	for _, w := range parked {
		close(w)
	}
}

// nextLocked takes the first waiting function off the queue, which is not
// empty. p.mu is held.
func (p *Pool) nextLocked() func() {
	fn := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	p.spellStarts++
	if len(p.queue) == 0 {
		p.endSpellLocked()
	}
	return fn
}

// Overrun is called from a function the pool runs that goes on past its
// deadline (Run's away): the pool no longer counts it against its size,
// and starts the next waiting function beside it. back counts it again;
// call it as the function returns. Its worker then takes no more work
// while the pool runs more than its size.
func (p *Pool) Overrun() (back func()) {
	p.mu.Lock()
	p.over++
	if len(p.queue) > 0 && p.running < p.size+p.over {
		next := p.nextLocked()
		p.running++
		p.startLocked(next)
	} else {
		p.mu.Unlock()
	}
	return func() {
		p.mu.Lock()
		p.over--
		p.mu.Unlock()
	}
}

// endSpellLocked folds the busy spell that just ended (the queue is empty)
// into rate. p.mu is held.
func (p *Pool) endSpellLocked() {
	took := p.now().Sub(p.spellFrom)
	if p.spellStarts < minSpell || took <= 0 {
		return
	}
	sample := float64(p.spellStarts) / took.Seconds()
	if p.rate == 0 {
		p.rate = sample
	} else {
		p.rate += (sample - p.rate) / 4
	}
}

// Rate is how many queued functions the pool starts per second while it
// has a queue: a moving average over its busy spells (from a function
// queued behind busy workers until the queue is empty again) of at least
// minSpell starts. It is what the workers really achieve on this machine,
// the wait for a CPU included, which a run time does not tell: on cores
// shared with a database, a quick handler's run time varies many-fold
// from one round to the next, by how long its worker waited to be
// scheduled. ok is false before the first such spell.
func (p *Pool) Rate() (perSecond float64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rate, p.rate > 0
}

// OnDone sets f to be called each time a function the pool ran returns.
// Call it before the first Submit.
func (p *Pool) OnDone(f func()) { p.onDone = f }

// Stats returns how many functions run now and how many wait. Functions
// past their deadline (Overrun) do not count as running.
func (p *Pool) Stats() (running, waiting int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running - p.over, len(p.queue)
}

// Seed sets the moving average of run times (MeanRun) to mean, until the
// first function returns; after that it does nothing. The scheduler seeds
// it with its app's recent run times, at Start and again while the pool
// has run nothing.
func (p *Pool) Seed(mean time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.measured && mean > 0 {
		p.meanRun = mean
	}
}

// Measured reports whether a function the pool ran has returned, so that
// MeanRun is its own measure and not only a seed.
func (p *Pool) Measured() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.measured
}

// MeanRun is a moving average of how long the pool's functions ran, in
// real time, over about the last eight; ok is false before the first one
// returned, unless Seed gave it a start.
func (p *Pool) MeanRun() (mean time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.meanRun, p.meanRun > 0
}

// Wait blocks until nothing runs and nothing waits.
func (p *Pool) Wait() {
	p.mu.Lock()
	for p.running > 0 {
		p.idle.Wait()
	}
	p.mu.Unlock()
}
