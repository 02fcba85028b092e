// Package version holds the build information that goreleaser injects with -ldflags.
package version

import "runtime"

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

// Get returns the build information of the running binary.
func Get() Info {
	return Info{
		Version:   version,
		Commit:    commit,
		Date:      date,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}
