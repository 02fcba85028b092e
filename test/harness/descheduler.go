package harness

import (
	"context"
	"net/http"
	"time"
)

// KarmadaDescheduler returns the path of the karmada-descheduler binary built
// with the control plane and the arguments that start it beside this control
// plane: the flags of the release's deploy manifest, the Karmada kubeconfig,
// the estimators' client certificate (it asks every member's estimator, as
// the scheduler does), then extra, which may override any of them (a later
// flag wins). Tests run it as a process of their own, to stop or kill it when
// coexistence needs that.
func (cp *ControlPlane) KarmadaDescheduler(extra ...string) (binary string, args []string, err error) {
	release, err := cp.releaseFlags(manifestDescheduler, nil)
	if err != nil {
		return "", nil, err
	}
	args = append([]string{"--kubeconfig=" + cp.Kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0"}, release...)
	args = append(args, cp.estimatorClientArgs()...)
	return cp.bin("descheduler"), append(args, extra...), nil
}

// startKarmadaDescheduler runs karmada-descheduler as local-up-karmada
// deploys it: the manifest's flags (descheduling interval and unschedulable
// threshold at their defaults), leader election on, asking every member's
// estimator. Tests that start one of their own give it another lease
// namespace, so both run.
func (cp *ControlPlane) startKarmadaDescheduler(ctx context.Context) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	binary, args, err := cp.KarmadaDescheduler("--health-probe-bind-address=" + addr(ports[0]))
	if err != nil {
		return err
	}
	p, err := cp.startProcess("karmada-descheduler", binary, args...)
	if err != nil {
		return err
	}
	return waitReady(ctx, p, time.Minute, httpCheck(http.DefaultClient, "http://"+addr(ports[0])+"/healthz"))
}
