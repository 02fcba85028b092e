package cmd

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	kterm "k8s.io/kubectl/pkg/util/term"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// Defaults and limits of the wave flags.
const (
	defaultProgressDeadline = 10 * time.Minute
	// massThreshold is "a handful": a run that triggers more workloads says
	// what it is about to do before it writes.
	massThreshold = 5
	// plainProgressInterval paces the progress lines written to a file or
	// pipe (CI logs).
	plainProgressInterval = 5 * time.Second
	// confirmListLimit bounds the workloads -i lists before asking.
	confirmListLimit = 20
)

// Values of --order.
const (
	orderCRD   = "crd"
	orderGiven = "given"
)

// waveOptions are the flags of waved runs and of mass-operation safety.
type waveOptions struct {
	// MaxInFlight is --max-in-flight: 0 triggers every workload at once.
	MaxInFlight      int
	WaitReady        bool
	ProgressDeadline time.Duration
	MaxFailures      int
	Pause            time.Duration
	Order            string
	Quiet            bool
	Interactive      bool
	// StepsFlag is --steps; steps its value once validated.
	StepsFlag string
	steps     []waves.Step
	// timeoutGiven is set when --timeout was on the command line.
	timeoutGiven bool
}

// addWaveFlags registers the flags of waved runs.
func (o *RebalanceOptions) addWaveFlags(cmd *cobra.Command) {
	flags := cmd.Flags()
	o.WaitReady = true
	o.ProgressDeadline = defaultProgressDeadline
	o.Order = orderCRD
	flags.IntVar(&o.MaxInFlight, "max-in-flight", 0, "Rebalance in waves: at most this many workloads between \"trigger written\" and \"done\" at a time; the next one starts as an earlier one finishes. 0 triggers every workload at once.")
	flags.BoolVar(&o.WaitReady, "wait-ready", o.WaitReady, "With --max-in-flight, a workload is done once it is rescheduled and the replicas of its new placement are ready, by kind, from the binding's aggregatedStatus: readyReplicas, a Job's active and succeeded pods, or the health Karmada interprets for other kinds (a kind without one is not gated). With false, rescheduled is done.")
	durationVar(flags, &o.ProgressDeadline, "progress-deadline", o.ProgressDeadline, "With --max-in-flight, how long each workload may take from its start to done; one that is not triggered, rescheduled or ready by then counts as failed. 0 means no limit.")
	flags.IntVar(&o.MaxFailures, "max-failures", 0, "With --max-in-flight, stop starting workloads once this many failed; those in flight are finished and reported, the rest stay pending (exit code 2). 0 means no limit.")
	durationVar(flags, &o.Pause, "pause", 0, "With --max-in-flight, keep a slot free this long after its workload finished before the next workload takes it (a pause between waves).")
	flags.StringVar(&o.Order, "order", o.Order, `With --max-in-flight, the order workloads start in: "crd" (a WorkloadRebalancer's order: apiVersion, kind, namespace, name) or "given" (the order of the arguments, files or listing).`)
	flags.StringVar(&o.StepsFlag, "steps", "", "Pause a recorded run (--name, --ttl or a WorkloadRebalancer manifest) at approval gates: counts of workloads or percentages of all of them, such as 1,10%,100% (move 1 workload; wait for 'kubectl rebalance approve NAME'; go on up to 10% of them; wait; then the rest). Each step ends once its workloads are done; the record shows the pause (annotation kubectl-rebalance.io/paused-at-step). Goes in waves: without --max-in-flight, one workload at a time.")
	flags.BoolVar(&o.Quiet, "quiet", false, "Print no progress and no announcement of a large run on stderr; the results and the summary are still printed.")
	flags.BoolVarP(&o.Interactive, "interactive", "i", false, "List the workloads and ask before writing anything; only \"y\" goes on.")
	_ = cmd.RegisterFlagCompletionFunc("order", cobra.FixedCompletions([]string{orderCRD, orderGiven}, cobra.ShellCompDirectiveNoFileComp))
}

