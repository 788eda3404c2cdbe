package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// document is the JSON output of one harness run.
type document struct {
	Profile  string    `json:"profile"`
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	Host     string    `json:"host"`
	CPUs     int       `json:"cpus"`
	Replicas int       `json:"replicas"`
	Workers  int       `json:"workers"`
	// DurabilityOff: the databases ran with durability traded for speed
	// (-durability-off: fsync=off and its MariaDB counterpart), not at
	// their default durability.
	DurabilityOff bool      `json:"durability_off,omitempty"`
	Results       []*result `json:"results"`
}

func writeJSON(path string, doc *document) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// markdown is one table per workload, rows in the order of the runs.
func markdown(doc *document, workloads []string) string {
	var b strings.Builder
	durability := "databases at their default durability"
	if doc.DurabilityOff {
		durability = "**durability off** (-durability-off: fsync=off, synchronous_commit=off, full_page_writes=off; innodb_flush_log_at_trx_commit=2, no doublewrite)"
	}
	fmt.Fprintf(&b, "Profile %s, %s, %d CPUs, %d replicas per system, %d workers each, %s; lateness = start − scheduled.\n",
		doc.Profile, doc.Started.UTC().Format("2006-01-02 15:04 UTC"), doc.CPUs, doc.Replicas, doc.Workers, durability)
	for _, w := range workloads {
		var rows []*result
		for _, r := range doc.Results {
			if r.Workload == w {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s\n\n", w)
		switch w {
		case "scale":
			b.WriteString("| system | tasks | start-up s (slowest replica) | RSS MiB (largest replica) | idle CPU % of a core (mean per replica) | peak RSS MiB |\n")
			b.WriteString("|---|---|---|---|---|---|\n")
			for _, r := range rows {
				if r.NA != "" {
					fmt.Fprintf(&b, "| %s | %s | n/a: %s | | | |\n", r.System, num(int64(r.Tasks)), mdEscape(r.NA))
					continue
				}
				fmt.Fprintf(&b, "| %s | %s | %.1f | %.0f | %.2f | %.0f |\n", r.System, num(int64(r.Tasks)),
					maxOf(r.StartupS), maxOf(r.RSSMB), mean(r.IdleCPUPct), maxOf(r.PeakRSSMB))
			}
		case "distinct":
			b.WriteString("Each task its own daily time (`S M H * * *`, spread evenly over the day); a fleet of 3 started together on empty tables, then one replica SIGKILLed and started again on the populated tables. CPU: the replica process's own (utime + stime) over the window, while the fires run. In parentheses: the targets of issue 26 (stated for 1M tasks).\n\n")
			b.WriteString("| system | tasks | first start-up s, slowest replica (≤ 10) | restart s (≤ 3) | RSS MiB, largest (≤ 512) | CPU % of a core, busiest (≤ 2) | fires expected | invoked once | duplicated | missed | p50 ms | p99 ms | max ms | peak RSS MiB |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
			for _, r := range rows {
				if r.NA != "" {
					fmt.Fprintf(&b, "| %s | %s | n/a: %s |%s\n", r.System, num(int64(r.Tasks)), mdEscape(r.NA), strings.Repeat(" |", 11))
					continue
				}
				fmt.Fprintf(&b, "| %s | %s | %.1f | %.1f | %.0f | %.2f | %s | %s | %s | %s | %.0f | %.0f | %.0f | %.0f |",
					r.System, num(int64(r.Tasks)), maxOf(r.StartupS), r.RestartS, maxOf(r.RSSMB), maxOf(r.IdleCPUPct),
					num(r.Expected), num(r.Once), num(r.Duplicated), num(r.Missed), r.LateP50, r.LateP99, r.LateMax, maxOf(r.PeakRSSMB))
				if r.Unexpected > 0 {
					fmt.Fprintf(&b, " (%s invocations at unscheduled instants)", num(r.Unexpected))
				}
				b.WriteString("\n")
			}
		case "throughput":
			b.WriteString("| system | sustained fires/s | steps: fires/s → p99 ms, missed, duplicated | CPU s / 1k fires | Redis cmds / 1k fires | DB rows / fire | peak RSS MiB |\n")
			b.WriteString("|---|---|---|---|---|---|---|\n")
			b.WriteString("|   |   | (figures of the last step run) | | | | |\n")
			for _, sys := range systemsOf(rows) {
				steps, sustained, last := throughputOf(rows, sys)
				var txt []string
				for _, r := range steps {
					if r.NA != "" {
						txt = append(txt, fmt.Sprintf("%s → n/a: %s", num(int64(r.Tasks)), mdEscape(r.NA)))
						continue
					}
					mark := ""
					if !r.Pass {
						mark = " ✗"
					}
					txt = append(txt, fmt.Sprintf("%s → %.0f, %s, %s%s", num(int64(r.Tasks)), r.LateP99, num(r.Missed), num(r.Duplicated), mark))
				}
				if last.NA != "" {
					fmt.Fprintf(&b, "| %s | %s | %s | | | | |\n", sys, num(int64(sustained)), strings.Join(txt, "; "))
					continue
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %.3f | %.1f | %s | %.0f |\n", sys, num(int64(sustained)),
					strings.Join(txt, "; "), last.CPUPer1k, last.RedisPer1k, rowsText(last), maxOf(last.PeakRSSMB))
			}
		case "sharded":
			b.WriteString("Every task `WithShards(n)`: the figures count shards, one per (task, instant, shard); only xtimer shards (peers: n/a).\n\n")
			b.WriteString("| system | tasks × shards | shards expected | run once | duplicated | missed | p50 ms | p90 ms | p99 ms | max ms | shards/s run | shards by replica | CPU s / 1k shards | Redis cmds / 1k shards | DB rows / shard | peak RSS MiB |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
			for _, r := range rows {
				size := fmt.Sprintf("%s × %d", num(int64(r.Tasks)), r.Shards)
				if r.NA != "" {
					fmt.Fprintf(&b, "| %s | %s | n/a: %s |%s\n", r.System, size, mdEscape(r.NA), strings.Repeat(" |", 13))
					continue
				}
				byReplica := make([]string, len(r.RunsByReplica))
				for i, n := range r.RunsByReplica {
					byReplica[i] = num(n)
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %s | %s | %.3f | %.1f | %s | %.0f |",
					r.System, size, num(r.Expected), num(r.Once), num(r.Duplicated), num(r.Missed),
					r.LateP50, r.LateP90, r.LateP99, r.LateMax, num(int64(math.Round(r.RunPerS))), strings.Join(byReplica, " / "),
					r.CPUPer1k, r.RedisPer1k, rowsText(r), maxOf(r.PeakRSSMB))
				if r.Unexpected > 0 {
					fmt.Fprintf(&b, " (%s invocations at unscheduled instants)", num(r.Unexpected))
				}
				b.WriteString("\n")
			}
			for _, r := range rows {
				if len(r.DuplicatedSample) > 0 {
					fmt.Fprintf(&b, "\n%s, duplicated (first five): %s.\n", r.System, strings.Join(r.DuplicatedSample, ", "))
				}
				if len(r.MissedSample) > 0 {
					fmt.Fprintf(&b, "\n%s, missed (first five): %s.\n", r.System, strings.Join(r.MissedSample, ", "))
				}
			}
		default:
			extra := ""
			if w == "failover" {
				extra = " killed | longest gap s | fires > 1 s late |"
			}
			b.WriteString("| system | tasks | fires expected | invoked once | duplicated | missed | p50 ms | p90 ms | p99 ms | max ms | CPU s / 1k fires | Redis cmds / 1k fires | DB rows / fire | peak RSS MiB |" + extra + "\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + strings.Repeat("---|", strings.Count(extra, "|")) + "\n")
			for _, r := range rows {
				if r.NA != "" {
					fmt.Fprintf(&b, "| %s | %s | n/a: %s |%s\n", label(r), num(int64(r.Tasks)), mdEscape(r.NA),
						strings.Repeat(" |", 11+strings.Count(extra, "|")))
					continue
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.3f | %.1f | %s | %.0f |",
					label(r), num(int64(r.Tasks)), num(r.Expected), num(r.Once), num(r.Duplicated), num(r.Missed),
					r.LateP50, r.LateP90, r.LateP99, r.LateMax, r.CPUPer1k, r.RedisPer1k, rowsText(r), maxOf(r.PeakRSSMB))
				if w == "failover" {
					fmt.Fprintf(&b, " %s | %.1f | %s |", r.Killed, r.LongestGapMs/1000, num(r.LateFires))
				}
				if r.Unexpected > 0 {
					fmt.Fprintf(&b, " (%s invocations at unscheduled instants)", num(r.Unexpected))
				}
				b.WriteString("\n")
			}
		}
		var loads []string
		for _, r := range rows {
			if len(r.LoadAvg) == 2 {
				loads = append(loads, fmt.Sprintf("%s %.1f → %.1f", label(r), r.LoadAvg[0], r.LoadAvg[1]))
			}
		}
		if len(loads) > 0 {
			fmt.Fprintf(&b, "\nMachine load (1-minute average, window start → replicas stopped): %s.\n", strings.Join(loads, "; "))
		}
		b.WriteString(latestText(w, rows))
		var seeds []string
		for _, r := range rows {
			db := map[string]string{"xtimer-postgres": "PostgreSQL", "xtimer-mysql": "MariaDB"}[r.System]
			txt := fmt.Sprintf("%s rows on %s", num(r.History), db)
			if r.History > 0 && r.SeedS > 0 && !slices.Contains(seeds, txt+fmt.Sprintf(" in %.0f s", r.SeedS)) {
				seeds = append(seeds, txt+fmt.Sprintf(" in %.0f s", r.SeedS))
			}
		}
		if len(seeds) > 0 {
			fmt.Fprintf(&b, "\nHistory: the executions table held earlier runs' rows, all within Retention, seeded once per database and size (server-side generation, indexes built after, vacuumed and analyzed, the days before the newest row's rolled up as the retention sweep of a live app leaves them): %s.\n", strings.Join(seeds, "; "))
		}
	}
	return b.String()
}

// latestText names the latest instants of xtimer's runs in rows, and the
// disk beside them: "" when no run has them.
func latestText(w string, rows []*result) string {
	var runs []string
	for _, r := range rows {
		if !strings.HasPrefix(r.System, "xtimer") || len(r.Latest) == 0 {
			continue
		}
		name := label(r)
		if w == "throughput" {
			name += fmt.Sprintf(" at %s/s", num(int64(r.Tasks)))
		}
		var ins []string
		for _, in := range r.Latest {
			txt := fmt.Sprintf("%s replica %d, %s fires, %.0f ms", in.At.Format("15:04:05"), in.Replica, num(in.Fires), in.LateMs)
			if in.Disk != nil {
				txt += " (disk: " + in.Disk.String() + ")"
			}
			ins = append(ins, txt)
		}
		txt := name + ": " + strings.Join(ins, ", ")
		if d := r.DiskSlowest; d != nil {
			txt += fmt.Sprintf("; slowest disk second %s: %s", d.At.Format("15:04:05"), d)
		}
		runs = append(runs, txt)
	}
	if len(runs) == 0 {
		return ""
	}
	return fmt.Sprintf("\nxtimer's latest instants (the instant, the replica that started its fires, how many, the last one's lateness; the disk under the databases in that second: the writes and flushes it completed and the mean time of each), and the window's slowest disk second: %s.\n",
		strings.Join(runs, "; "))
}

// condition names a workload and its history condition: "steady",
// "steady (10M history)".
func condition(workload string, history int64) string {
	if history == 0 {
		return workload
	}
	return fmt.Sprintf("%s (%s history)", workload, rowsShort(history))
}

// rowsShort writes a row count as 10M, 500k or 1,234.
func rowsShort(n int64) string {
	switch {
	case n >= 1_000_000 && n%100_000 == 0:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e6), ".0") + "M"
	case n >= 1000 && n%100 == 0:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e3), ".0") + "k"
	}
	return num(n)
}

// label is a row's system with its history condition: the rows of one
// system with and without history sit side by side in a workload's table.
func label(r *result) string {
	if r.History == 0 {
		return r.System
	}
	return fmt.Sprintf("%s, %s history", r.System, rowsShort(r.History))
}

// systemsOf lists the labels of rows in their first order.
func systemsOf(rows []*result) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, label(r)) {
			out = append(out, label(r))
		}
	}
	return out
}

