// Command kubectl-rebalance is a kubectl and karmadactl plugin that rebalances
// workloads across the member clusters of a Karmada control plane.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(cmd.Execute(cmd.NewCmdRebalance(streams), streams))
}
