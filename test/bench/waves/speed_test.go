package wavesbench

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// The machine this benchmark runs on is a small VM on a shared host: the
// same hashing takes from 95 to 168 ms of a thread's CPU time from one
// second to the next with nothing else running (measured 2026-11-27), and
// at 2,000 workloads every process of the control plane spent about 40%
// more CPU on the bare waves of one round than on those of the round
// before. A ratio of two runs minutes apart then holds the host's mood as much
// as the runs. speedProbe measures that mood while a run is timed: every
// probeEvery it hashes probeBytes on a thread of its own and reads how much
// CPU time the thread spent on it (not wall time, so a busy run queue does
// not count, only how fast a CPU runs the same instructions).

const (
	probeBytes = 4 << 20
	probeEvery = time.Second
)

// speedProbe samples the CPU time of a fixed piece of work until stopped.
type speedProbe struct {
	stop    chan struct{}
	done    chan struct{}
	samples []time.Duration
}

func startSpeedProbe() *speedProbe {
	p := &speedProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		// The thread's CPU clock is read around the work: the goroutine
		// must stay on that thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, probeBytes)
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for {
			before, ok := threadCPU()
			sha256.Sum256(buf)
			if after, ok2 := threadCPU(); ok && ok2 {
				p.samples = append(p.samples, after-before)
			}
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// speedReading summarises a probe: the mean CPU time of one piece of work
// (a run's wall time on a saturated machine grows with it), and the range.
type speedReading struct {
	mean, min, max time.Duration
	n              int
}

func (p *speedProbe) Stop() speedReading {
	close(p.stop)
	<-p.done
	if len(p.samples) == 0 {
		return speedReading{}
	}
	s := append([]time.Duration(nil), p.samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return speedReading{mean: sum / time.Duration(len(s)), min: s[0], max: s[len(s)-1], n: len(s)}
}

func (r speedReading) String() string {
	if r.n == 0 {
		return "machine speed: not measured"
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("machine speed: %.2f ms of CPU per probe on average (%d probes, %.2f-%.2f ms; more is slower)", ms(r.mean), r.n, ms(r.min), ms(r.max))
}

// speedRatio is took over ref with each divided by the machine's mean
// speed over it: on a machine with no CPU to spare, the ratio of the work
// the two runs asked of it.
func speedRatio(took time.Duration, speed speedReading, ref time.Duration, refSpeed speedReading) string {
	if speed.n == 0 || refSpeed.n == 0 || ref <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", (took.Seconds()/speed.mean.Seconds())/(ref.Seconds()/refSpeed.mean.Seconds()))
}

// threadCPU is the calling thread's CPU time.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
