package cmd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
)

// A release newer than the newest tested is said to be so; a range that may
// still be the tested release is not.
func TestWarnNewerThanTested(t *testing.T) {
	newer := karmadaversion.Release{Minor: karmadaversion.NewestTested.Minor + 1}
	var out strings.Builder
	warnNewerThanTested(&out, karmadaversion.Info{Oldest: newer, Evidence: "the ResourceBinding schema has spec.clusters[].components"})
	assert.Contains(t, out.String(), "warning: this control plane runs Karmada "+newer.String()+" or newer (the ResourceBinding schema has spec.clusters[].components), newer than "+karmadaversion.NewestTested.String()+", the newest release kubectl-rebalance was tested on")

	out.Reset()
	warnNewerThanTested(&out, karmadaversion.Info{Oldest: karmadaversion.NewestTested})
	warnNewerThanTested(&out, karmadaversion.Info{Oldest: karmadaversion.OldestSupported, Newest: karmadaversion.NewestTested})
	assert.Empty(t, out.String())
}
