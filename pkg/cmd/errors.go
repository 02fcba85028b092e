package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// apiError rewrites an error from the API server, or from trying to reach
// it, into a message that says what went wrong and what to do.
func (o *session) apiError(err error) error {
	return o.endpoint().explain(err)
}

// endpoint names the API server of the command, for messages.
func (o *session) endpoint() endpoint {
	return endpoint{context: o.contextName(), server: o.serverURL(), guard: o.guard}
}

// endpoint is the API server a command talks to, as messages name it.
type endpoint struct {
	context, server string
	guard           *requestGuard
}

// explain rewrites an error of a request to the API server into a lower-case
// message naming the request, the server and the context, and saying what
// to do next. Errors it does not recognise are returned as they are.
func (e endpoint) explain(err error) error {
	if err == nil {
		return nil
	}
	var request *rebalance.RequestError
	failed := e.guard.lastFailed()
	switch {
	case errors.Is(err, daemon.ErrShutdownBudget):
		// Said by the step that was cut, which knows what it left undone.
		return fmt.Errorf("%w (API server %s, context %q)", err, e.server, e.context)
	case apierrors.IsForbidden(err) && errors.As(err, &request):
		where := ""
		if request.Namespace != "" {
			where = fmt.Sprintf(" in namespace %q", request.Namespace)
		}
		return fmt.Errorf("not allowed to %s %s%s with context %q: %s; ask an administrator of the Karmada control plane to grant %q on %s",
			request.Verb, request.Resource, where, e.context, statusMessage(err), request.Verb, request.Resource)
	case apierrors.IsForbidden(err):
		verb, resource, namespace := requestParts(failed)
		if failed != nil && isDiscoveryPath(failed.Path) {
			resource = "the non-resource URL " + failed.Path
		}
		where := ""
		if namespace != "" {
			where = fmt.Sprintf(" in namespace %q", namespace)
		}
		return fmt.Errorf("not allowed to %s %s%s with context %q (%s): %s; ask an administrator of the Karmada control plane to grant %q on %s",
			verb, resource, where, e.context, e.server, statusMessage(err), verb, resource)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s (context %q) did not accept the credentials: %s; renew them in the kubeconfig or choose another context with --karmada-context",
			e.server, e.context, statusMessage(err))
	case isNotAPIAnswer(err, failed):
		what := "something that is not a Kubernetes API response"
		if seen := e.guard.lastSeen(); seen != nil && strings.Contains(seen.ContentType, "html") {
			what = "an HTML page (a login page or a proxy in the way?)"
		}
		return fmt.Errorf("the server at %s (context %q) answered %s with %s: %v; check that --kubeconfig and --karmada-context point at the Karmada apiserver itself",
			e.server, e.context, describeRequest(e.guard.lastSeen()), what, err)
	case isConnectionError(err):
		return fmt.Errorf("cannot reach the API server at %s (context %q): %v; check that the Karmada apiserver is up and that --kubeconfig and --karmada-context point at it",
			e.server, e.context, err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := int(status.Status().Code)
		return fmt.Errorf("the API server at %s (context %q) failed %s: %s (HTTP %d); %s",
			e.server, e.context, describeRequest(failed), statusMessage(err), code, statusAdvice(code, failed))
	}
	return err
}

// explainedError is an error of the catalogue that keeps the error it
// explains, so that what retries a passing fault (daemonRetriable) still
// recognises the cause.
type explainedError struct {
	msg   string
	cause error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.cause }

// explainKeep words err as explain does and keeps it as the cause: the
// daemons log and return their server errors through it, so that the same
// problem reads the same in every command (a refused connection is never
// put down to permissions).
func (e endpoint) explainKeep(err error) error {
	if err == nil {
		return nil
	}
	var done *explainedError
	if errors.As(err, &done) {
		return err
	}
	explained := e.explain(err)
	if explained == err {
		return err
	}
	msg := explained.Error()
	// The step that failed ("cannot read lease ...: <cause>"), when the
	// explanation left it out, still says why the request was made.
	if cause := errors.Unwrap(err); cause != nil {
		if step, ok := strings.CutSuffix(err.Error(), ": "+cause.Error()); ok && !strings.Contains(msg, step) {
			msg = step + ": " + msg
		}
	}
	return &explainedError{msg: msg, cause: err}
}

