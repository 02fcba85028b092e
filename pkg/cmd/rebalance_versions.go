package cmd

import (
	"fmt"
	"io"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
)

// karmadaRelease detects, once per command, the Karmada release behind the
// context (pkg/karmadaversion). It is asked only where behaviour differs
// between releases, so a plain run pays no request for it.
func (o *targetOptions) karmadaRelease() (karmadaversion.Info, error) {
	o.releaseOnce.Do(func() {
		disco, err := o.factory.ToDiscoveryClient()
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
