// Package deschedule is a client-side karmada-descheduler: it finds
// ResourceBindings of dynamically divided Deployments, counts the replicas that
// member clusters have failed to schedule for longer than a threshold, and
// lowers the per-cluster assignment so that the Karmada scheduler moves those
// replicas elsewhere. It reproduces the original component's filter, formula,
// events and optimistic-concurrency writes, and adds dry-run, limits and a
// structured result for printing.
//
// The pieces are usable on their own:
//   - IsCandidate decides whether a binding is in scope;
//   - ComputePlan is the pure per-cluster formula;
//   - ClusterIndex counts unschedulable pods from one LIST of a member cluster;
//   - PodSource reaches member clusters (Karmada proxy or kubeconfig contexts);
//   - Descheduler.Pass runs one full pass and returns a PassResult, which
//     PrintPass prints as a table and Report turns into a stable document;
//   - Descheduler.Run is the daemon: a pass every interval, optionally under
//     a leader-election Lease, with Metrics and Health for its HTTP endpoints.
//
// What it shares with a rebalance comes from package rebalance, which owns
// bindings: the ready count of a cluster, read by the template's kind
// (rebalance.ReadyReplicas), and the dry-run modes (DryRun).
package deschedule
