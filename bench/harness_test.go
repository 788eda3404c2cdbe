package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRecorderReadsBackWhatItRecorded(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r.inv")
	rec, err := newFileRecorder(path, 4)
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_700_000_000_000)
	rec.Record(taskCode(7), 0, at, at.Add(12*time.Millisecond))
	rec.Record(taskCode(0), 15, at, at.Add(3*time.Millisecond))
	// Read while still mapped: the coordinator does so during failover.
	invs, err := readInvocations(path, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []invocation{{7, 0, 2, at.UnixMilli(), at.UnixMilli() + 12}, {0, 15, 2, at.UnixMilli(), at.UnixMilli() + 3}}
	if len(invs) != len(want) || invs[0] != want[0] || invs[1] != want[1] {
		t.Fatalf("read %v, want %v", invs, want)
	}
	for range 5 {
		rec.Record(taskCode(1), 0, at, at)
	}
	if got := rec.dropped.Load(); got != 3 {
		t.Fatalf("dropped %d records past the capacity of 4, want 3", got)
	}
	if err := rec.close(); err != nil {
		t.Fatal(err)
	}
}

func TestAnalyzeCountsOnceDuplicatedMissedAndLateness(t *testing.T) {
	t.Parallel()
	from := time.Unix(1_700_000_000, 0).UTC()
	res := &result{Spec: "* * * * * *", WindowFrom: from, WindowTo: from.Add(3 * time.Second)}
	ms := func(d time.Duration) int64 { return from.Add(d).UnixMilli() }
	invs := []invocation{
		// task 0: every second once, 10 ms late.
		{0, 0, 0, ms(0), ms(10 * time.Millisecond)},
		{0, 0, 1, ms(time.Second), ms(time.Second + 10*time.Millisecond)},
		{0, 0, 2, ms(2 * time.Second), ms(2*time.Second + 10*time.Millisecond)},
		// task 1: second 0 twice (the earlier start counts for lateness),
		// second 1 missing, second 2 once, and one fire after the window.
		{1, 0, 0, ms(0), ms(30 * time.Millisecond)},
		{1, 0, 1, ms(0), ms(20 * time.Millisecond)},
		{1, 0, 0, ms(2 * time.Second), ms(2*time.Second + 40*time.Millisecond)},
		{1, 0, 0, ms(3 * time.Second), ms(3 * time.Second)},
	}
	c := &counters{redisFrom: 100, redisTo: 170}
	analyze(res, invs, plan{workload: "steady", tasks: 2}, c)
	if res.Expected != 6 || res.Once != 4 || res.Duplicated != 1 || res.Missed != 1 || res.Unexpected != 0 {
		t.Fatalf("expected/once/dup/missed/unexpected = %d/%d/%d/%d/%d, want 6/4/1/1/0",
			res.Expected, res.Once, res.Duplicated, res.Missed, res.Unexpected)
	}
	if res.LateMax != 40 || res.LateP50 != 10 {
		t.Fatalf("lateness p50 %v max %v, want 10 and 40", res.LateP50, res.LateMax)
	}
	// 7 invocations scheduled from the window start on: 70 commands = 10,000 per 1k.
	if res.Fires != 7 || res.RedisPer1k != 10000 {
		t.Fatalf("fires %d, redis per 1k %v, want 7 and 10000", res.Fires, res.RedisPer1k)
	}
	if len(res.MissedSample) != 1 || res.MissedSample[0] != taskCode(1)+"@"+from.Add(time.Second).Format("15:04:05.000") {
		t.Fatalf("missed sample %v", res.MissedSample)
	}
	// The latest instants, by the replica of each fire's first start:
	// second 2 on replica 0 (40 ms), second 0 on replica 1 (task 1's
	// earlier start, 20 ms), then, of the three 10 ms instants, the
	// earliest.
	want := []lateInstant{
		{At: from.Add(2 * time.Second), Replica: 0, Fires: 1, LateMs: 40},
		{At: from, Replica: 1, Fires: 1, LateMs: 20},
		{At: from, Replica: 0, Fires: 1, LateMs: 10},
	}
	if !slices.Equal(res.Latest, want) {
		t.Fatalf("latest instants %+v, want %+v", res.Latest, want)
	}
	// Two fires of one instant on one replica are one instant of 2 fires.
	res = &result{Spec: "* * * * * *", WindowFrom: from, WindowTo: from.Add(time.Second)}
	analyze(res, []invocation{{0, 0, 1, ms(0), ms(3 * time.Millisecond)}, {1, 0, 1, ms(0), ms(8 * time.Millisecond)}},
		plan{workload: "steady", tasks: 2}, &counters{})
	if want := []lateInstant{{At: from, Replica: 1, Fires: 2, LateMs: 8}}; !slices.Equal(res.Latest, want) {
		t.Fatalf("latest instants %+v, want %+v", res.Latest, want)
	}
}

