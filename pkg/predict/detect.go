package predict

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SchedulerDeployment is the name standard installs give karmada-scheduler's
// Deployment in the host cluster's karmada-system.
const SchedulerDeployment = "karmada-scheduler"

// hostEstimators is what the host cluster (where standard installs run
// Karmada's components) says about the estimators.
type hostEstimators struct {
	// flags tells whether karmada-scheduler's Deployment was read: enabled
	// is then its --enable-scheduler-estimator.
	flags, enabled bool
	// services names the clusters with an estimator Service.
	services []string
}

// readHost reads karmada-scheduler's flags and the estimators' Services in
// the host cluster. What the client may not read counts as not seen.
func readHost(ctx context.Context, host kubernetes.Interface) (hostEstimators, error) {
	var out hostEstimators
	d, err := host.AppsV1().Deployments(EstimatorNamespace).Get(ctx, SchedulerDeployment, metav1.GetOptions{})
	switch {
	case err == nil:
		out.flags = true
		out.enabled = schedulerUsesEstimator(d)
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err):
	default:
		return out, fmt.Errorf("read deployment %s/%s in the host cluster (looking for --enable-scheduler-estimator; use --scheduler-estimator=enabled or disabled to skip): %w", EstimatorNamespace, SchedulerDeployment, err)
	}
	services, err := estimatorServiceNames(ctx, host)
	if err != nil {
		return out, fmt.Errorf("in the host cluster: %w", err)
	}
	out.services = services
	return out, nil
}

// schedulerUsesEstimator reads --enable-scheduler-estimator from the
// command and arguments of karmada-scheduler's containers (the last one
// given wins, as with any Go flag); absent means off, its default.
func schedulerUsesEstimator(d *appsv1.Deployment) bool {
	enabled := false
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
			value, ok := strings.CutPrefix(arg, "--enable-scheduler-estimator")
			switch {
			case !ok:
			case value == "" || value == "=true" || value == "=True" || value == "=1":
				enabled = true
			case strings.HasPrefix(value, "="):
				enabled = false
			}
		}
	}
	return enabled
}

// estimatorServiceNames lists the Services in karmada-system and returns
// the cluster names of those named like a karmada-scheduler-estimator's. A
// namespace the client may not list counts as holding none.
func estimatorServiceNames(ctx context.Context, kube kubernetes.Interface) ([]string, error) {
	list, err := kube.CoreV1().Services(EstimatorNamespace).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list services in %s (looking for karmada-scheduler-estimator; use --scheduler-estimator=enabled or disabled to skip): %w", EstimatorNamespace, err)
	}
	var out []string
	for _, svc := range list.Items {
		if name, ok := strings.CutPrefix(svc.Name, EstimatorServicePrefix); ok {
			out = append(out, name)
		}
	}
	return out, nil
}
