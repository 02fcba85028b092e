// Command kubectl-rebalance is a kubectl and karmadactl plugin that rebalances
// workloads across the member clusters of a Karmada control plane.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/memlimit"
)

func main() {
	// A soft memory limit, unless GOGC or GOMEMLIMIT is set: a run over a
	// fleet keeps a smaller heap at its peak (see pkg/memlimit).
	memlimit.ApplyDefault()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(cmd.Execute(cmd.NewCmdRebalance(streams), streams))
}
