package engine

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkSpinUntil waits out startEarly, the stretch before an instant
// that the dispatcher's timer leaves to spinUntil, and reports the CPU
// that the process spent on it (cpu-µs/op): what each replica of a fleet
// takes from the others' starts just before each instant.
func BenchmarkSpinUntil(b *testing.B) {
	clock := SystemClock{}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	from := cpu()
	for b.Loop() {
		spinUntil(clock, clock.Now().Add(startEarly))
	}
	b.ReportMetric(float64((cpu()-from).Microseconds())/float64(b.N), "cpu-µs/op")
}
