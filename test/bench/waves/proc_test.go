package wavesbench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// cpuReading is what the machine's processes and the machine as a whole had
// spent at one moment, from /proc, in clock ticks of 1/100 s.
type cpuReading struct {
	// byCommand sums user and system time of the running processes by
	// command name: the control plane's components, the benchmark itself.
	byCommand map[string]int64
	// idle and steal are the machine's (all CPUs): time no process wanted
	// a CPU, and time the hypervisor gave a CPU we wanted to someone else.
	// Steal is what makes the same work take longer on a busier host.
	idle, steal int64
	ok          bool
}

// readCPU reads /proc.
func readCPU() cpuReading {
	r := cpuReading{byCommand: map[string]int64{}}
	forEachProcess(func(comm string, fields []string) {
		user, _ := strconv.ParseInt(fields[11], 10, 64)
		sys, _ := strconv.ParseInt(fields[12], 10, 64)
		r.byCommand[comm] += user + sys
	})
	// cpu  user nice system idle iowait irq softirq steal ...
	if text, err := os.ReadFile("/proc/stat"); err == nil {
		first, _, _ := bytes.Cut(text, []byte("\n"))
		if f := strings.Fields(string(first)); len(f) > 8 && f[0] == "cpu" {
			idle, _ := strconv.ParseInt(f[4], 10, 64)
			iowait, _ := strconv.ParseInt(f[5], 10, 64)
			steal, _ := strconv.ParseInt(f[8], 10, 64)
			r.idle, r.steal, r.ok = idle+iowait, steal, true
		}
	}
	return r
}

// forEachProcess calls fn with the command name and the fields after it
// (state first) of every process in /proc.
func forEachProcess(fn func(comm string, fields []string)) {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		text, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after
		// its closing parenthesis; utime and stime are then fields 11 and
		// 12, rss (in pages) field 21.
		open, end := bytes.IndexByte(text, '('), bytes.LastIndexByte(text, ')')
		if open < 0 || end < open {
			continue
		}
		if rest := strings.Fields(string(text[end+1:])); len(rest) > 21 {
			fn(string(text[open+1:end]), rest)
		}
	}
}

// spentSince formats what each command spent since an earlier reading, the
// largest first, those above 0.5 s, then the machine's idle and stolen time.
func (r cpuReading) spentSince(before cpuReading) string {
	type spent struct {
		name  string
		ticks int64
	}
	var all []spent
	var total int64
	for name, t := range r.byCommand {
		if d := t - before.byCommand[name]; d > 0 {
			total += d
			if d >= 50 {
				all = append(all, spent{name, d})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ticks > all[j].ticks })
	parts := []string{fmt.Sprintf("total %.1f", float64(total)/100)}
	for _, s := range all {
		parts = append(parts, fmt.Sprintf("%s %.1f", s.name, float64(s.ticks)/100))
	}
	if r.ok && before.ok {
		parts = append(parts, fmt.Sprintf("(machine: idle %.1f, stolen %.1f)", float64(r.idle-before.idle)/100, float64(r.steal-before.steal)/100))
	}
	return strings.Join(parts, ", ")
}

// residentByCommand formats the resident memory of the commands holding
// more than 100 MiB, summed by command name, the largest first: how much
// the control plane's components hold as the fleet's history grows.
func residentByCommand() string {
	pages := map[string]int64{}
	forEachProcess(func(comm string, fields []string) {
		n, _ := strconv.ParseInt(fields[21], 10, 64)
		pages[comm] += n
	})
	type held struct {
		name string
		mib  float64
	}
	var all []held
	for name, n := range pages {
		if mib := float64(n*int64(os.Getpagesize())) / (1 << 20); mib > 100 {
			all = append(all, held{name, mib})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mib > all[j].mib })
	parts := make([]string, 0, len(all))
	for _, h := range all {
		parts = append(parts, fmt.Sprintf("%s %.0f MiB", h.name, h.mib))
	}
	return strings.Join(parts, ", ")
}

// busyCores is how many CPUs' worth of time the machine spent working
// between two readings taken span apart.
func busyCores(before, after cpuReading, span time.Duration, cpus int) float64 {
	idle := float64(after.idle-before.idle) / 100
	return float64(cpus) - idle/span.Seconds()
}

// waitQuiet waits until the machine worked less than maxBusy CPUs over a
// window of 10 s, or limit passed, and says which. The components go on
// working for a while after a run's last answer (at 2,000 workloads 0.7-0.9
// of two CPUs in the 10 s after the waves, 0.2 after the pace); the wait
// keeps that from being charged to the run that comes next.
func waitQuiet(maxBusy float64, limit time.Duration) string {
	const window = 10 * time.Second
	start := time.Now()
	cpus := runtime.NumCPU()
	for {
		before := readCPU()
		if !before.ok {
			return "machine load not readable"
		}
		time.Sleep(window)
		busy := busyCores(before, readCPU(), window, cpus)
		waited := time.Since(start).Round(time.Second)
		if busy < maxBusy {
			return fmt.Sprintf("quiet after %s (%.2f of %d CPUs busy over the last 10 s)", waited, busy, cpus)
		}
		if time.Since(start) >= limit {
			return fmt.Sprintf("not quiet after %s (%.2f of %d CPUs busy over the last 10 s); measuring anyway", waited, busy, cpus)
		}
	}
}
