// Command test-matrix runs the core end-to-end set on every Karmada version
// the repository pins (test/controlplane for the default one,
// test/controlplane/karmada-<version> for the others) and prints a pass/fail
// table, version by test. `make test-matrix` runs it.
//
// For each version it builds the control plane (hack/build-controlplane.sh,
// a no-op when up to date), then runs the tests package by package, each
// package on a control plane of its own, with KARMADA_VERSION set so that the
// harness starts that version. Logs go to _output/matrix/<version>/.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// check is one row of the table: a Go test in an e2e package, or a command.
type check struct {
	row     string
	pkg     string   // Go package of the test; empty for a command
	test    string   // Go test name
	command []string // a command to run instead of a test
}

// coreSet is the core end-to-end set: the seed tutorial (as the demo, through
// the plugin, and as raw API calls), a batch with a missing workload, a
// recorded run with a TTL, the descheduler example, what the plugin detects
// of the server, the make-before-break seed move, and plan accuracy once
// that test exists.
func coreSet() []check {
	set := []check{
		{row: "seed tutorial (make demo)", command: []string{"go", "run", "./hack/demo"}},
		{row: "seed tutorial (raw API)", pkg: "./test/e2e", test: "TestControlPlaneSmoke"},
		{row: "rebalance one deployment", pkg: "./test/e2e", test: "TestRebalanceSingleDeployment"},
		{row: "batch with a missing workload", pkg: "./test/e2e", test: "TestRebalanceBatch"},
		{row: "recorded run with TTL", pkg: "./test/e2e/recorded", test: "TestRecordTTL"},
		{row: "recorded + TTL with Karmada's controller", pkg: "./test/e2e/recorded/withcontroller", test: "TestCoexistWithTheController"},
		{row: "server-side run", pkg: "./test/e2e/recorded/withcontroller", test: "TestServerSideWithTheController"},
		{row: "Karmada's controller: ttl deletion by release", pkg: "./test/e2e/recorded/withcontroller", test: "TestControllerTTLByRelease"},
		{row: "descheduler example", pkg: "./test/e2e/deschedule", test: "TestDescheduleMovesReplicasElsewhere"},
		{row: "version detection", pkg: "./test/e2e", test: "TestKarmadaVersionDetected"},
		{row: "affinity group on rebalance", pkg: "./test/e2e", test: "TestAffinityGroupOnRebalance"},
		{row: "make-before-break seed move (one write and a warning on v1.12)", pkg: "./test/e2e/handover", test: "TestSeedRebalanceBackKeepsReplicasReady"},
	}
	// The plan e2e tests (prediction against the real scheduler) join the
	// set when they exist.
	for _, c := range findTests("test/e2e", regexp.MustCompile(`^TestPlan`)) {
		set = append(set, check{row: "plan: " + c.test, pkg: c.pkg, test: c.test})
	}
	return set
}

func main() {
	var versionList string
	var build bool
	flag.StringVar(&versionList, "versions", "", "comma-separated Karmada versions (default: every pinned version)")
	flag.BoolVar(&build, "build", true, "build each version's control plane first (no-op when up to date)")
	only := flag.String("checks", "", "run only the checks whose row or test name matches this regular expression")
	flag.Parse()

	versions := pinnedVersions()
	if versionList != "" {
		versions = strings.Split(versionList, ",")
	}
	checks := coreSet()
	if *only != "" {
		re := regexp.MustCompile(*only)
		var picked []check
		for _, c := range checks {
			if re.MatchString(c.row) || (c.test != "" && re.MatchString(c.test)) {
				picked = append(picked, c)
			}
		}
		checks = picked
	}
	results := map[string]map[string]string{} // version -> row -> result
	for _, v := range versions {
		results[v] = runVersion(v, checks, build)
	}
	printTable(os.Stdout, versions, checks, results)
	for _, v := range versions {
		for _, r := range results[v] {
			if r != "PASS" && r != "n/a" {
				os.Exit(1)
			}
		}
	}
}

// pinnedVersions lists the default version and every test/controlplane/karmada-* module, oldest first.
func pinnedVersions() []string {
	versions := []string{harness.DefaultKarmadaVersion}
	dirs, _ := filepath.Glob("test/controlplane/karmada-v*")
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			versions = append(versions, strings.TrimPrefix(filepath.Base(d), "karmada-"))
		}
	}
	sort.Slice(versions, func(i, j int) bool { return versionLess(versions[i], versions[j]) })
	return versions
}

