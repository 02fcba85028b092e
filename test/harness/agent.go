package harness

import (
	"context"
	"net/http"
	"path/filepath"
	"time"
)

// startAgent runs karmada-agent for a Pull member with the flags of the
// release's agent manifest, as local-up-karmada deploys it into member3. The
// agent registers the Cluster (syncMode Pull) and its credentials itself and
// then applies Works, reports the cluster's status and renews its lease from
// inside the member.
//
// In local-up-karmada the Karmada control plane cannot open a connection to
// the Pull member's apiserver: the aggregated apiserver's cluster proxy does
// not serve it (that needs apiserver-network-proxy). Here every apiserver is on
// the loopback, so the agent reports an endpoint on a loopback port nothing
// listens on: the cluster proxy fails for member3 as it does for users, while
// the agent and the member's estimator reach the member through its own
// kubeconfig, as they do in the member cluster.
func (cp *ControlPlane) startAgent(ctx context.Context, m *Member) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	unreachable := "https://" + addr(ports[2])
	release, err := cp.releaseFlags(manifestAgent, map[string]string{
		"karmada_context":             "admin",
		"member_cluster_name":         m.Name,
		"member_cluster_api_endpoint": unreachable,
	})
	if err != nil {
		return err
	}
	args := append([]string{
		"--karmada-kubeconfig=" + filepath.Join(cp.Dir, "karmada-admin.kubeconfig"),
		"--leader-elect=false",
		"--metrics-bind-address=" + addr(ports[0]),
		"--health-probe-bind-address=" + addr(ports[1]),
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}, release...)
	// The agent finds its member as a pod finds its cluster; KUBECONFIG
	// stands in for the in-cluster service account.
	p, err := cp.startProcessEnv(m.Name+".karmada-agent", cp.bin("agent"), []string{"KUBECONFIG=" + m.kubeconfig}, args...)
	if err != nil {
		return err
	}
	return waitReady(ctx, p, time.Minute, httpCheck(http.DefaultClient, "http://"+addr(ports[1])+"/healthz"))
}