// throughputOf is a system's (label's) throughput steps, the highest
// rate of the passing steps before the first failing one, and the last
// step run.
func throughputOf(rows []*result, system string) (steps []*result, sustained int, last *result) {
	failed := false
	for _, r := range rows {
		if label(r) != system {
			continue
		}
		steps = append(steps, r)
		last = r
		if r.NA == "" && r.Pass && !failed {
			sustained = r.Tasks
		} else {
			failed = true
		}
	}
	return steps, sustained, last
}

func rowsText(r *result) string {
	if r.DBRowsPerFire == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", *r.DBRowsPerFire)
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", "/")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 220 {
		s = s[:220] + "…"
	}
	return s
}

// num writes n with thousands separators.
func num(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// charts draws one lateness CDF per workload with fires, one line per
// system, into dir/<prefix>-<workload>.png, and returns the files.
func charts(doc *document, workloads []string, dir, prefix string) ([]string, error) {
	var files []string
	for _, w := range workloads {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("lateness CDF, %s (%s profile)", w, doc.Profile)
		p.X.Label.Text = "start − scheduled, ms (log scale; ≤ 0.5 ms drawn at 0.5)"
		p.Y.Label.Text = "fraction of fires"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min, p.Y.Max = 0, 1
		p.Legend.Top = false
		p.Legend.Left = false
		lines := 0
		for _, r := range doc.Results {
			if r.Workload != w || r.NA != "" || len(r.CDF) == 0 {
				continue
			}
			name := label(r)
			if w == "throughput" {
				var rows []*result
				for _, x := range doc.Results {
					if x.Workload == w {
						rows = append(rows, x)
					}
				}
				if _, _, last := throughputOf(rows, label(r)); last != r {
					continue // one line per system: its last step
				}
				name = fmt.Sprintf("%s @ %s/s", label(r), num(int64(r.Tasks)))
			}
			pts := make(plotter.XYs, len(r.CDF))
			for i, v := range r.CDF {
				pts[i].X = math.Max(v, 0.5)
				pts[i].Y = float64(i) / 100
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return files, err
			}
			l.Color = plotutil.Color(lines)
			l.Dashes = plotutil.Dashes(lines)
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(name, l)
			lines++
		}
		if lines == 0 {
			continue
		}
		// A log axis needs a range: with every fire drawn at 0.5 ms (none
		// later), plot widened 0.5..0.5 to -0.5..1.5 and panicked.
		p.X.Min, p.X.Max = 0.5, math.Max(p.X.Max, 5)
		p.Add(plotter.NewGrid())
		p.BackgroundColor = color.White
		path := filepath.Join(dir, prefix+"-"+w+".png")
		if err := p.Save(18*vg.Centimeter, 11*vg.Centimeter, path); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}