// statusAdvice says what to do about an HTTP error code.
func statusAdvice(code int, failed *failedRequest) string {
	switch {
	case code == http.StatusNotFound && failed != nil && isDiscoveryPath(failed.Path):
		return "the address serves no Kubernetes API there: check that the kubeconfig's server URL is the Karmada apiserver's, with no extra path"
	case code == http.StatusNotFound:
		return "the API server does not serve it: check that --karmada-context points at the Karmada apiserver"
	case code == http.StatusTooManyRequests:
		return "the server is throttling this client: lower --qps and --burst, or try again later"
	case code >= 500:
		return "the server may be restarting or overloaded: try again in a moment, and check its health with `kubectl get --raw /readyz`"
	}
	return "check the request and the server's logs"
}

// isNotAPIAnswer recognises an answer that could not be decoded: a web page,
// a truncated or broken JSON document.
func isNotAPIAnswer(err error, failed *failedRequest) bool {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typeErr) {
		return true
	}
	msg := err.Error()
	if strings.Contains(msg, "invalid character") || strings.Contains(msg, "unexpected end of JSON input") ||
		strings.Contains(msg, "couldn't get version/kind; json parse error") {
		return true
	}
	return failed != nil && failed.Code > 0 && failed.Code < 400 && !isAPIMediaType(failed.ContentType)
}

// describeRequest names a request by its verb and resource, or as
// discovery, for messages: "the request to list deployments.apps in
// namespace shop", "the discovery request GET /apis".
func describeRequest(failed *failedRequest) string {
	if failed == nil {
		return "a request"
	}
	if isDiscoveryPath(failed.Path) {
		return fmt.Sprintf("the discovery request %s %s", failed.Method, failed.Path)
	}
	verb, resource, namespace := requestParts(failed)
	if namespace != "" {
		return fmt.Sprintf("the request to %s %s in namespace %s", verb, resource, namespace)
	}
	return fmt.Sprintf("the request to %s %s", verb, resource)
}

// isDiscoveryPath reports the paths of the API's discovery documents.
func isDiscoveryPath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/version" || path == "/" || path == "":
		return true
	case parts[0] == "api":
		return len(parts) <= 2
	case parts[0] == "apis":
		return len(parts) <= 3
	}
	return true
}

