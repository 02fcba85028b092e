package cmd

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// The flags every command spells the same way, with the same type: rate
// limits in karmada's words (--kube-api-qps, --kube-api-burst, as every
// Karmada component has them), --dry-run as kubectl's none|client|server,
// time flags that take a duration or a number of seconds, and member
// clusters as karmadactl's -C/--clusters. Older spellings stay accepted as
// hidden aliases (flagAlias).

// parseDurationOrSeconds reads a time flag: a Go duration (90s, 5m,
// 1h30m) or a bare number of seconds (300), as kubectl's --request-timeout
// reads it.
func parseDurationOrSeconds(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if seconds, err := strconv.ParseInt(s, 10, 64); err == nil {
		if seconds > math.MaxInt64/int64(time.Second) || seconds < math.MinInt64/int64(time.Second) {
			return 0, errors.New("it is too long: a duration can be at most about 292 years")
		}
		return time.Duration(seconds) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("give a duration such as 30s, 5m or 1h30m, or a whole number of seconds such as 300")
	}
	return d, nil
}

// durationValue is a time flag's value (parseDurationOrSeconds). It prints
// and types itself as pflag's duration does, so that help and completion
// read the same.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := parseDurationOrSeconds(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) Type() string   { return "duration" }
func (d *durationValue) String() string { return time.Duration(*d).String() }

// durationVar registers a time flag that takes a duration or seconds.
func durationVar(flags *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	flags.Var((*durationValue)(p), name, usage)
}

// wholeSeconds turns a time flag that the API counts in seconds (a ttl)
// into seconds, refusing what the API cannot hold.
func wholeSeconds(flag string, d time.Duration, example string) (int32, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("invalid --%s %s: it cannot be negative; e.g. --%s %s", flag, d, flag, example)
	case d%time.Second != 0:
		return 0, fmt.Errorf("invalid --%s %s: it is counted in whole seconds; e.g. --%s %s", flag, d, flag, example)
	case d/time.Second > math.MaxInt32:
		return 0, fmt.Errorf("invalid --%s %s: at most %d seconds (about 68 years); e.g. --%s %s", flag, d, math.MaxInt32, flag, example)
	}
	return int32(d / time.Second), nil
}

// Dry run modes, as kubectl spells them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// addDryRunFlag registers --dry-run=none|client|server; --dry-run alone
// means client, as it always has in this plugin.
func addDryRunFlag(cmd *cobra.Command, p *string, usage string) {
	cmd.Flags().StringVar(p, "dry-run", dryRunNone, `Must be "none", "server", or "client" (--dry-run alone means client). `+usage)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = dryRunClient
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{dryRunNone, dryRunClient, dryRunServer}, cobra.ShellCompDirectiveNoFileComp))
}

// dryRunMode reads --dry-run. The boolean spellings that kubectl (and this
// plugin's failback daemon) once took still work, with a notice on errOut,
// as kubectl's GetDryRunStrategy gives it.
func dryRunMode(value string, errOut io.Writer) (string, error) {
	switch strings.TrimSpace(value) {
	case dryRunNone, "":
		return dryRunNone, nil
	case dryRunClient:
		return dryRunClient, nil
	case dryRunServer:
		return dryRunServer, nil
	}
	if b, err := strconv.ParseBool(value); err == nil {
		mode := dryRunNone
		if b {
			mode = dryRunClient
		}
		fmt.Fprintf(errOut, "Flag --dry-run=%s has been deprecated, use --dry-run=%s instead\n", value, mode)
		return mode, nil
	}
	return "", fmt.Errorf("invalid --dry-run %q: use none, client or server (e.g. --dry-run=client; --dry-run alone means client)", value)
}

// addRateLimitFlags registers --kube-api-qps and --kube-api-burst, with
// --qps and --burst as their older, deprecated spellings.
func addRateLimitFlags(cmd *cobra.Command, qps *float32, burst *int, qpsUsage, burstUsage string) {
	flags := cmd.Flags()
	flags.Float32Var(qps, "kube-api-qps", *qps, qpsUsage)
	flags.IntVar(burst, "kube-api-burst", *burst, burstUsage)
	addFlagAlias(flags, "kube-api-qps", "qps", true)
	addFlagAlias(flags, "kube-api-burst", "burst", true)
}

// validateRateLimits checks the rate limit flags.
func validateRateLimits(qps float32, burst int) error {
	if qps <= 0 || burst <= 0 {
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be greater than zero, got %g and %d; e.g. --kube-api-qps 50 --kube-api-burst 100", qps, burst)
	}
	return nil
}

// addClustersFlag registers karmadactl's -C/--clusters, a list of member
// clusters, into p.
func addClustersFlag(flags *pflag.FlagSet, p *[]string, usage string) {
	flags.StringSliceVarP(p, "clusters", "C", *p, usage)
}

// aliasAnnotation marks a flag that is another spelling of the flag it names.
const aliasAnnotation = "kubectl-rebalance.io/alias-of"

