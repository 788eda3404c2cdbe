//go:build !linux

package engine

import "time"

// sleepFor reports false: there is no sleep finer than Go's timers here,
// and the caller reads the clock instead.
func sleepFor(time.Duration) bool { return false }
