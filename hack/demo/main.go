// Command demo walks Karmada's WorkloadRebalancer tutorial on a real local
// control plane and prints what each step shows: a Deployment spread 2+1 over
// member1 and member2, a NoExecute taint that moves everything to member2,
// a recovery that changes nothing, a plan that predicts what a rebalance would
// do without writing anything, and the rebalance that brings replicas back.
//
// With --kubeconfig it uses a running sandbox (make sandbox); otherwise it
// starts its own control plane and stops it at the end.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

const (
	namespace = "default"
	name      = "foo"
	binding   = "foo-deployment"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "demo failed: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var kubeconfig string
	// A flag set of its own: a dependency (controller-runtime, through
	// Karmada's scheduler code) registers its own -kubeconfig globally.
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of a running sandbox; empty starts a control plane for the demo")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	members := map[string]*rest.Config{}
	var karmada *rest.Config
	if kubeconfig == "" {
		step("Starting a local Karmada control plane as local-up-karmada makes it (member1, member2 Push; member3 Pull with karmada-agent; an estimator per member)")
		cp, err := harness.Start(ctx, harness.Options{Progress: newIndent()})
		if err != nil {
			return err
		}
		defer cp.Stop()
		karmada, kubeconfig = cp.Karmada, cp.Kubeconfig
		for _, m := range cp.Members {
			members[m.Name] = m.Config
		}
	} else {
		var err error
		if karmada, err = contextConfig(kubeconfig, harness.KarmadaContext); err != nil {
			return err
		}
		for _, m := range []string{"member1", "member2"} {
			if members[m], err = contextConfig(kubeconfig, m); err != nil {
				return err
			}
		}
	}
	c, err := fixtures.NewClients(karmada)
	if err != nil {
		return err
	}
	member1, err := kubernetes.NewForConfig(members["member1"])
	if err != nil {
		return err
	}
	member2, err := kubernetes.NewForConfig(members["member2"])
	if err != nil {
		return err
	}

	if err := removeLeftovers(ctx, c); err != nil {
		return err
	}

	step("Step 1: Deployment foo (3 replicas) and a PropagationPolicy: Divided, Weighted by AvailableReplicas,\n" +
		"        member1 and member2, tolerating workload-rebalancer-test:NoExecute")
	if _, err := c.Kube.AppsV1().Deployments(namespace).Create(ctx, fixtures.Deployment(namespace, name, 3), metav1.CreateOptions{}); err != nil {
		return err
	}
	policy := fixtures.DynamicWeightPolicy(namespace, name, "apps/v1", "Deployment", []string{name}, []string{"member1", "member2"})
	if _, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(namespace).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		return err
	}
	first, err := show(ctx, c, fixtures.TutorialSplits...)
	if err != nil {
		return err
	}
	if err := fixtures.WaitForMemberReady(ctx, member1, namespace, name, replicasIn(first, "member1"), 2*time.Minute); err != nil {
		return err
	}
	if err := fixtures.WaitForMemberReady(ctx, member2, namespace, name, replicasIn(first, "member2"), 2*time.Minute); err != nil {
		return err
	}
	say("member1 runs %d ready pod(s), member2 runs %d", replicasIn(first, "member1"), replicasIn(first, "member2"))
	say("(equal clusters tie: Karmada v1.16 and later break the tie by the Deployment's UID, v1.12 at random; either may get 2)")

	step("Step 2: member1 fails: taint it workload-rebalancer-test=test:NoExecute")
	if err := c.SetClusterTaint(ctx, "member1", true); err != nil {
		return err
	}
	if _, err := show(ctx, c, "{member2:3}"); err != nil {
		return err
	}
	if err := fixtures.WaitForMemberReady(ctx, member2, namespace, name, 3, 2*time.Minute); err != nil {
		return err
	}
	say("Karmada evicted member1: member2 runs all 3 replicas")

	step("Step 3: member1 recovers: remove the taint")
	if err := c.SetClusterTaint(ctx, "member1", false); err != nil {
		return err
	}
	time.Sleep(10 * time.Second)
	if _, err := show(ctx, c, "{member2:3}"); err != nil {
		return err
	}
	say("10 seconds later nothing moved: Karmada keeps a placement once scheduled")

	step("Step 4: predict the rebalance with the plugin, writing nothing")
	if err := runPlugin(kubeconfig, "plan", "deployment/foo", "-n", namespace); err != nil {
		return err
	}
	if _, err := show(ctx, c, "{member2:3}"); err != nil {
		return err
	}
	say("plan wrote nothing: the placement is still the same")

	step("Step 5: rebalance what would come back to member1")
	if err := runPlugin(kubeconfig, "deployment/foo", "-n", namespace, "--clusters", "member1"); err != nil {
		return err
	}
	last, err := show(ctx, c, fixtures.TutorialSplits...)
	if err != nil {
		return err
	}
	if err := fixtures.WaitForMemberReady(ctx, member1, namespace, name, replicasIn(last, "member1"), 2*time.Minute); err != nil {
		return err
	}
	say("member1 runs %d ready replica(s) again: the fresh schedule divided over both clusters", replicasIn(last, "member1"))
	step("Demo complete")
	return nil
}