// spelledValue remembers what was given to one spelling of a flag whose
// spellings share one value, so that two spellings given different values
// are caught (checkFlagAliases) instead of the last one silently winning.
type spelledValue struct {
	pflag.Value
	given, parsed string
}

func (v *spelledValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	v.given, v.parsed = s, v.Value.String()
	return nil
}

// addFlagAlias makes alias another spelling of the registered flag
// canonical, sharing its value, hidden from help. A deprecated alias prints
// pflag's one-line notice when used (on stderr: see useStderrForFlagNotices);
// one kept for another program's arguments (karmada-descheduler's) does not.
// A list flag's spellings add to the same list.
func addFlagAlias(flags *pflag.FlagSet, canonical, alias string, deprecated bool) {
	c := flags.Lookup(canonical)
	if c == nil {
		panic("alias of an unknown flag --" + canonical)
	}
	value := c.Value
	if _, list := value.(pflag.SliceValue); !list {
		if wrapped, ok := value.(*spelledValue); ok {
			// A second alias of the flag: each spelling remembers its own.
			value = wrapped.Value
		} else {
			c.Value = &spelledValue{Value: value}
		}
		value = &spelledValue{Value: value}
	}
	flags.AddFlag(&pflag.Flag{
		Name:        alias,
		Usage:       "The same as --" + canonical + ".",
		Value:       value,
		DefValue:    c.DefValue,
		NoOptDefVal: c.NoOptDefVal,
		Hidden:      true,
		Annotations: map[string][]string{aliasAnnotation: {canonical}},
	})
	if deprecated {
		_ = flags.MarkDeprecated(alias, "use --"+canonical+" instead")
	}
}

// checkFlagAliases refuses two spellings of one flag given different
// values.
func checkFlagAliases(flags *pflag.FlagSet) error {
	var err error
	flags.Visit(func(a *pflag.Flag) {
		names := a.Annotations[aliasAnnotation]
		if err != nil || len(names) == 0 {
			return
		}
		c := flags.Lookup(names[0])
		av, aok := a.Value.(*spelledValue)
		cv, cok := c.Value.(*spelledValue)
		if !c.Changed || !aok || !cok || av.parsed == cv.parsed {
			return
		}
		err = fmt.Errorf("--%s %s and --%s %s disagree: they are two names of one setting; give only --%s", c.Name, cv.given, a.Name, av.given, c.Name)
	})
	return err
}

// flagError is the flag error function of every command: pflag's and
// strconv's wording becomes a sentence that names the flag and shows a
// valid use.
func flagError(c *cobra.Command, err error) error {
	return withExitCode(ExitError, cmdutil.UsageErrorf(c, "%s", explainFlagError(c, err)))
}

func explainFlagError(c *cobra.Command, err error) string {
	var (
		notExist *pflag.NotExistError
		required *pflag.ValueRequiredError
		invalid  *pflag.InvalidValueError
		syntax   *pflag.InvalidSyntaxError
	)
	switch {
	case errors.As(err, &notExist):
		if shorthands := notExist.GetSpecifiedShortnames(); shorthands != "" {
			return fmt.Sprintf("unknown flag -%s in -%s for %q", notExist.GetSpecifiedName()[:1], shorthands, c.CommandPath())
		}
		name := notExist.GetSpecifiedName()
		msg := fmt.Sprintf("unknown flag --%s for %q", name, c.CommandPath())
		if hint := suggestFlags(c.Flags(), c.InheritedFlags(), name); len(hint) > 0 {
			msg += "; did you mean " + strings.Join(hint, " or ") + "?"
		}
		return msg
	case errors.As(err, &required):
		f := required.GetFlag()
		return fmt.Sprintf("--%s needs a value, e.g. --%s %s", f.Name, f.Name, flagExample(f))
	case errors.As(err, &invalid):
		f := invalid.GetFlag()
		return fmt.Sprintf("invalid --%s %q: %s", f.Name, invalid.GetValue(), valueAdvice(f, invalid.Unwrap()))
	case errors.As(err, &syntax):
		return fmt.Sprintf("cannot read the flag %s: a flag is -x or --name, with its value after a space or '='", syntax.GetSpecifiedFlag())
	}
	return err.Error()
}

// valueAdvice says what a flag of f's type takes. The parsers' own words
// (strconv.ParseInt, ParseBool) say nothing a user can act on.
func valueAdvice(f *pflag.Flag, cause error) string {
	switch f.Value.Type() {
	case "bool":
		return fmt.Sprintf("give true or false, e.g. --%s=false", f.Name)
	case "int", "int32", "int64", "uint", "uint32", "uint64", "Level":
		// Level: klog's -v.
		return fmt.Sprintf("give a whole number, e.g. --%s %s", f.Name, flagExample(f))
	case "float32", "float64":
		return fmt.Sprintf("give a number, e.g. --%s %s", f.Name, flagExample(f))
	case "duration":
		value := f.Value
		if spelled, ok := value.(*spelledValue); ok {
			value = spelled.Value
		}
		if _, ours := value.(*durationValue); ours && cause != nil {
			return cause.Error() + fmt.Sprintf(", e.g. --%s %s", f.Name, flagExample(f))
		}
		return fmt.Sprintf("give a duration such as 30s, 5m or 1h30m, e.g. --%s %s", f.Name, flagExample(f))
	}
	if cause != nil && !strings.Contains(cause.Error(), "strconv.") {
		return cause.Error()
	}
	return "see --help for the values it takes"
}

