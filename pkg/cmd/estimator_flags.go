package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
)

// estimatorOptions are the flags that say how karmada-scheduler sizes the
// members, shared by plan, kubectl rebalance (--clusters, --changed-only,
// the reports) and failback.
type estimatorOptions struct {
	// Estimator is --scheduler-estimator: auto, enabled or disabled.
	Estimator string
	// MemberKubeconfig is --member-kubeconfig: a kubeconfig with a context
	// per member cluster, named like it; "" reads the contexts of the
	// kubeconfig in use.
	MemberKubeconfig string
	// HostContext is --host-context: the kubeconfig context of the cluster
	// that runs Karmada's components, where auto detection reads
	// karmada-scheduler's flags and the estimators' Services.
	HostContext string
}

const (
	schedulerEstimatorFlag = "scheduler-estimator"
	memberKubeconfigFlag   = "member-kubeconfig"
	hostContextFlag        = "host-context"
	// defaultHostContext is what local-up-karmada names the host cluster's
	// context.
	defaultHostContext = "karmada-host"
)

// addEstimatorFlags registers --scheduler-estimator and --member-kubeconfig.
func addEstimatorFlags(cmd *cobra.Command, o *estimatorOptions) {
	if o.Estimator == "" {
		o.Estimator = string(predict.EstimatorAuto)
	}
	if o.HostContext == "" {
		o.HostContext = defaultHostContext
	}
	flags := cmd.Flags()
	flags.StringVar(&o.Estimator, schedulerEstimatorFlag, o.Estimator,
		`Whether karmada-scheduler consults a karmada-scheduler-estimator per member (--enable-scheduler-estimator): "auto" looks for the estimators' Services in karmada-system of the Karmada apiserver and, through --host-context, for karmada-scheduler's flags and the Services in the host cluster; "enabled" or "disabled" say so. With estimators, placements that depend on free capacity are predicted from each member's nodes and pods, with Karmada's estimator code.`)
	flags.StringVar(&o.MemberKubeconfig, memberKubeconfigFlag, o.MemberKubeconfig,
		"A kubeconfig with a context per member cluster, named like the cluster (local-up-karmada's members.config), through which members the Karmada cluster proxy does not reach (Pull members) are read; the kubeconfig in use when empty.")
	flags.StringVar(&o.HostContext, hostContextFlag, o.HostContext,
		"With --scheduler-estimator=auto, the kubeconfig context of the cluster that runs Karmada's components (local-up-karmada's karmada-host), where karmada-scheduler's Deployment and the estimators' Services are read; skipped when the kubeconfig has no such context.")
	_ = cmd.RegisterFlagCompletionFunc(schedulerEstimatorFlag, cobra.FixedCompletions([]string{"auto", "enabled", "disabled"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename(memberKubeconfigFlag)
}

// validateEstimator checks --scheduler-estimator.
func (o estimatorOptions) validateEstimator() error {
	switch predict.EstimatorMode(o.Estimator) {
	case predict.EstimatorAuto, predict.EstimatorEnabled, predict.EstimatorDisabled:
		return nil
	}
	return fmt.Errorf("invalid --scheduler-estimator %q: use auto, enabled or disabled", o.Estimator)
}