// runPlugin runs `kubectl rebalance ARGS...` in process, exactly as the
// installed plugin would run.
func runPlugin(kubeconfig string, args ...string) error {
	fmt.Printf("    $ kubectl rebalance %s\n", strings.Join(args, " "))
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: newIndent(), ErrOut: newIndent()}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs(append(args, "--kubeconfig", kubeconfig, "--context", harness.KarmadaContext))
	if code := cmd.Execute(root, streams); code != cmd.ExitOK {
		return fmt.Errorf("kubectl rebalance exited with %d", code)
	}
	return nil
}

// removeLeftovers deletes what an earlier demo run on the same sandbox left,
// so that the demo can run again.
func removeLeftovers(ctx context.Context, c *fixtures.Clients) error {
	del := metav1.DeleteOptions{}
	errs := []error{
		c.Kube.AppsV1().Deployments(namespace).Delete(ctx, name, del),
		c.Karmada.PolicyV1alpha1().PropagationPolicies(namespace).Delete(ctx, name, del),
	}
	found := false
	for _, err := range errs {
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		found = found || err == nil
	}
	if !found {
		return nil
	}
	step("Removing the objects of an earlier demo run")
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, binding, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func show(ctx context.Context, c *fixtures.Clients, want ...string) (*workv1alpha2.ResourceBinding, error) {
	rb, err := c.WaitForPlacement(ctx, namespace, binding, 3*time.Minute, want...)
	if err != nil {
		return nil, err
	}
	say("ResourceBinding %s/%s placement: %s", namespace, binding, fixtures.Placement(rb.Spec.Clusters))
	return rb, nil
}

func replicasIn(rb *workv1alpha2.ResourceBinding, cluster string) int32 {
	for _, c := range rb.Spec.Clusters {
		if c.Name == cluster {
			return c.Replicas
		}
	}
	return 0
}

func contextConfig(kubeconfig, context string) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
}

func step(text string) { fmt.Printf("\n==> %s\n", text) }

func say(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }

// indent prints another program's output under the demo's current step,
// a whole line at a time (printers write a table cell by cell).
type indent struct{ pending *bytes.Buffer }

func newIndent() indent { return indent{pending: &bytes.Buffer{}} }

func (w indent) Write(p []byte) (int, error) {
	w.pending.Write(p)
	for {
		line, err := w.pending.ReadString('\n')
		if err != nil {
			// No newline yet: keep the partial line for the next write.
			w.pending.Reset()
			w.pending.WriteString(line)
			return len(p), nil
		}
		fmt.Printf("    %s", line)
	}
}