// requestParts splits a request into its API verb, its resource (with the
// group) and namespace, from the method and the path.
func requestParts(failed *failedRequest) (verb, resource, namespace string) {
	if failed == nil {
		return "use", "the requested resource", ""
	}
	parts := strings.Split(strings.Trim(failed.Path, "/"), "/")
	group := ""
	switch {
	case len(parts) > 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return strings.ToLower(failed.Method), failed.Path, ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		namespace, parts = parts[1], parts[2:]
	}
	resource = parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	if group != "" {
		resource += "." + group
	}
	named := len(parts) >= 2
	switch failed.Method {
	case http.MethodGet:
		verb = "list"
		if named {
			verb = "get"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(failed.Method)
	}
	return verb, resource, namespace
}

// inputError rewrites an error about the workloads asked for. cli-runtime's
// builder reports most of these as plain strings, so they are recognised by
// their wording.
func (o *targetOptions) inputError(err error) error {
	msg := err.Error()
	var urlErr *url.Error
	switch {
	case errors.As(err, &urlErr) && !strings.HasPrefix(urlErr.URL, o.serverURL()):
		// A file given as a URL, not the API server.
		return fmt.Errorf("cannot read %s given with -f: %v; check the address, or download the file and give its path", urlErr.URL, urlErr.Err)
	case strings.HasPrefix(msg, "unable to read URL "):
		return fmt.Errorf("cannot read the -f %s; check the address, or download the file and give its path", strings.TrimPrefix(msg, "unable to read "))
	case strings.HasPrefix(msg, "must build at directory"), strings.Contains(msg, "kustomization"):
		return fmt.Errorf("cannot build the kustomization given with -k %s: %s; give a directory that holds a kustomization.yaml", o.Kustomize, msg)
	case strings.HasPrefix(msg, "the path ") && strings.HasSuffix(msg, " does not exist"):
		return fmt.Errorf("cannot read -f: %s; check the file name", msg)
	case strings.HasPrefix(msg, "the server doesn't have a resource type "):
		kind := strings.TrimPrefix(msg, "the server doesn't have a resource type ")
		return fmt.Errorf("unknown resource type %s: the API server behind context %q does not serve it; run 'kubectl api-resources --context %s' to list the types it serves",
			kind, o.contextName(), o.contextName())
	case strings.HasPrefix(msg, "error reading [") && strings.Contains(msg, "recognized file extensions are"):
		// A directory without a manifest cli-runtime would read.
		dir, _, _ := strings.Cut(strings.TrimPrefix(msg, "error reading ["), "]")
		return fmt.Errorf("cannot read -f %s: it holds no .json, .yaml or .yml file; give a manifest, or a directory of them (-R reads its subdirectories too)", dir)
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
func (o *session) kubeconfigError(err error) error {
	return kubeconfigError(o.ConfigFlags, err)
}

// kubeconfigError rewrites a problem with the kubeconfig itself, the same
// way in every command. --cluster is kubectl's flag for a cluster entry of
// the kubeconfig; given a member cluster's name (meaning -C/--clusters), it
// gets a hint.
func kubeconfigError(cf *genericclioptions.ConfigFlags, err error) error {
	msg := fmt.Sprintf("cannot use the kubeconfig: %v; check --kubeconfig and --karmada-context (or $KUBECONFIG)", err)
	if cf == nil || cf.ClusterName == nil || *cf.ClusterName == "" {
		return errors.New(msg)
	}
	name := *cf.ClusterName
	if raw, rerr := cf.ToRawKubeConfigLoader().RawConfig(); rerr == nil {
		if _, ok := raw.Clusters[name]; ok {
			return errors.New(msg)
		}
	}
	return fmt.Errorf("%s; --cluster %s names a cluster entry of the kubeconfig, and it has none of that name: to choose Karmada member clusters, use -C/--clusters %s",
		msg, name, name)
}

// explainMissingBinding tells why a workload has no binding: either the
// template does not exist, or no policy has propagated it. It costs one GET,
// paid only for workloads whose binding is missing.
func (o *session) explainMissingBinding(mapper meta.RESTMapper) func(context.Context, rebalance.Target) string {
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

// statusMessage returns the API server's own message of an error, or the
// HTTP status when the answer had none (client-go says "unknown" then).
func statusMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		if s.Message != "" && s.Message != "unknown" && !strings.Contains(s.Message, `("unknown")`) {
			return s.Message
		}
		return fmt.Sprintf("the server answered %d %s without saying why", s.Code, http.StatusText(int(s.Code)))
	}
	return err.Error()
}

// isConnectionError reports errors of the network rather than of the API.
func isConnectionError(err error) bool {
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err)
}

// outputError explains why -o FORMAT gave no printer: an unknown format, or
// a template format given without its template.
func outputError(format string, err error, allowed []string) error {
	if strings.Contains(err.Error(), "no template given") {
		flag := "--template"
		example := fmt.Sprintf("-o %s='{{.metadata.name}}'", format)
		switch {
		case strings.HasPrefix(format, "jsonpath"):
			example = fmt.Sprintf("-o %s='{.metadata.name}'", format)
		case strings.HasSuffix(format, "file"):
			example = fmt.Sprintf("-o %s=FILE", format)
		}
		return fmt.Errorf("-o %s needs a template: give it after an equals sign (%s) or with %s", format, example, flag)
	}
	return fmt.Errorf("invalid --output %q: use one of wide, %s", format, strings.Join(allowed, ", "))
}