func versionLess(a, b string) bool {
	pa, pb := numbers(a), numbers(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return false
}

func numbers(v string) [3]int {
	var n [3]int
	_, _ = fmt.Sscanf(strings.TrimPrefix(v, "v"), "%d.%d.%d", &n[0], &n[1], &n[2])
	return n
}

// env is the environment of one version's build and tests. Another version
// than the default never uses $KUBECTL_REBALANCE_CONTROLPLANE (which points
// at the default build); the harness finds _output/controlplane-<version>.
func env(version string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, harness.VersionEnv+"=") {
			continue
		}
		if version != harness.DefaultKarmadaVersion && strings.HasPrefix(kv, harness.AssetsEnv+"=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, harness.VersionEnv+"="+version)
}

func runVersion(version string, checks []check, build bool) map[string]string {
	res := map[string]string{}
	logs := filepath.Join("_output", "matrix", version)
	if err := os.MkdirAll(logs, 0o755); err != nil {
		fatal(err)
	}
	// The default build may be someone else's (KUBECTL_REBALANCE_CONTROLPLANE): use it as it is.
	external := version == harness.DefaultKarmadaVersion && os.Getenv(harness.AssetsEnv) != ""
	if build && !external {
		fmt.Fprintf(os.Stderr, "== %s: building the control plane (log: %s/build.log)\n", version, logs)
		if err := runLogged(filepath.Join(logs, "build.log"), env(version), "hack/build-controlplane.sh"); err != nil {
			fmt.Fprintf(os.Stderr, "== %s: build failed: %v\n", version, err)
			for _, c := range checks {
				res[c.row] = "BUILD FAILED"
			}
			return res
		}
	}

	// One go test per package: one control plane for all its checks.
	byPkg := map[string][]check{}
	var pkgs []string
	for _, c := range checks {
		if c.pkg == "" {
			continue
		}
		if _, ok := byPkg[c.pkg]; !ok {
			pkgs = append(pkgs, c.pkg)
		}
		byPkg[c.pkg] = append(byPkg[c.pkg], c)
	}
	for _, c := range checks {
		if c.command == nil {
			continue
		}
		log := filepath.Join(logs, logName(c.row)+".log")
		fmt.Fprintf(os.Stderr, "== %s: %s (log: %s)\n", version, c.row, log)
		start := time.Now()
		if err := runLogged(log, env(version), c.command[0], c.command[1:]...); err != nil {
			res[c.row] = "FAIL"
		} else {
			res[c.row] = "PASS"
		}
		fmt.Fprintf(os.Stderr, "== %s: %s: %s (%s)\n", version, c.row, res[c.row], time.Since(start).Round(time.Second))
	}
	for _, pkg := range pkgs {
		var names []string
		for _, c := range byPkg[pkg] {
			names = append(names, c.test)
		}
		log := filepath.Join(logs, logName(pkg)+".log")
		fmt.Fprintf(os.Stderr, "== %s: go test %s -run %s (log: %s)\n", version, pkg, strings.Join(names, "|"), log)
		start := time.Now()
		outcomes := runTests(log, env(version), pkg, names)
		for _, c := range byPkg[pkg] {
			res[c.row] = outcomes[c.test]
			fmt.Fprintf(os.Stderr, "== %s: %s: %s\n", version, c.row, res[c.row])
		}
		fmt.Fprintf(os.Stderr, "== %s: %s done in %s\n", version, pkg, time.Since(start).Round(time.Second))
	}
	return res
}

// runTests runs the named tests of one package and returns each one's
// outcome: PASS, FAIL, SKIP, or n/a when the package has no such test.
func runTests(logPath string, environ []string, pkg string, names []string) map[string]string {
	outcomes := map[string]string{}
	args := []string{"test", "-count=1", "-p", "1", "-timeout", "30m", "-json", "-run", "^(" + strings.Join(names, "|") + ")$", pkg}
	var out bytes.Buffer
	err := runTo(logPath, &out, environ, "go", args...)
	scanner := bufio.NewScanner(&out)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var ev struct{ Action, Test string }
		if json.Unmarshal(scanner.Bytes(), &ev) != nil || ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue
		}
		switch ev.Action {
		case "pass":
			outcomes[ev.Test] = "PASS"
		case "fail":
			outcomes[ev.Test] = "FAIL"
		case "skip":
			outcomes[ev.Test] = "SKIP"
		}
	}
	for _, n := range names {
		if _, ok := outcomes[n]; !ok {
			if err != nil {
				// The package failed before the test ran (control plane start, build).
				outcomes[n] = "FAIL"
			} else {
				outcomes[n] = "n/a"
			}
		}
	}
	return outcomes
}

// runLogged runs a command with its output into logPath.
func runLogged(logPath string, environ []string, name string, args ...string) error {
	return runTo(logPath, nil, environ, name, args...)
}

// runTo runs a command under nice with stdout and stderr into logPath, and
// stdout also into capture when it is not nil.
func runTo(logPath string, capture io.Writer, environ []string, name string, args ...string) error {
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.Env = environ
	cmd.Stdout, cmd.Stderr = f, f
	if capture != nil {
		cmd.Stdout = io.MultiWriter(f, capture)
	}
	return cmd.Run()
}

func printTable(w io.Writer, versions []string, checks []check, results map[string]map[string]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprint(tw, "CHECK")
	for _, v := range versions {
		fmt.Fprintf(tw, "\tKARMADA %s", v)
	}
	fmt.Fprintln(tw)
	for _, c := range checks {
		fmt.Fprint(tw, c.row)
		for _, v := range versions {
			fmt.Fprintf(tw, "\t%s", results[v][c.row])
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9]+`)

func logName(s string) string {
	return strings.Trim(unsafeChars.ReplaceAllString(s, "-"), "-")
}

// findTests returns the tests whose names match re in the Go test files under dir.
func findTests(dir string, re *regexp.Regexp) []check {
	var found []check
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, m := range decl.FindAllSubmatch(data, -1) {
			if re.Match(m[1]) {
				found = append(found, check{pkg: "./" + filepath.Dir(path), test: string(m[1])})
			}
		}
		return nil
	})
	return found
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