// Each result names the disk's second beside each of its latest instants,
// and the window's slowest second, from the device's counters.
func TestLatestInstantsAreShownWithTheDiskOfTheirSecond(t *testing.T) {
	t.Parallel()
	c0, err := parseDisk("  1261573 12905 50324418 109756 505835 114780 203462280 1152458 0 152492 1315841 19266 25 74546792 21126 23724 32499\n")
	if err != nil || c0 != (diskCounters{writes: 505835, writeMs: 1152458, discards: 19266, discardSectors: 74546792, flushes: 23724, flushMs: 32499}) {
		t.Fatalf("parseDisk = %+v, %v", c0, err)
	}
	if c, err := parseDisk("1 2 3 4 5 6 7 8 0 10 11"); err != nil || c != (diskCounters{writes: 5, writeMs: 8}) {
		t.Fatalf("parseDisk of a kernel without flush fields = %+v, %v", c, err)
	}
	for _, bad := range []string{"", "1 2 3", "1 2 3 4 five 6 7 8 0 10 11"} {
		if _, err := parseDisk(bad); err == nil {
			t.Errorf("parseDisk(%q) took it", bad)
		}
	}
	if p, err := diskStatPath(t.TempDir()); err != nil || !regexp.MustCompile(`^/sys/dev/block/\d+:\d+/stat$`).MatchString(p) {
		t.Fatalf("diskStatPath = %q, %v", p, err)
	}

	from := time.Unix(1_700_000_000, 0).UTC()
	at := func(s int) time.Time { return from.Add(time.Duration(s) * time.Second) }
	c1 := diskCounters{writes: c0.writes + 40, writeMs: c0.writeMs + 3400, flushes: c0.flushes + 20, flushMs: c0.flushMs + 1802}
	slow := c0.second(c1, at(1))
	if want := (diskSecond{At: at(1), Writes: 40, WriteMs: 85, Flushes: 20, FlushMs: 90.1}); slow != want {
		t.Fatalf("second = %#v, want %#v", slow, want)
	}
	idle := c1.second(c1, at(2))
	if idle != (diskSecond{At: at(2)}) {
		t.Fatalf("a second without writes = %#v", idle)
	}
	quick := diskSecond{At: at(0), Writes: 10, WriteMs: 1, Flushes: 5, FlushMs: 2}
	before := diskSecond{At: at(-1), Writes: 1, WriteMs: 500}
	res := &result{System: "xtimer-mysql", WindowFrom: from, WindowTo: at(3), Latest: []lateInstant{
		{At: at(1).Add(500 * time.Millisecond), Replica: 2, Fires: 333, LateMs: 136},
		{At: at(5), Replica: 0, Fires: 1, LateMs: 9},
	}}
	res.addDisk([]diskSecond{before, quick, slow, idle})
	if res.DiskSlowest == nil || *res.DiskSlowest != slow {
		t.Fatalf("slowest second %#v, want %#v (the one before the window is not its)", res.DiskSlowest, slow)
	}
	if res.Latest[0].Disk == nil || *res.Latest[0].Disk != slow || res.Latest[1].Disk != nil {
		t.Fatalf("disk of the latest instants %#v, %#v", res.Latest[0].Disk, res.Latest[1].Disk)
	}
	txt := latestText("steady", []*result{res, {System: "river", Latest: res.Latest}})
	for _, want := range []string{
		"xtimer-mysql: " + at(1).Format("15:04:05") + " replica 2, 333 fires, 136 ms (disk: 40 writes at 85.0 ms, 20 flushes at 90.1 ms), ",
		"replica 0, 1 fires, 9 ms; slowest disk second " + at(1).Format("15:04:05") + ": 40 writes",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("latestText lacks %q:\n%s", want, txt)
		}
	}
	if strings.Contains(txt, "river") {
		t.Errorf("latestText names a peer's instants:\n%s", txt)
	}
}

