package main

import (
	"strings"
	"testing"
	"time"
)

func TestDistinctSpecSpreadsTheTasksOverTheDay(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	for _, tc := range []struct {
		i    int
		want string
	}{
		{0, "0 0 0 * * *"},
		{n / 2, "0 0 12 * * *"},
		{n - 1, "59 59 23 * * *"},
		{43, "3 0 0 * * *"},    // 43 × 0.0864 s
		{43114, "5 2 1 * * *"}, // 3725.05 s: 01:02:05
	} {
		if got := distinctSpec(tc.i, n); got != tc.want {
			t.Errorf("distinctSpec(%d, %d) = %q, want %q", tc.i, n, got, tc.want)
		}
	}
	// 1M tasks: 11 or 12 a second, every second of the day has some.
	perSecond := make([]int, 86400)
	for i := range n {
		perSecond[distinctSecond(i, n)]++
	}
	for s, c := range perSecond {
		if c != 11 && c != 12 {
			t.Fatalf("second %d has %d tasks, want 11 or 12", s, c)
		}
	}
}

func TestAnalyzeDistinctExpectsEachTaskAtItsOwnSecond(t *testing.T) {
	t.Parallel()
	// 86,400 tasks: task i at second i of the day. A window of 3 s from
	// 10:00:00 expects tasks 36000, 36001 and 36002 once each.
	const n = 86400
	from := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	res := &result{Spec: distinctSpecText(n), WindowFrom: from, WindowTo: from.Add(3 * time.Second)}
	ms := func(d time.Duration) int64 { return from.Add(d).UnixMilli() }
	invs := []invocation{
		{36000, 0, 0, ms(0), ms(4 * time.Millisecond)},
		{36001, 0, 1, ms(time.Second), ms(time.Second + 6*time.Millisecond)},
		{36001, 0, 2, ms(time.Second), ms(time.Second + 9*time.Millisecond)},
		// Task 7 at a time of day that is not its own.
		{7, 0, 0, ms(2 * time.Second), ms(2 * time.Second)},
	}
	analyze(res, invs, plan{workload: "distinct", tasks: n, distinct: true}, &counters{})
	if res.Expected != 3 || res.Once != 1 || res.Duplicated != 1 || res.Missed != 1 || res.Unexpected != 1 {
		t.Fatalf("expected/once/dup/missed/unexpected = %d/%d/%d/%d/%d, want 3/1/1/1/1",
			res.Expected, res.Once, res.Duplicated, res.Missed, res.Unexpected)
	}
	if want := taskCode(36002) + "@10:00:02.000"; len(res.MissedSample) != 1 || res.MissedSample[0] != want {
		t.Fatalf("missed sample %v, want [%s]", res.MissedSample, want)
	}
}

func TestAnalyzeDistinctWindowAcrossMidnight(t *testing.T) {
	t.Parallel()
	const n = 86400
	from := time.Date(2026, 1, 1, 23, 59, 59, 0, time.UTC)
	res := &result{Spec: distinctSpecText(n), WindowFrom: from, WindowTo: from.Add(2 * time.Second)}
	at := func(d time.Duration) int64 { return from.Add(d).UnixMilli() }
	invs := []invocation{{86399, 0, 0, at(0), at(0)}, {0, 0, 0, at(time.Second), at(time.Second)}}
	analyze(res, invs, plan{workload: "distinct", tasks: n, distinct: true}, &counters{})
	if res.Expected != 2 || res.Once != 2 || res.Missed != 0 {
		t.Fatalf("expected/once/missed = %d/%d/%d, want 2/2/0", res.Expected, res.Once, res.Missed)
	}
}

func TestHistoryPlanStaysInRetentionAndThePast(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 500e6, time.UTC)
	h, err := newHistoryPlan(10_000_000, now)
	if err != nil {
		t.Fatal(err)
	}
	perTask := int64(10_000_000 / historyTasks)
	newest := h.First().Add(time.Duration(perTask-1)*h.Step() + 59*time.Second)
	if want := now.Truncate(time.Second).Add(-historyGap - time.Second); !newest.Equal(want) {
		t.Fatalf("newest row at %s, want %s, a second and an hour before %s", newest.UTC(), want, now)
	}
	if oldest := h.First(); now.Sub(oldest) > historySpan+historyGap+time.Second {
		t.Fatalf("oldest row at %s: %s before now, more than the span", oldest.UTC(), now.Sub(oldest))
	}
	if h.Step()%time.Second != 0 || h.Step() < time.Second {
		t.Fatalf("step %s, want whole seconds", h.Step())
	}
	if got := h.TaskCode(historyTasks - 1); got != taskCode(historyTasks-1) {
		t.Fatalf("seeded task code %q, want the runs' %q", got, taskCode(historyTasks-1))
	}
	if _, err := newHistoryPlan(0, now); err == nil || !strings.Contains(err.Error(), "-history 0") {
		t.Fatalf("newHistoryPlan(0): %v, want an error naming -history", err)
	}
	if _, err := newHistoryPlan(1<<40, now); err == nil || !strings.Contains(err.Error(), "-history") {
		t.Fatalf("newHistoryPlan(2^40): %v, want an error naming -history", err)
	}
}

func TestConditionAndLabelNameTheHistory(t *testing.T) {
	t.Parallel()
	if got := condition("steady", 10_000_000); got != "steady (10M history)" {
		t.Errorf("condition = %q", got)
	}
	if got := condition("steady", 0); got != "steady" {
		t.Errorf("condition = %q", got)
	}
	if got := label(&result{System: "xtimer-mysql", History: 1_500_000}); got != "xtimer-mysql, 1.5M history" {
		t.Errorf("label = %q", got)
	}
	if got := rowsShort(250_000); got != "250k" {
		t.Errorf("rowsShort(250000) = %q", got)
	}
}

func TestProfilesPlanHistoryForXtimerOnly(t *testing.T) {
	t.Parallel()
	full := profiles["full"]
	if got := len(full.plans("xtimer-postgres", "steady")); got != 2 {
		t.Errorf("full steady plans of xtimer-postgres: %d, want 2 (without and with history)", got)
	}
	if got := len(full.plans("river", "steady")); got != 1 {
		t.Errorf("full steady plans of river: %d, want 1", got)
	}
	if got := len(full.plans("xtimer-mysql", "throughput")); got != 2*len(full.rampSteps) {
		t.Errorf("full throughput plans of xtimer-mysql: %d, want %d", got, 2*len(full.rampSteps))
	}
	if ps := full.plans("xtimer-postgres", "distinct"); len(ps) != 1 || ps[0].tasks != 1_000_000 || !ps[0].distinct {
		t.Errorf("full distinct plans: %+v", ps)
	}
	if ps := profiles["smoke"].plans("xtimer-postgres", "distinct"); len(ps) != 0 {
		t.Errorf("smoke distinct plans: %+v, want none", ps)
	}
}