// validateWaves checks the wave flags.
func (o *RebalanceOptions) validateWaves(cmd *cobra.Command) error {
	o.timeoutGiven = cmd.Flags().Changed("timeout")
	o.steps = nil
	if cmd.Flags().Changed("steps") {
		steps, err := waves.ParseSteps(o.StepsFlag)
		switch {
		case err != nil:
			return cmdutil.UsageErrorf(cmd, "%v", err)
		case o.DryRun != rebalance.DryRunNone:
			return cmdutil.UsageErrorf(cmd, "--steps pauses a run that writes: leave out --dry-run, or --steps")
		case o.ServerSide:
			return cmdutil.UsageErrorf(cmd, "--steps cannot be combined with --server-side: Karmada's controller triggers every workload at once; e.g. --name NAME %s", waves.StepsExample)
		case !o.Wait:
			return cmdutil.UsageErrorf(cmd, "--steps needs --wait: a step ends when its workloads are done, which is only known by waiting")
		}
		o.steps = steps
		if o.MaxInFlight == 0 {
			// Gates go in waves; a careful rollout moves one at a time.
			o.MaxInFlight = 1
		}
	}
	waveOnly := []string{"wait-ready", "progress-deadline", "max-failures", "pause", "order"}
	switch {
	case o.MaxInFlight < 0:
		return cmdutil.UsageErrorf(cmd, "--max-in-flight must be 0 (no waves) or more, got %d", o.MaxInFlight)
	case o.MaxFailures < 0:
		return cmdutil.UsageErrorf(cmd, "--max-failures must be 0 (no limit) or more, got %d", o.MaxFailures)
	case o.ProgressDeadline < 0 || o.Pause < 0:
		return cmdutil.UsageErrorf(cmd, "--progress-deadline and --pause cannot be negative")
	case o.Order != orderCRD && o.Order != orderGiven:
		return cmdutil.UsageErrorf(cmd, "invalid --order %q: use %s or %s", o.Order, orderCRD, orderGiven)
	case o.MaxInFlight > 0 && !o.Wait:
		return cmdutil.UsageErrorf(cmd, "--max-in-flight needs --wait: a wave moves on when workloads are done, which is only known by waiting")
	case o.MaxInFlight > 0 && o.ServerSide:
		return cmdutil.UsageErrorf(cmd, "--max-in-flight cannot be combined with --server-side: Karmada's controller triggers every workload at once")
	}
	if o.MaxInFlight == 0 {
		for _, name := range waveOnly {
			if cmd.Flags().Changed(name) {
				return cmdutil.UsageErrorf(cmd, "--%s applies to waves only: add --max-in-flight N", name)
			}
		}
	}
	return nil
}

// waved reports whether the run goes in waves. A dry run writes nothing and
// waits for nothing, so it shows every workload at once.
func (o *RebalanceOptions) waved() bool {
	return o.MaxInFlight > 0 && o.DryRun == rebalance.DryRunNone
}

// waveDeadline lifts the default --timeout off a waved run: each workload
// is bounded by --progress-deadline instead, and a fleet takes longer than
// two minutes. A --timeout given on the command line still bounds the run.
func (o *RebalanceOptions) waveDeadline() {
	if o.waved() && !o.timeoutGiven {
		o.deadline = time.Now().Add(100 * 365 * 24 * time.Hour)
	}
}

// quiet reports whether progress lines are left out.
func (o *RebalanceOptions) quiet() bool {
	return o.Quiet || o.OutputFormat == "name"
}

// announce says what a run of more than a handful of workloads is about to
// do, and with -i asks before anything is written. It reports false when
// the user said no.
func (o *RebalanceOptions) announce(targets []rebalance.Target) (bool, error) {
	workloads := rebalance.DistinctWorkloads(targets)
	if len(workloads) > massThreshold && !o.Quiet || o.Interactive {
		fmt.Fprintln(o.ErrOut, o.announcement(workloads))
	}
	if !o.Interactive {
		return true, nil
	}
	for i, w := range workloads {
		if i == confirmListLimit {
			fmt.Fprintf(o.ErrOut, "  ... and %d more\n", len(workloads)-confirmListLimit)
			break
		}
		name := rbprinters.WorkloadName(w)
		if w.Namespace != "" {
			name = w.Namespace + "/" + name
		}
		fmt.Fprintln(o.ErrOut, "  "+name)
	}
	fmt.Fprint(o.ErrOut, "Do you want to continue? (y/n): ")
	answer, err := bufio.NewReader(o.In).ReadString('\n')
	if err != nil && err != io.EOF {
		return false, fmt.Errorf("reading the answer failed: %w", err)
	}
	if strings.ToLower(strings.TrimSpace(answer)) != "y" {
		fmt.Fprintln(o.ErrOut, "rebalance cancelled: nothing was written")
		return false, nil
	}
	return true, nil
}