func TestAnalyzeCountsEachShardOfAFire(t *testing.T) {
	t.Parallel()
	from := time.Unix(1_700_000_000, 0).UTC()
	res := &result{Spec: "* * * * * *", WindowFrom: from, WindowTo: from.Add(2 * time.Second)}
	ms := func(d time.Duration) int64 { return from.Add(d).UnixMilli() }
	// One task of 3 shards over 2 instants: 6 shards expected. Shard 1 of
	// the first instant runs on two replicas, shard 2 of the second never.
	invs := []invocation{
		{0, 0, 0, ms(0), ms(5 * time.Millisecond)},
		{0, 1, 1, ms(0), ms(7 * time.Millisecond)},
		{0, 1, 2, ms(0), ms(9 * time.Millisecond)},
		{0, 2, 2, ms(0), ms(3 * time.Millisecond)},
		{0, 0, 1, ms(time.Second), ms(time.Second + 1*time.Millisecond)},
		{0, 1, 0, ms(time.Second), ms(time.Second + 2*time.Millisecond)},
	}
	analyze(res, invs, plan{workload: "sharded", tasks: 1, shards: 3}, &counters{})
	if res.Expected != 6 || res.Once != 4 || res.Duplicated != 1 || res.Missed != 1 || res.Unexpected != 0 {
		t.Fatalf("expected/once/dup/missed/unexpected = %d/%d/%d/%d/%d, want 6/4/1/1/0",
			res.Expected, res.Once, res.Duplicated, res.Missed, res.Unexpected)
	}
	at := from.Format("15:04:05.000")
	if want := taskCode(0) + "/1@" + at + " on replicas [1 2]"; len(res.DuplicatedSample) != 1 || res.DuplicatedSample[0] != want {
		t.Fatalf("duplicated sample %v, want [%s]", res.DuplicatedSample, want)
	}
	if want := taskCode(0) + "/2@" + from.Add(time.Second).Format("15:04:05.000"); len(res.MissedSample) != 1 || res.MissedSample[0] != want {
		t.Fatalf("missed sample %v, want [%s]", res.MissedSample, want)
	}
	// Lateness of each shard's first start: 5, 7, 3, 1, 2 ms.
	if res.LateMax != 7 || res.LateP50 != 3 {
		t.Fatalf("lateness p50 %v max %v, want 3 and 7", res.LateP50, res.LateMax)
	}
	if res.RunPerS != 2.5 || !slices.Equal(res.RunsByReplica, []int64{2, 2, 2}) {
		t.Fatalf("run per s %v, runs by replica %v, want 2.5 and [2 2 2]", res.RunPerS, res.RunsByReplica)
	}
}

func TestFailoverGapCountsTheWindowEdges(t *testing.T) {
	t.Parallel()
	from := time.Unix(1_700_000_000, 0).UTC()
	res := &result{Spec: "* * * * * *", WindowFrom: from, WindowTo: from.Add(10 * time.Second)}
	var invs []invocation
	for s := range 10 {
		if s >= 3 && s < 7 {
			continue // the victim's fires, never run
		}
		at := from.Add(time.Duration(s) * time.Second).UnixMilli()
		invs = append(invs, invocation{0, 0, 0, at, at})
	}
	analyze(res, invs, plan{workload: "failover", tasks: 1, kill: true}, &counters{})
	if res.Missed != 4 || res.LongestGapMs != 5000 {
		t.Fatalf("missed %d, longest gap %v ms, want 4 and 5000", res.Missed, res.LongestGapMs)
	}
}

func TestChooseFireAtStaysInOneMinute(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		earliest time.Time
		top      bool
		window   time.Duration
		want     time.Time
	}{
		{base.Add(20*time.Second + 300*time.Millisecond), false, time.Second, base.Add(21 * time.Second)},
		{base.Add(59*time.Second + 300*time.Millisecond), false, time.Second, base.Add(time.Minute)},
		{base.Add(20 * time.Second), true, time.Second, base.Add(time.Minute)},
	}
	for _, c := range cases {
		if got := chooseFireAt(c.earliest, c.top, c.window); !got.Equal(c.want) {
			t.Errorf("chooseFireAt(%s, %v) = %s, want %s", c.earliest.Format(time.TimeOnly), c.top, got.Format(time.TimeOnly), c.want.Format(time.TimeOnly))
		}
	}
}

