package cmd

import (
	"fmt"
	"io"
	"net/http"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
)

// karmadaRelease detects, once per command, the Karmada release behind the
// context (pkg/karmadaversion). It is asked only where behaviour differs
// between releases, so a plain run pays no request for it.
func (o *session) karmadaRelease() (karmadaversion.Info, error) {
	o.releaseOnce.Do(func() {
		config, err := o.factory.ToRESTConfig()
		if err != nil {
			o.releaseErr = err
			return
		}
		// plan starts the detection while the start-up resolves the
		// workloads; its requests carry no context of their own, and must
		// not end with the start-up (Ctrl-C and the run's end still do).
		config = rest.CopyConfig(config)
		config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
				return rt.RoundTrip(req.WithContext(outlivingStartup(req.Context())))
			})
		})
		disco, err := discovery.NewDiscoveryClientForConfig(config)
		if err != nil {
			o.releaseErr = err
			return
		}
		o.release, o.releaseErr = karmadaversion.Detect(disco)
		if o.releaseErr == nil {
			warnNewerThanTested(o.ErrOut, o.release)
		}
	})
	return o.release, o.releaseErr
}

// warnNewerThanTested says, once per command, that the control plane runs a
// release newer than the newest one the plugin was tested on.
func warnNewerThanTested(w io.Writer, info karmadaversion.Info) {
	if info.Oldest.Minor <= karmadaversion.NewestTested.Minor {
		return
	}
	fmt.Fprintf(w, "warning: %s, newer than %s, the newest release kubectl-rebalance was tested on; predictions follow the newer release where its changes are known (a triggered reschedule restarts from the first clusterAffinities group, karmada#5425) and %s otherwise\n",
		karmadaversion.Describe(info, nil), karmadaversion.NewestTested, karmadaversion.NewestTested)
}

// roundTripperFunc is an http.RoundTripper made of a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
