package cmd

import (
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
	})
	return o.release, o.releaseErr
}
