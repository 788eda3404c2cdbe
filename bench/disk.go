package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The disk under a run's databases, sampled each second of its window. At
// their default durability the databases wait at each commit for the
// disk's flush, and this machine's disk is shared: a second in which it was
// slow is a second whose claims and writes wait, whatever the engine does.
// Each result names its latest instants, and the disk's second beside each,
// so that a late instant can be told from a slow disk. A temp dir on a
// filesystem with no block device under it (tmpfs, overlay) has no disk
// to report.

// diskCounters are a block device's cumulative counters
// (Documentation/ABI/stable/sysfs-block in the kernel's tree: the stat
// file of /sys/dev/block/MAJOR:MINOR).
type diskCounters struct {
	writes, writeMs, flushes, flushMs int64
}

// diskSecond is one second of a window on the run's disk: the writes and
// flushes the device completed in it, and the mean time each took.
type diskSecond struct {
	At      time.Time `json:"at"` // the second's start
	Writes  int64     `json:"writes"`
	WriteMs float64   `json:"write_ms"` // mean of the writes completed in the second
	Flushes int64     `json:"flushes"`
	FlushMs float64   `json:"flush_ms"`
}

// String is the second as the report prints it.
func (d diskSecond) String() string {
	return fmt.Sprintf("%s writes at %.1f ms, %s flushes at %.1f ms", num(d.Writes), d.WriteMs, num(d.Flushes), d.FlushMs)
}

// slower reports whether d's writes or flushes waited longer than o's.
func (d diskSecond) slower(o diskSecond) bool {
	return max(d.WriteMs, d.FlushMs) > max(o.WriteMs, o.FlushMs)
}

// diskStatPath is the stat file of the block device that holds dir.
func diskStatPath(dir string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev)), nil
}

// readDisk reads the counters of the stat file at path.
func readDisk(path string) (diskCounters, error) {
	b, err := os.ReadFile(path) //nolint:gosec // G304: a sysfs path made by diskStatPath
	if err != nil {
		return diskCounters{}, err
	}
	return parseDisk(string(b))
}

// parseDisk parses a stat file: writes completed and the milliseconds they
// took are its 5th and 8th fields, flushes and theirs its 16th and 17th
// (kernels before 5.5 have no flush fields: 0).
func parseDisk(stat string) (diskCounters, error) {
	f := strings.Fields(stat)
	if len(f) < 11 {
		return diskCounters{}, fmt.Errorf("disk stat: %d fields, want at least 11: %q", len(f), stat)
	}
	field := func(i int) (int64, error) {
		if i >= len(f) {
			return 0, nil
		}
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("disk stat: field %d: %w", i+1, err)
		}
		return n, nil
	}
	var c diskCounters
	for _, v := range []struct {
		into *int64
		i    int
	}{{&c.writes, 4}, {&c.writeMs, 7}, {&c.flushes, 15}, {&c.flushMs, 16}} {
		n, err := field(v.i)
		if err != nil {
			return diskCounters{}, err
		}
		*v.into = n
	}
	return c, nil
}

// second is the second from a to b, which began at at.
func (a diskCounters) second(b diskCounters, at time.Time) diskSecond {
	d := diskSecond{At: at.UTC(), Writes: b.writes - a.writes, Flushes: b.flushes - a.flushes}
	if d.Writes > 0 {
		d.WriteMs = round(float64(b.writeMs-a.writeMs)/float64(d.Writes), 1)
	}
	if d.Flushes > 0 {
		d.FlushMs = round(float64(b.flushMs-a.flushMs)/float64(d.Flushes), 1)
	}
	return d
}

// diskSampler samples a device once a second, on whole seconds, until
// stopped.
type diskSampler struct {
	path    string
	stop    chan struct{}
	done    chan struct{}
	ended   sync.Once
	mu      sync.Mutex
	seconds []diskSecond
	err     error
}

// noDisk says once why a run reports no disk.
var noDisk sync.Once

// sampleDisk starts sampling the disk that holds dir from the next whole
// second; nil, and no samples, where the device's counters cannot be read.
func sampleDisk(dir string) *diskSampler {
	path, err := diskStatPath(dir)
	if err == nil {
		_, err = readDisk(path)
	}
	if err != nil {
		noDisk.Do(func() { fmt.Fprintf(os.Stderr, "bench: no disk figures: %v\n", err) })
		return nil
	}
	s := &diskSampler{path: path, stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *diskSampler) loop() {
	defer close(s.done)
	at := time.Now().Truncate(time.Second).Add(time.Second)
	var prev diskCounters
	first := true
	for {
		select {
		case <-s.stop:
			return
		case <-time.After(time.Until(at)):
		}
		c, err := readDisk(s.path)
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		if !first {
			s.mu.Lock()
			s.seconds = append(s.seconds, prev.second(c, at.Add(-time.Second)))
			s.mu.Unlock()
		}
		prev, first = c, false
		at = at.Add(time.Second)
	}
}

// end stops the sampler, once, and returns the seconds it sampled; nil
// for a nil sampler.
func (s *diskSampler) end() []diskSecond {
	if s == nil {
		return nil
	}
	s.ended.Do(func() {
		close(s.stop)
		<-s.done
		if s.err != nil {
			fmt.Fprintf(os.Stderr, "bench: disk %s: %v\n", s.path, s.err)
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seconds
}

// addDisk gives res the disk's slowest second of its window, and each of
// its latest instants the second it fell in.
func (res *result) addDisk(seconds []diskSecond) {
	from, to := res.WindowFrom, res.WindowTo
	for _, d := range seconds {
		if d.At.Before(from) || !d.At.Before(to) {
			continue
		}
		if res.DiskSlowest == nil || d.slower(*res.DiskSlowest) {
			res.DiskSlowest = &d
		}
	}
	for i := range res.Latest {
		at := res.Latest[i].At.Truncate(time.Second)
		j := sort.Search(len(seconds), func(j int) bool { return !seconds[j].At.Before(at) })
		if j < len(seconds) && seconds[j].At.Equal(at) {
			res.Latest[i].Disk = &seconds[j]
		}
	}
}
