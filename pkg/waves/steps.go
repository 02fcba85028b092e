package waves

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Step is one step of a run with approval gates (--steps): the run moves
// workloads until Count of them, or Percent of all of them, are done,
// then waits for a person to approve the next step.
type Step struct {
	// Count is a number of workloads; zero when Percent is given.
	Count int
	// Percent is a share of the run's workloads, 1 to 100.
	Percent int
}

func (s Step) String() string {
	if s.Percent > 0 {
		return strconv.Itoa(s.Percent) + "%"
	}
	return strconv.Itoa(s.Count)
}

// StepsExample is a valid --steps, for error messages and help.
const StepsExample = "--steps 1,10%,100%"

// ParseSteps reads --steps: counts of workloads and percentages of them,
// separated by commas, each larger than the one before of its kind.
func ParseSteps(value string) ([]Step, error) {
	if strings.TrimSpace(value) == "" {
		return nil, fmt.Errorf("invalid --steps %q: give at least one step, a count of workloads or a percentage of them; e.g. %s", value, StepsExample)
	}
	var steps []Step
	lastCount, lastPercent := 0, 0
	for _, part := range strings.Split(value, ",") {
		part = strings.TrimSpace(part)
		var step Step
		if number, ok := strings.CutSuffix(part, "%"); ok {
			n, err := strconv.Atoi(number)
			if err != nil || n < 1 || n > 100 {
				return nil, fmt.Errorf("invalid --steps %q: %q is not a percentage from 1%% to 100%%; e.g. %s", value, part, StepsExample)
			}
			if n <= lastPercent {
				return nil, fmt.Errorf("invalid --steps %q: the steps must grow, and %s does not come after %d%%; e.g. %s", value, part, lastPercent, StepsExample)
			}
			step.Percent, lastPercent = n, n
		} else {
			n, err := strconv.Atoi(part)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("invalid --steps %q: %q is neither a count of workloads (1 or more) nor a percentage of them (such as 10%%); e.g. %s", value, part, StepsExample)
			}
			if n <= lastCount {
				return nil, fmt.Errorf("invalid --steps %q: the steps must grow, and %s does not come after %d; e.g. %s", value, part, lastCount, StepsExample)
			}
			step.Count, lastCount = n, n
		}
		steps = append(steps, step)
	}
	return steps, nil
}

// FormatSteps writes steps as --steps takes them.
func FormatSteps(steps []Step) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// Boundaries turns steps into the numbers of workloads, out of total, after
// which a run waits for approval: a percentage rounds up (10% of 5 is 1), a
// boundary at or past the last workload is no gate (the run ends there),
// and steps that land on the same workload make one gate. Ascending.
func Boundaries(steps []Step, total int) []int {
	var out []int
	for _, s := range steps {
		n := s.Count
		if s.Percent > 0 {
			n = (s.Percent*total + 99) / 100
		}
		if n >= 1 && n < total {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