// flagExample is a value to show in a message about f: its default when
// that is a useful one, or a typical value of its type.
func flagExample(f *pflag.Flag) string {
	def := f.DefValue
	switch f.Value.Type() {
	case "bool":
		return "true"
	case "int", "int32", "int64", "uint", "uint32", "uint64", "float32", "float64", "Level":
		if def != "" && def != "0" {
			return def
		}
		return "10"
	case "duration":
		if def != "" && def != "0s" {
			return def
		}
		return "5m"
	}
	if f.NoOptDefVal == "" && def != "" && def != "[]" && !strings.ContainsAny(def, " /") {
		return def
	}
	return "VALUE"
}

// suggestFlags names the visible flags of flags whose names are close to
// name (a typo, a missing or extra letter, the singular of a list), or that
// name starts; a hidden alias close to name suggests its flag. The
// command's own flags come before those it inherits.
func suggestFlags(flags, inherited *pflag.FlagSet, name string) []string {
	type candidate struct {
		text     string
		distance int
		// inherited: a flag every command takes (the kubeconfig's), less
		// likely meant than the command's own.
		inherited bool
	}
	var found []candidate
	seen := map[string]bool{}
	flags.VisitAll(func(f *pflag.Flag) {
		target := f
		if canonical := f.Annotations[aliasAnnotation]; len(canonical) > 0 {
			target = flags.Lookup(canonical[0])
		} else if f.Hidden {
			return
		}
		d := levenshtein(name, f.Name)
		close := d <= 2 && len(name) > 2 || len(name) >= 4 && strings.HasPrefix(f.Name, name)
		if !close || target == nil || seen[target.Name] {
			return
		}
		seen[target.Name] = true
		text := "--" + target.Name
		if target.Shorthand != "" {
			text = "-" + target.Shorthand + "/--" + target.Name
		}
		found = append(found, candidate{text: text, distance: d, inherited: inherited != nil && inherited.Lookup(target.Name) != nil})
	})
	slices.SortStableFunc(found, func(a, b candidate) int {
		if a.inherited != b.inherited {
			if a.inherited {
				return 1
			}
			return -1
		}
		return a.distance - b.distance
	})
	var out []string
	for i := 0; i < len(found) && i < 3; i++ {
		out = append(out, found[i].text)
	}
	return out
}

// levenshtein is the edit distance between two flag names.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// useStderrForFlagNotices sends pflag's notices (a deprecated flag used)
// of every command in the tree to errOut. Cobra prints them on the
// command's output, which is stdout, where scripts read the results.
func useStderrForFlagNotices(root *cobra.Command, errOut io.Writer) {
	root.Flags().SetOutput(errOut)
	for _, sub := range root.Commands() {
		useStderrForFlagNotices(sub, errOut)
	}
}

// maxArgs refuses more than n arguments (what names them) and says what to
// do next, instead of cobra's "accepts at most 1 arg(s)".
func maxArgs(n int, what, next string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) <= n {
			return nil
		}
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = strconv.Quote(a)
		}
		switch n {
		case 0:
			return withExitCode(ExitError, cmdutil.UsageErrorf(c, "%s takes no arguments, got %s; %s", c.Name(), strings.Join(quoted, " "), next))
		}
		return withExitCode(ExitError, cmdutil.UsageErrorf(c, "%s takes at most %d %s, got %d (%s); %s", c.Name(), n, what, len(args), strings.Join(quoted, " "), next))
	}
}

// checkBudgetFlags reads --max-surge and --max-unavailable as a number or
// a percentage, so that a mistyped one is explained in words rather than
// by the parser of Kubernetes' int-or-string type.
func checkBudgetFlags(h *handoverOptions) error {
	for _, f := range []struct{ name, value string }{{"max-surge", h.MaxSurge}, {"max-unavailable", h.MaxUnavailable}} {
		v := strings.TrimSpace(f.value)
		number, _ := strings.CutSuffix(v, "%")
		n, err := strconv.Atoi(number)
		switch {
		case err != nil || number == "":
			return fmt.Errorf("invalid --%s %q: give a number of replicas (e.g. --%s 1) or a percentage of the workload's replicas (e.g. --%s 25%%)", f.name, f.value, f.name, f.name)
		case n < 0:
			return fmt.Errorf("invalid --%s %q: it cannot be negative; give 0 or more replicas (e.g. --%s 1) or a percentage (e.g. --%s 25%%)", f.name, f.value, f.name, f.name)
		}
	}
	return nil
}
