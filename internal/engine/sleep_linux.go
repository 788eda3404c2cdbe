package engine

import (
	"syscall"
	"time"
)

// sleepFor blocks the calling goroutine's thread in the kernel for about d
// (nanosleep, which wakes within about a tenth of a millisecond, where a
// Go timer waits for epoll's next whole millisecond), or less if a signal
// comes. It reports true: it slept.
func sleepFor(d time.Duration) bool {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR: the caller looks at the clock again
	return true
}
