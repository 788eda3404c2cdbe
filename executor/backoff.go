package executor

import (
	"time"
)

// Backoff is the delay before a retry: Base doubled for each failed attempt,
// at most Max, spread by ±Jitter (a fraction) so that many tasks failing
// together do not retry together.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// Delay returns the wait after the failed attempt number attempt (the first
// attempt is 1). random returns a value in [0, 1).
func (b Backoff) Delay(attempt int, random func() float64) time.Duration {
	d := b.Base
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter > 0 && random != nil {
		spread := float64(d) * b.Jitter
		d += time.Duration(spread * (2*random() - 1))
	}
	return max(d, 0)
}
