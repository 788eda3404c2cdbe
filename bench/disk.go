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
	discards, discardSectors          int64 // discard requests completed, and the 512-byte sectors they freed
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

// diskOf is the stat file of the device that holds dir, and its counters
// now.
func diskOf(dir string) (path string, c diskCounters, err error) {
	if path, err = diskStatPath(dir); err != nil {
		return "", c, err
	}
	c, err = readDisk(path)
	return path, c, err
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
// took are its 5th and 8th fields, discards completed and their sectors its
// 12th and 14th (kernels before 4.18 have none: 0), flushes and their
// milliseconds its 16th and 17th (kernels before 5.5 have none: 0).
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
	}{{&c.writes, 4}, {&c.writeMs, 7}, {&c.discards, 11}, {&c.discardSectors, 13}, {&c.flushes, 15}, {&c.flushMs, 16}} {
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
	path, _, err := diskOf(dir)
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

// A run's files are removed before the next run starts, and on a
// filesystem mounted with discard (this machine's) the removal of a
// 10M-row history's copy, 6-7 GB, is tens of thousands of discards that
// the disk keeps working on after rm returns. On 2026-12-06 the MariaDB
// run after PostgreSQL's history run had flushes of 106 ms, 8 s after the
// last of them, in its window (bench/README.md, "Full run at default
// durability"): the harness's own cleanup, not the system under test. So
// a removal waits for the disk to go quiet before the next run.
const (
	// settleBig is the removal that waits settleQuietBig without a
	// discard; a smaller one waits settleQuiet.
	settleBig      = 1 << 30
	settleQuietBig = 20 * time.Second
	settleQuiet    = 3 * time.Second
	// settleMax bounds the wait: a disk that never stops discarding (other
	// work on the machine) delays the next run by that at most.
	settleMax = 3 * time.Minute
)

// discardWatch tells when a disk has settled after a removal, fed its
// counters once a second.
type discardWatch struct {
	before    diskCounters // read before the removal
	last      diskCounters
	lastMoved time.Time // the last second a discard completed (at first: the removal)
}

func newDiscardWatch(before diskCounters, removedAt time.Time) *discardWatch {
	return &discardWatch{before: before, last: before, lastMoved: removedAt}
}

// settled takes the counters read at now and says whether the disk has
// discarded nothing for as long as the removal's size asks.
func (w *discardWatch) settled(c diskCounters, now time.Time) bool {
	if c.discards != w.last.discards {
		w.lastMoved = now
	}
	w.last = c
	quiet := settleQuiet
	if w.discardedBytes() >= settleBig {
		quiet = settleQuietBig
	}
	return now.Sub(w.lastMoved) >= quiet
}

// discardedBytes is what the disk discarded since before the removal.
func (w *discardWatch) discardedBytes() int64 {
	return (w.last.discardSectors - w.before.discardSectors) * 512
}

// removeSettled removes dir, flushes the filesystem's journal (whose
// commit issues the discards) and waits, at most settleMax, for the disk
// under it to settle. It says how long it waited when the removal
// discarded settleBig or more, and why it could not watch.
func removeSettled(dir string, logf func(format string, args ...any)) {
	path, before, err := diskOf(dir)
	if rmErr := os.RemoveAll(dir); rmErr != nil {
		logf("removing %s: %v", dir, rmErr)
	}
	if err != nil {
		return // no device to watch (sampleDisk says so once)
	}
	unix.Sync()
	start := time.Now()
	w := newDiscardWatch(before, start)
	for {
		time.Sleep(time.Second)
		c, readErr := readDisk(path)
		if readErr != nil {
			logf("disk %s: %v", path, readErr)
			return
		}
		now := time.Now()
		if w.settled(c, now) || now.Sub(start) >= settleMax {
			if w.discardedBytes() >= settleBig {
				logf("the run's files removed: the disk discarded %.1f GB; waited %.0f s for it to go %.0f s without a discard",
					float64(w.discardedBytes())/1e9, now.Sub(start).Seconds(), settleQuietBig.Seconds())
			}
			return
		}
	}
}