// announcement describes a run before it writes: how many workloads of which
// kinds in how many namespaces, and how they are paced.
func (o *RebalanceOptions) announcement(workloads []rebalance.Workload) string {
	line := announcementHead(workloads, o.DryRun)
	switch {
	case o.DryRun != rebalance.DryRunNone:
	case o.waved():
		line += fmt.Sprintf(": in waves of at most %d in flight, each done when %s within %s", o.MaxInFlight, o.doneWord(), deadlineText(o.ProgressDeadline))
		if o.MaxFailures > 0 {
			line += fmt.Sprintf(", stopping after %d failure(s)", o.MaxFailures)
		}
		if o.Pause > 0 {
			line += fmt.Sprintf(", a pause of %s per slot", o.Pause)
		}
		line += "; Ctrl-C stops starting new ones"
	default:
		line += ": every trigger at once; add --max-in-flight N to go in waves, -i to confirm first"
		if need := schedulerTime(len(workloads)); o.Wait && need > o.Timeout {
			line += fmt.Sprintf("; at karmada-scheduler's pace (about %d bindings a second) the answers take about %s, longer than --timeout %s: raise --timeout, or use --max-in-flight (bounded per workload by --progress-deadline instead)",
				schedulerPace, need, o.Timeout)
		}
	}
	return line
}

// announcementHead says how many workloads of which kinds in how many
// namespaces a run is about to rebalance (or, dry, would).
func announcementHead(workloads []rebalance.Workload, dryRun rebalance.DryRun) string {
	kinds := map[string]int{}
	namespaces := map[string]bool{}
	for _, w := range workloads {
		kinds[strings.SplitN(rbprinters.WorkloadName(w), "/", 2)[0]]++
		namespaces[w.Namespace] = true
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
	}
	verb := "about to rebalance"
	if dryRun != rebalance.DryRunNone {
		verb = "dry run: would rebalance"
	}
	return fmt.Sprintf("%s %d workloads (%s) in %d namespace(s)", verb, len(workloads), strings.Join(parts, ", "), len(namespaces))
}

// schedulerPace is roughly how many bindings a second karmada-scheduler
// reschedules on a large control plane (karmada#6516, #6943).
const schedulerPace = 20

// schedulerTime estimates how long the scheduler takes to answer n triggers.
func schedulerTime(n int) time.Duration {
	return (time.Duration(n) * time.Second / schedulerPace).Round(time.Second)
}

func (o *RebalanceOptions) doneWord() string {
	if o.WaitReady {
		return "rescheduled and ready"
	}
	return "rescheduled"
}

func deadlineText(d time.Duration) string {
	if d == 0 {
		return "no deadline"
	}
	return d.String()
}

// waveProgress shows how far a waved run got: on a terminal a small
// display, redrawn in place - the counts, then the workloads in flight
// and how long each has been moving, or the approval a paused run waits
// for; elsewhere (CI, logs) one plain line every few seconds.
type waveProgress struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	quiet    bool
	// lines is how many lines the display holds now (0: none drawn).
	lines  int
	last   time.Time
	latest waves.Status
	stop   chan struct{}
	// stopped waits for the plain lines' ticker to end.
	stopped sync.WaitGroup
}

// maxMovingLines bounds the workloads in flight the display lists.
const maxMovingLines = 8

// newWaveProgress starts the progress of a run writing to w.
func newWaveProgress(w io.Writer, quiet bool) *waveProgress {
	p := &waveProgress{w: w, terminal: printers.IsTerminal(w), quiet: quiet, stop: make(chan struct{})}
	if !quiet {
		p.stopped.Add(1)
		go p.tick()
	}
	return p
}

