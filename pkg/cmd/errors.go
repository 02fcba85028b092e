package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// apiError rewrites an error from the API server, or from trying to reach
// it, into a message that says what went wrong and what to do.
func (o *RebalanceOptions) apiError(err error) error {
	if err == nil {
		return nil
	}
	var request *rebalance.RequestError
	switch {
	case apierrors.IsForbidden(err) && errors.As(err, &request):
		where := ""
		if request.Namespace != "" {
			where = fmt.Sprintf(" in namespace %q", request.Namespace)
		}
		return fmt.Errorf("not allowed to %s %s%s with context %q: %s; ask an administrator of the Karmada control plane to grant %q on %s",
			request.Verb, request.Resource, where, o.contextName(), statusMessage(err), request.Verb, request.Resource)
	case apierrors.IsForbidden(err):
		// The API server's message names the user, the verb and the resource.
		return fmt.Errorf("not allowed with context %q: %s; ask an administrator of the Karmada control plane for that permission",
			o.contextName(), statusMessage(err))
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s (context %q) did not accept the credentials: %s; renew them in the kubeconfig or choose another context with --karmada-context",
			o.serverURL(), o.contextName(), statusMessage(err))
	case isConnectionError(err):
		return fmt.Errorf("cannot reach the API server at %s (context %q): %v; check that the Karmada apiserver is up and that --kubeconfig and --karmada-context point at it",
			o.serverURL(), o.contextName(), err)
	}
	return err
}

// inputError rewrites an error about the workloads asked for. cli-runtime's
// builder reports most of these as plain strings, so they are recognised by
// their wording.
func (o *RebalanceOptions) inputError(err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "the server doesn't have a resource type "):
		kind := strings.TrimPrefix(msg, "the server doesn't have a resource type ")
		return fmt.Errorf("unknown resource type %s: the API server behind context %q does not serve it; run 'kubectl api-resources --context %s' to list the types it serves",
			kind, o.contextName(), o.contextName())
	case strings.HasPrefix(msg, "error parsing "):
		return fmt.Errorf("cannot parse %s; fix the file and run the command again", strings.TrimPrefix(msg, "error parsing "))
	case strings.HasPrefix(msg, "unable to decode ") && strings.Contains(msg, "Object 'Kind' is missing"):
		// The builder quotes the whole object; the file name is what helps.
		source, _, _ := strings.Cut(strings.TrimPrefix(msg, "unable to decode "), ": ")
		return fmt.Errorf("cannot read %s: an object in it has no kind; give every manifest its apiVersion and kind", source)
	case msg == "a resource cannot be retrieved by name across all namespaces":
		return errors.New("workloads named one by one cannot be combined with --all-namespaces: give their namespace with -n, or select them with -l or --all")
	case msg == "namespace may not be empty when retrieving a resource by name":
		return errors.New("the workload type is namespaced but no namespace was given: add -n NAMESPACE")
	case strings.Contains(msg, "resource(s) were provided, but no name was specified"):
		return errors.New("a resource type alone selects nothing: add names, -l SELECTOR or --all (e.g. kubectl rebalance deployments --all)")
	case strings.Contains(msg, "you must provide one or more resources"):
		return errors.New("name the workloads to rebalance: give TYPE/NAME, TYPE NAME..., TYPE -l SELECTOR, TYPE --all or -f FILENAME")
	}
	return o.apiError(err)
}

// kubeconfigError rewrites a problem with the kubeconfig itself.
func (o *RebalanceOptions) kubeconfigError(err error) error {
	return fmt.Errorf("cannot use the kubeconfig: %v; check --kubeconfig and --karmada-context (or $KUBECONFIG)", err)
}

// explainMissingBinding tells why a workload has no binding: either the
// template does not exist, or no policy has propagated it. It costs one GET,
// paid only for workloads whose binding is missing.
func (o *RebalanceOptions) explainMissingBinding(mapper meta.RESTMapper) func(context.Context, rebalance.Target) string {
	// One client for all the workloads, made only if one needs it.
	dynamicClient := sync.OnceValues(o.factory.DynamicClient)
	return func(ctx context.Context, t rebalance.Target) string {
		w := t.Workload
		gv, err := schema.ParseGroupVersion(w.APIVersion)
		if err != nil {
			return ""
		}
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: w.Kind}, gv.Version)
		if err != nil {
			return ""
		}
		client, err := dynamicClient()
		if err != nil {
			return ""
		}
		resource := client.Resource(mapping.Resource)
		name := rbprinters.WorkloadName(w)
		if w.Namespace != "" {
			_, err = resource.Namespace(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		} else {
			_, err = resource.Get(ctx, w.Name, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err) && w.Namespace != "":
			return fmt.Sprintf("%s does not exist in namespace %s", name, w.Namespace)
		case apierrors.IsNotFound(err):
			return name + " does not exist"
		case err == nil:
			return name + " exists, but no PropagationPolicy or ClusterPropagationPolicy has propagated it yet"
		}
		return ""
	}
}

// statusMessage returns the API server's own message of an error.
func statusMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// isConnectionError reports errors of the network rather than of the API.
func isConnectionError(err error) bool {
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err)
}