func TestRedisCallsSkipsInfo(t *testing.T) {
	t.Parallel()
	info := "# Commandstats\r\ncmdstat_set:calls=10,usec=5,usec_per_call=0.5\r\ncmdstat_info:calls=7,usec=1\r\ncmdstat_evalsha:calls=3,usec=9\r\n"
	if got := redisCalls(info); got != 13 {
		t.Fatalf("redisCalls = %d, want 13", got)
	}
}

func TestLogReasonKeepsTheError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "replica.log")
	line := `time=2026-11-30T16:38:51.809Z level=WARN msg="xtimer start waits for the database" step=heartbeat err="store: heartbeat of replica \"replica-0\": Error 1406 (22001): Data too long for column 'handlers' at row 1" retry_in=5s` + "\n"
	if err := os.WriteFile(path, []byte("first\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	want := `store: heartbeat of replica "replica-0": Error 1406 (22001): Data too long for column 'handlers' at row 1`
	if got := logReason(path); got != want {
		t.Fatalf("logReason = %q, want %q", got, want)
	}
}

func TestChartsDrawAWorkloadWhoseFiresWereAllOnTime(t *testing.T) {
	t.Parallel()
	cdf := make([]float64, 101) // every percentile 0 ms
	doc := &document{Profile: "full", Results: []*result{
		{System: "xtimer-mysql", Workload: "distinct", CDF: cdf},
	}}
	files, err := charts(doc, []string{"distinct"}, t.TempDir(), "run")
	if err != nil || len(files) != 1 {
		t.Fatalf("charts of a run with every fire on time: %v, %v", files, err)
	}
}

// A server's data dir is copied only when the copy leaves copyRoom free;
// the refusal names the copy, the space it would leave and -keep.
func TestCopyIsRefusedWhenItWouldLeaveTheDiskFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "base", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"PG_VERSION": 1000, "base/1/16384": 2345} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := dirSize(dir); err != nil || n != 3345 {
		t.Fatalf("dirSize = %d, %v, want 3345", n, err)
	}
	const gib = 1 << 30
	if err := checkRoom("/t/data", "/run", 5*gib, 7*gib); err != nil {
		t.Fatalf("a copy leaving 2 GiB free: %v", err)
	}
	err := checkRoom("/t/data", "/run", 5*gib, 7*gib-1)
	if err == nil {
		t.Fatal("a copy leaving a byte under 2 GiB free was allowed")
	}
	for _, want := range []string{"/t/data (5,120 MiB)", "into /run", "leave 2,047 MiB free", "-keep"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
}

// TestRemovalWaitsForTheDiskToStopDiscarding: after removing a run's
// files, the next run waits until the disk has gone settleQuietBig
// without a discard when the removal freed settleBig or more, settleQuiet
// when less; and removeSettled removes the directory.
func TestRemovalWaitsForTheDiskToStopDiscarding(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	before := diskCounters{discards: 100, discardSectors: 5000}

	// A small removal: 3 discards of 4 MiB, the last at +2 s.
	w := newDiscardWatch(before, t0)
	small := diskCounters{discards: 103, discardSectors: 5000 + 3*8192}
	for s, c := range []diskCounters{before, small, small, small, small} {
		got := w.settled(c, at(s+1))
		if want := s+1 >= 2+3; got != want { // quiet since +2 s, for 3 s

			t.Fatalf("small removal at +%d s: settled = %v, want %v", s+1, got, want)
		}
	}
	if w.discardedBytes() != 3*8192*512 {
		t.Fatalf("discardedBytes = %d", w.discardedBytes())
	}

	// A 7 GB removal: discards until +6 s, then none; settled at +26 s,
	// not at +9 s as a small one would be.
	w = newDiscardWatch(before, t0)
	c := before
	for s := 1; s <= 30; s++ {
		if s <= 6 {
			c.discards += 5000
			c.discardSectors += int64(7e9) / 512 / 6
		}
		got := w.settled(c, at(s))
		if want := s >= 26; got != want {
			t.Fatalf("7 GB removal at +%d s: settled = %v, want %v", s, got, want)
		}
	}
	// A discard after a quiet spell starts the quiet over.
	c.discards++
	if w.settled(c, at(31)) || w.settled(c, at(50)) || !w.settled(c, at(51)) {
		t.Fatal("a late discard did not start the quiet spell over")
	}

	dir := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(filepath.Join(dir, "pg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pg", "f"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var logged []string
	removeSettled(dir, func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) })
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("removeSettled left %s: %v", dir, err)
	}
	if len(logged) > 0 {
		t.Fatalf("removing 1 MiB logged %q", logged)
	}
}
