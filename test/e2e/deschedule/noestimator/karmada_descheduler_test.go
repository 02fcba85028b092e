package noestimator

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
)

// TestDescheduleBesideKarmadaDescheduler runs the real karmada-descheduler
// with its Lease in the test's namespace. The daemon refuses to start while
// it leads; with --force it stands by on the same Lease, never passes while
// karmada-descheduler leads, and takes over once karmada-descheduler dies
// (killed, so its Lease has to expire, as after a crash).
func TestDescheduleBesideKarmadaDescheduler(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "beside-karmada")
	e.stuck("member3", 1, "web")
	timings := []string{"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s"}
	// The release's karmada-descheduler, built with the control plane and
	// started with its manifest's flags.
	binary, kdArgs, err := e.CP.KarmadaDescheduler(append([]string{
		"--leader-elect-resource-namespace=" + e.NS, "--descheduling-interval=1h",
	}, timings...)...)
	require.NoError(t, err)
	kd := e.startBinary("karmada-descheduler", binary, kdArgs...)
	var holder string
	e.Eventually("karmada-descheduler leading", func() (bool, string) {
		holder = e.holder(e.NS, deschedule.DefaultLeaseName)
		return holder != "", "no holder"
	})
	assert.False(t, strings.HasPrefix(holder, deschedule.IdentityPrefix), holder)

	// karmada-descheduler's own flag names.
	args := append([]string{"-n", e.NS, "--descheduling-interval=1s", "--dry-run=client", "--unschedulable-threshold=0s",
		"--leader-elect-resource-namespace", e.NS}, timings...)
	refused := e.startDaemon("refused", args...)
	select {
	case <-refused.done:
	case <-time.After(time.Minute):
		t.Fatalf("the daemon started beside karmada-descheduler:\n%s", refused.stderr.String())
	}
	assert.Equal(t, cmd.ExitError, refused.code)
	assert.Contains(t, refused.stderr.String(), fmt.Sprintf("error: lease %s/karmada-descheduler is held by %q, which is not a kubectl-rebalance daemon", e.NS, holder))
	assert.Contains(t, refused.stderr.String(), "pass --force")
	assert.Empty(t, refused.logged("pass finished"))

	forced := e.startDaemon("forced", append(args, "--force", "--leader-elect-identity=forced")...)
	forced.waitLog("karmada-descheduler holds its lease; --force: standing by on the same lease until it stops", time.Minute)
	standby := forced.waitLog("standing by", time.Minute)
	assert.Equal(t, holder, standby["leader"])
	time.Sleep(3 * time.Second)
	assert.Empty(t, forced.logged("pass finished"), "never active while karmada-descheduler leads")
	assert.Equal(t, holder, e.holder(e.NS, deschedule.DefaultLeaseName))

	require.NoError(t, kd.cmd.Process.Kill())
	e.Eventually("the daemon leading", func() (bool, string) {
		h := e.holder(e.NS, deschedule.DefaultLeaseName)
		return h == deschedule.HolderIdentity("forced"), "holder " + h
	})
	forced.waitLog("pass finished", time.Minute)
	assert.Equal(t, 0, forced.stop(syscall.SIGTERM, 30*time.Second))
}
