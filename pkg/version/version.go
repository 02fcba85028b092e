// Package version owns the build information of the binary (version, commit,
// date), which goreleaser injects with -ldflags; `kubectl rebalance version`
// and the user agents read it.
package version

import (
	"runtime"
	"runtime/debug"
)

// These are set at link time, e.g.
// -X github.com/kubectl-rebalance/kubectl-rebalance/pkg/version.version=v0.1.0
var (
	version = "v0.0.0-dev"
	commit  = "unknown"
	date    = "unknown"
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build information of the running binary. A binary built by
// `go install module@vX` was not stamped, but Go recorded the module version.
func Get() Info {
	v := version
	if v == "v0.0.0-dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return Info{
		Version:   v,
		Commit:    commit,
		Date:      date,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}
