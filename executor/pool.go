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
	queue   []func()
	idle    *sync.Cond
	// meanRun is a moving average of how long functions run, in real
	// time (0 before the first returns): MeanRun.
	meanRun time.Duration
}

// NewPool returns a pool that runs at most size functions at once. size must
// be at least 1; the scheduler validates it before calling.
func NewPool(size int) *Pool {
	p := &Pool{size: max(size, 1)}
	p.idle = sync.NewCond(&p.mu)
	return p
}

// Submit runs fn on the pool, now if a slot is free, otherwise after the
// functions submitted before it. It never blocks.
func (p *Pool) Submit(fn func()) {
	p.mu.Lock()
	if p.running >= p.size {
		p.queue = append(p.queue, fn)
		p.mu.Unlock()
		return
	}
	p.running++
	p.mu.Unlock()
	go p.work(fn)
}

func (p *Pool) work(fn func()) {
	for fn != nil {
		began := time.Now()
		fn()
		took := time.Since(began)
		p.mu.Lock()
		if p.meanRun == 0 {
			p.meanRun = max(took, 1)
		} else {
			p.meanRun += (took - p.meanRun) / 8
		}
		if len(p.queue) > 0 {
			fn = p.queue[0]
			p.queue[0] = nil
			p.queue = p.queue[1:]
		} else {
			fn = nil
			p.running--
			if p.running == 0 {
				p.idle.Broadcast()
			}
		}
		p.mu.Unlock()
		if p.onDone != nil {
			p.onDone()
		}
	}
}

// OnDone sets f to be called each time a function the pool ran returns.
// Call it before the first Submit.
func (p *Pool) OnDone(f func()) { p.onDone = f }

// Stats returns how many functions run now and how many wait.
func (p *Pool) Stats() (running, waiting int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running, len(p.queue)
}

// Seed sets the moving average of run times (MeanRun) to mean, before
// the first function returned; after that it does nothing. The scheduler
// seeds it at Start with its app's recent run times.
func (p *Pool) Seed(mean time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meanRun == 0 && mean > 0 {
		p.meanRun = mean
	}
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