// Update takes new counts; the terminal display is redrawn at most every
// progressInterval, and at once when the run pauses.
func (p *waveProgress) Update(s waves.Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	paused := s.Paused && !p.latest.Paused
	p.latest = s
	if p.quiet || !p.terminal {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < progressInterval && !paused {
		return
	}
	p.last = now
	p.drawLocked(now)
}

// drawLocked replaces the display with the latest counts.
func (p *waveProgress) drawLocked(now time.Time) {
	lines := progressDisplay(p.latest, now, terminalWidth(p.w))
	p.clearLocked()
	fmt.Fprint(p.w, strings.Join(lines, "\n"))
	p.lines = len(lines)
}

// clearLocked removes the display, leaving the cursor where it began.
func (p *waveProgress) clearLocked() {
	if p.lines == 0 {
		return
	}
	if p.lines > 1 {
		fmt.Fprintf(p.w, "\033[%dA", p.lines-1)
	}
	fmt.Fprint(p.w, "\r\033[J")
	p.lines = 0
}

// Notice prints line above the display: the display is cleared, the line
// written, and the display drawn again below it.
func (p *waveProgress) Notice(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	redraw := p.lines > 0
	p.clearLocked()
	fmt.Fprintln(p.w, line)
	if redraw {
		p.drawLocked(time.Now())
	}
}

// tick writes a plain line every plainProgressInterval while the run goes
// on, or redraws the terminal display every second (the time each workload
// has been moving goes on when nothing else changes).
func (p *waveProgress) tick() {
	defer p.stopped.Done()
	interval := plainProgressInterval
	if p.terminal {
		interval = time.Second
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-ticker.C:
			p.mu.Lock()
			switch {
			case p.latest.Total == 0:
			case p.terminal:
				p.drawLocked(now)
			default:
				fmt.Fprintln(p.w, progressText(p.latest, now))
			}
			p.mu.Unlock()
		}
	}
}

// Close ends the progress and clears the terminal display.
func (p *waveProgress) Close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.stopped.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
}

// progressDisplay is the terminal display of s: the counts line, then one
// line per workload in flight (at most maxMovingLines), each cut to width
// (0: no limit) so that the display can be redrawn in place.
func progressDisplay(s waves.Status, now time.Time, width int) []string {
	lines := []string{progressText(s, now)}
	if s.Paused {
		lines[0] += "; paused at a step, waiting for an approval (kubectl rebalance approve)"
	}
	for i, m := range s.Moving {
		if i == maxMovingLines {
			lines = append(lines, fmt.Sprintf("  ... and %d more in flight", len(s.Moving)-maxMovingLines))
			break
		}
		name := rbprinters.WorkloadName(m.Workload)
		if m.Workload.Namespace != "" {
			name = m.Workload.Namespace + "/" + name
		}
		lines = append(lines, fmt.Sprintf("  moving %s for %s", name, now.Sub(m.Since).Round(time.Second)))
	}
	if width > 1 {
		for i, line := range lines {
			if len(line) >= width {
				lines[i] = line[:width-1]
			}
		}
	}
	return lines
}

// terminalWidth is the width of the terminal w writes to; 0 when unknown.
func terminalWidth(w io.Writer) int {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return 0
	}
	if size := kterm.GetSize(f.Fd()); size != nil {
		return int(size.Width)
	}
	return 0
}

// progressText renders counts, rate and ETA on one line, e.g.
// "waves: 40 done, 10 in flight, 50 pending, 0 failed; 2.0/s, ETA 30s".
func progressText(s waves.Status, now time.Time) string {
	line := fmt.Sprintf("waves: %d done, %d in flight, %d pending, %d failed", s.Done, s.InFlight, s.Pending, s.Failed)
	finished := s.Done + s.Failed
	elapsed := now.Sub(s.Started)
	if finished == 0 || elapsed <= 0 {
		return line + "; rate and ETA after the first workload finishes"
	}
	rate := float64(finished) / elapsed.Seconds()
	left := s.Pending + s.InFlight
	if s.Stop != waves.StopNone {
		left = s.InFlight
	}
	eta := time.Duration(float64(left) / rate * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("%s; %.1f/s, ETA %s", line, rate, eta)
}
