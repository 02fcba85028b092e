package rebalance

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"syscall"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

var (
	serverNow = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

	webDeploy  = Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	apiDeploy  = Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "api"}
	gone       = Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "gone"}
	readerRole = Workload{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader"}

	member2Only  = []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 3}}
	backInMember = []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}}
)

// runnerFixture is a runner over a fake API whose server clock reads
// serverNow, and a client clock that only the runner's sleeps move.
type runnerFixture struct {
	api    *fakeAPI
	local  *fakeLocal
	runner *Runner
}

func newRunnerFixture(opts Options) *runnerFixture {
	local := &fakeLocal{now: time.Unix(1000, 0)}
	clock := newTestClock(local)
	api := newFakeAPI(clock, serverNow)
	// Requests take no time here, but server time goes on as the
	// client sleeps.
	clock.sleep = func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		local.now = local.now.Add(d)
		api.mu.Lock()
		api.server = api.server.Add(d)
		api.mu.Unlock()
		return nil
	}
	opts.Backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30}
	return &runnerFixture{api: api, local: local, runner: &Runner{API: api, Clock: clock, Options: opts}}
}

func (f *runnerFixture) run(t *testing.T, timeout time.Duration, targets ...Target) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return f.runner.Run(ctx, targets)
}

func targetsOf(ws ...Workload) []Target {
	targets := make([]Target, 0, len(ws))
	for _, w := range ws {
		targets = append(targets, Target{Workload: w})
	}
	return targets
}

func TestRunBatch(t *testing.T) {
	f := newRunnerFixture(Options{Wait: true})
	f.api.add(scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...))
	f.api.add(scheduledBinding(apiDeploy, serverNow.Add(-time.Hour), member2Only...))
	f.api.add(scheduledBinding(readerRole, serverNow.Add(-time.Hour), workv1alpha2.TargetCluster{Name: "member1"}))
	f.api.scheduler = reschedulingTo(backInMember...)

	result, err := f.run(t, time.Minute, targetsOf(webDeploy, gone, readerRole, apiDeploy, webDeploy)...)
	require.NoError(t, err)

	// One row per distinct workload, in the controller's order.
	var order []Workload
	for _, row := range result.Rows {
		order = append(order, row.Workload)
	}
	assert.Equal(t, []Workload{apiDeploy, gone, webDeploy, readerRole}, order)

	byName := map[string]Row{}
	for _, row := range result.Rows {
		byName[row.Workload.Name] = row
	}
	assert.Equal(t, appsv1alpha1.RebalanceFailed, byName["gone"].Result)
	assert.Equal(t, appsv1alpha1.RebalanceObjectNotFound, byName["gone"].Reason)
	assert.Equal(t, "resourcebinding shop/gone-deployment not found", byName["gone"].Message)
	for _, name := range []string{"web", "api", "reader"} {
		row := byName[name]
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result, name)
		assert.Equal(t, OutcomeScheduled, row.Observation.Outcome, name)
		require.NotNil(t, row.TriggeredAt, name)
		assert.True(t, serverNow.Equal(row.TriggeredAt.Time), name)
		assert.Equal(t, backInMember, row.After, name)
	}
	assert.Equal(t, member2Only, byName["web"].Before)

	assert.Equal(t, 3, result.Written)
	assert.Equal(t, 1, result.Failed)
	assert.Equal(t, 0, result.Pending)
	require.NotNil(t, result.FinishTime)
	assert.True(t, serverNow.Equal(result.FinishTime.Time))

	// One read per workload, one write per found binding, and one list and
	// one watch per scope (namespace shop, cluster-scoped).
	assert.Equal(t, 4, f.api.count("get"))
	assert.Equal(t, 3, f.api.count("patch"))
	assert.Equal(t, 2, f.api.count("list"))
	assert.Equal(t, 2, f.api.count("watch"))
}

func TestRunSameSecondTrigger(t *testing.T) {
	tests := []struct {
		name      string
		lastAt    time.Time
		wantAt    time.Time
		wantSlept time.Duration
		want      Outcome
		wantWrite bool
	}{
		{name: "scheduled a second earlier", lastAt: serverNow.Add(-time.Second), wantAt: serverNow, want: OutcomeScheduled, wantWrite: true},
		{name: "scheduled in the same second", lastAt: serverNow, wantAt: serverNow.Add(time.Second), wantSlept: time.Second, want: OutcomeScheduled, wantWrite: true},
		{name: "scheduler clock two seconds ahead", lastAt: serverNow.Add(2 * time.Second), wantAt: serverNow.Add(3 * time.Second), wantSlept: 3 * time.Second, want: OutcomeScheduled, wantWrite: true},
		{name: "scheduler clock far ahead", lastAt: serverNow.Add(time.Hour), wantAt: serverNow, want: OutcomeIgnored, wantWrite: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRunnerFixture(Options{Wait: true, MaxClockWait: 10 * time.Second})
			f.api.add(scheduledBinding(webDeploy, tt.lastAt, member2Only...))
			f.api.scheduler = reschedulingTo(backInMember...)
			start := f.local.now

			result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
			require.NoError(t, err)
			row := result.Rows[0]
			require.NotNil(t, row.TriggeredAt)
			assert.True(t, tt.wantAt.Equal(row.TriggeredAt.Time), "triggered at %s, want %s", row.TriggeredAt, tt.wantAt)
			assert.Equal(t, tt.want, row.Observation.Outcome, row.Observation.Message)
			assert.Equal(t, tt.wantSlept, f.local.now.Sub(start))
			if tt.want == OutcomeIgnored {
				assert.Equal(t, ReasonTriggerNotAfterLastSchedule, row.Observation.Reason)
			}
			assert.Equal(t, 1, f.api.count("patch"))
		})
	}
}

func TestRunExistingTriggerIsNotWrittenAgain(t *testing.T) {
	f := newRunnerFixture(Options{Wait: true})
	b := scheduledBinding(webDeploy, serverNow.Add(-time.Minute), member2Only...)
	// A later trigger, written by a run whose server clock was ahead, that
	// the scheduler has not answered yet.
	existing := serverNow.Add(2 * time.Second)
	b.Spec.RescheduleTriggeredAt = ptr.To(metav1.NewTime(existing))
	f.api.add(b)
	go func() {
		// The scheduler answers once the run watches.
		for f.api.count("watch") == 0 {
			time.Sleep(time.Millisecond)
		}
		f.api.mu.Lock()
		defer f.api.mu.Unlock()
		answered := *f.api.bindings[bindingKey{"shop", "web-deployment"}]
		reschedulingTo(backInMember...)(&answered, existing)
		f.api.changeLocked(&answered, "MODIFIED")
	}()

	result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
	require.NoError(t, err)
	row := result.Rows[0]
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result)
	assert.True(t, existing.Equal(row.TriggeredAt.Time))
	assert.Contains(t, row.Message, "already holds trigger 2024-05-01T10:00:02Z")
	assert.Equal(t, OutcomeScheduled, row.Observation.Outcome)
	assert.Equal(t, backInMember, row.After)
	assert.Equal(t, 0, f.api.count("patch"))
	assert.Equal(t, 0, result.Written)
}

func TestRunAnsweredTriggerInTheSameSecondIsRenewed(t *testing.T) {
	// Another run triggered in this second and the scheduler answered in
	// it too: a trigger in this second would be ignored, so the run uses
	// the next one rather than counting the old one as its own.
	f := newRunnerFixture(Options{Wait: true})
	b := scheduledBinding(webDeploy, serverNow, member2Only...)
	b.Spec.RescheduleTriggeredAt = ptr.To(metav1.NewTime(serverNow))
	f.api.add(b)
	f.api.scheduler = reschedulingTo(backInMember...)

	result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
	require.NoError(t, err)
	row := result.Rows[0]
	assert.True(t, serverNow.Add(time.Second).Equal(row.TriggeredAt.Time))
	assert.Equal(t, OutcomeScheduled, row.Observation.Outcome)
	assert.Equal(t, 1, f.api.count("patch"))
}

func TestRunStatusChurnCostsNoRetry(t *testing.T) {
	f := newRunnerFixture(Options{Wait: true})
	f.api.add(scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...))
	f.api.scheduler = reschedulingTo(backInMember...)
	f.api.beforePatch = func(api *fakeAPI, k bindingKey) {
		// A controller updates the status between the read and the write.
		b := *api.bindings[k]
		b.Status.AggregatedStatus = []workv1alpha2.AggregatedStatusItem{{ClusterName: "member2", Applied: true}}
		api.changeLocked(&b, "MODIFIED")
	}

	result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
	require.NoError(t, err)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, result.Rows[0].Result)
	assert.Equal(t, OutcomeScheduled, result.Rows[0].Observation.Outcome)
	assert.Equal(t, 1, f.api.count("patch"), "the write tests the trigger only")
	assert.Equal(t, 1, f.api.count("get"))
}

func TestRunTriggerChangedMeanwhile(t *testing.T) {
	tests := []struct {
		name        string
		theirs      time.Time
		wantAt      time.Time
		wantPatches int
		wantWritten int
	}{
		{name: "a later trigger is kept", theirs: serverNow.Add(time.Second), wantAt: serverNow.Add(time.Second), wantPatches: 1},
		{name: "an older trigger is replaced", theirs: serverNow.Add(-time.Minute), wantAt: serverNow, wantPatches: 2, wantWritten: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRunnerFixture(Options{Wait: false})
			f.api.add(scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...))
			once := true
			f.api.beforePatch = func(api *fakeAPI, k bindingKey) {
				if once {
					once = false
					b := *api.bindings[k]
					b.Spec.RescheduleTriggeredAt = ptr.To(metav1.NewTime(tt.theirs))
					b.Generation++
					api.changeLocked(&b, "MODIFIED")
				}
			}

			result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
			require.NoError(t, err)
			row := result.Rows[0]
			assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result)
			assert.True(t, tt.wantAt.Equal(row.TriggeredAt.Time), "triggered at %s", row.TriggeredAt)
			assert.True(t, tt.wantAt.Equal(f.api.binding("shop", "web-deployment").Spec.RescheduleTriggeredAt.Time))
			assert.Equal(t, tt.wantPatches, f.api.count("patch"))
			assert.Equal(t, 2, f.api.count("get"), "one read, and one after the failed test")
			assert.Equal(t, tt.wantWritten, result.Written)
		})
	}
}

func TestRunOddlySpelledTriggerFallsBackToTheResourceVersion(t *testing.T) {
	f := newRunnerFixture(Options{Wait: false})
	b := scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...)
	b.Spec.RescheduleTriggeredAt = ptr.To(metav1.NewTime(serverNow.Add(-time.Hour)))
	f.api.add(b)
	f.api.oddlySpelledTrigger = true

	result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
	require.NoError(t, err)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, result.Rows[0].Result)
	assert.True(t, serverNow.Equal(f.api.binding("shop", "web-deployment").Spec.RescheduleTriggeredAt.Time))
	assert.Equal(t, 2, f.api.count("patch"))
	assert.Equal(t, 2, f.api.count("get"))
}

func TestRunConflictWithANewerScheduleMovesTheTrigger(t *testing.T) {
	f := newRunnerFixture(Options{Wait: true})
	f.api.add(scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...))
	f.api.scheduler = reschedulingTo(backInMember...)
	once := true
	f.api.beforePatch = func(api *fakeAPI, k bindingKey) {
		if !once {
			return
		}
		once = false
		// The scheduler finished another pass in the second the run chose.
		b := *api.bindings[k]
		b.Status.LastScheduledTime = ptr.To(metav1.NewTime(serverNow))
		api.changeLocked(&b, "MODIFIED")
	}

	result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
	require.NoError(t, err)
	row := result.Rows[0]
	assert.True(t, serverNow.Add(time.Second).Equal(row.TriggeredAt.Time), "triggered at %s", row.TriggeredAt)
	assert.Equal(t, OutcomeScheduled, row.Observation.Outcome)
	assert.True(t, serverNow.Add(time.Second).Equal(f.api.binding("shop", "web-deployment").Spec.RescheduleTriggeredAt.Time))
	assert.Equal(t, 2, f.api.count("patch"), "the first trigger landed behind a schedule in its second and was moved")
	assert.Equal(t, 1, result.Written)
}

func TestRunRefusesABindingOfAnotherWorkload(t *testing.T) {
	f := newRunnerFixture(Options{Wait: true})
	// A CRD kind called Deployment in another group shares the binding name.
	other := scheduledBinding(Workload{APIVersion: "example.io/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}, serverNow.Add(-time.Hour))
	f.api.add(other)

	result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
	require.NoError(t, err)
	row := result.Rows[0]
	assert.Equal(t, appsv1alpha1.RebalanceFailed, row.Result)
	assert.Empty(t, row.Reason)
	assert.Contains(t, row.Message, "belongs to example.io/v1 Deployment shop/web")
	assert.Equal(t, 0, f.api.count("patch"))
	assert.Equal(t, 1, result.Failed)
}

func TestRunIgnoredBindingsAreWrittenButNotAwaited(t *testing.T) {
	f := newRunnerFixture(Options{Wait: true})
	b := scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...)
	b.Spec.Suspension = &workv1alpha2.Suspension{Scheduling: ptr.To(true)}
	f.api.add(b)

	result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
	require.NoError(t, err)
	row := result.Rows[0]
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result, "the controller would write it too")
	assert.Equal(t, OutcomeIgnored, row.Observation.Outcome)
	assert.Equal(t, ReasonSchedulingSuspended, row.Observation.Reason)
	assert.Equal(t, 1, f.api.count("patch"))
	assert.Equal(t, 0, f.api.count("watch"))
	assert.Equal(t, 1, result.Failed)
}

func TestRunDryRuns(t *testing.T) {
	tests := []struct {
		dryRun      DryRun
		wantPatches int
		wantWritten int
	}{
		{dryRun: DryRunClient, wantPatches: 0, wantWritten: 0},
		{dryRun: DryRunServer, wantPatches: 1, wantWritten: 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.dryRun), func(t *testing.T) {
			f := newRunnerFixture(Options{Wait: true, DryRun: tt.dryRun})
			f.api.add(scheduledBinding(webDeploy, serverNow, member2Only...))
			f.api.scheduler = reschedulingTo(backInMember...)
			start := f.local.now

			result, err := f.run(t, time.Minute, targetsOf(webDeploy, gone)...)
			require.NoError(t, err)
			row := result.Rows[1]
			assert.Empty(t, row.Result, "a dry run records no result")
			assert.Equal(t, OutcomeNone, row.Observation.Outcome)
			assert.Contains(t, row.Message, "dry run")
			// Same second as the last schedule: the trigger it would use is the
			// next one, and a dry run does not wait for it.
			assert.True(t, serverNow.Add(time.Second).Equal(row.TriggeredAt.Time))
			assert.Equal(t, time.Duration(0), f.local.now.Sub(start))
			assert.Equal(t, appsv1alpha1.RebalanceFailed, result.Rows[0].Result, "a missing binding is reported as in a real run")

			assert.Equal(t, tt.wantPatches, f.api.count("patch"))
			assert.Equal(t, tt.wantWritten, result.Written)
			assert.Nil(t, f.api.binding("shop", "web-deployment").Spec.RescheduleTriggeredAt, "nothing persisted")
			assert.Equal(t, 0, f.api.count("watch"))
			assert.Equal(t, 0, result.Pending)
			assert.Nil(t, result.FinishTime)
		})
	}
}

func TestRunTimesOutPending(t *testing.T) {
	f := newRunnerFixture(Options{Wait: true})
	f.api.add(scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...))
	// No scheduler answers.

	result, err := f.run(t, 50*time.Millisecond, targetsOf(webDeploy)...)
	require.NoError(t, err)
	row := result.Rows[0]
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result)
	assert.Equal(t, OutcomeWaiting, row.Observation.Outcome)
	assert.Equal(t, ReasonAwaitingScheduler, row.Observation.Reason)
	assert.Equal(t, 1, result.Pending)
	assert.NotNil(t, result.FinishTime, "the CRD result is complete even though the scheduler is late")
}

func TestRunTransientErrorsAreRetriedUntilTheTimeout(t *testing.T) {
	f := newRunnerFixture(Options{Wait: false})
	f.api.add(scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...))
	f.api.add(scheduledBinding(apiDeploy, serverNow.Add(-time.Hour), member2Only...))
	throttled := apierrors.NewTooManyRequests("slow down", 1)
	f.api.patchErrors[bindingKey{"shop", "web-deployment"}] = []error{throttled, throttled}
	// api is throttled for longer than the run lasts; web's two retries fit
	// many times over in the timeout, however loaded the machine is.
	f.api.patchErrors[bindingKey{"shop", "api-deployment"}] = slices.Repeat([]error{throttled}, 1000)
	f.runner.Backoff = wait.Backoff{Duration: 5 * time.Millisecond, Factor: 1, Steps: 1 << 30}

	result, err := f.run(t, 2*time.Second, targetsOf(webDeploy, apiDeploy)...)
	require.NoError(t, err)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, result.Rows[1].Result, "web got through after two retries")
	assert.Empty(t, result.Rows[0].Result, "api is still pending")
	assert.Contains(t, result.Rows[0].Message, "timed out before the trigger could be written")
	assert.Contains(t, result.Rows[0].Message, "slow down")
	assert.Equal(t, 1, result.Pending)
	assert.Nil(t, result.FinishTime)
}

func TestRunForbiddenStopsTheRun(t *testing.T) {
	f := newRunnerFixture(Options{Wait: true, Workers: 1})
	f.api.add(scheduledBinding(apiDeploy, serverNow.Add(-time.Hour), member2Only...))
	f.api.add(scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "work.karmada.io", Resource: "resourcebindings"}, "web-deployment", errors.New("no patch for you"))
	f.api.patchErrors[bindingKey{"shop", "web-deployment"}] = []error{forbidden}

	result, err := f.run(t, time.Minute, targetsOf(apiDeploy, webDeploy)...)
	var reqErr *RequestError
	require.ErrorAs(t, err, &reqErr)
	assert.Equal(t, "patch", reqErr.Verb)
	assert.Equal(t, "resourcebindings.work.karmada.io", reqErr.Resource)
	assert.Equal(t, "shop", reqErr.Namespace)
	assert.Equal(t, "web-deployment", reqErr.Name)
	assert.True(t, apierrors.IsForbidden(err))
	assert.Equal(t, 1, result.Written, "api was written before web was refused, and the rows say so")
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, result.Rows[0].Result)
}

func TestRunWatchFallsBackToPolling(t *testing.T) {
	f := newRunnerFixture(Options{Wait: true})
	f.api.add(scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...))
	f.api.watchErr = apierrors.NewForbidden(schema.GroupResource{Group: "work.karmada.io", Resource: "resourcebindings"}, "", errors.New("no watch"))
	// The scheduler answers only after the write, seen by a later read.
	f.api.scheduler = reschedulingTo(backInMember...)

	result, err := f.run(t, 5*time.Second, targetsOf(webDeploy)...)
	require.NoError(t, err)
	assert.Equal(t, OutcomeScheduled, result.Rows[0].Observation.Outcome)
}

func TestPlanScopes(t *testing.T) {
	b := func(ns, name string) *Binding { return &Binding{Namespace: ns, Name: name} }
	many := make([]*Binding, 0, maxNamespaceWatches+1)
	for i := range maxNamespaceWatches + 1 {
		many = append(many, b(fmt.Sprintf("ns%d", i), "x"))
	}
	tests := []struct {
		name     string
		bindings []*Binding
		want     []Scope
	}{
		{name: "one binding is watched by name", bindings: []*Binding{b("shop", "web")}, want: []Scope{{Namespace: "shop", Name: "web"}}},
		{name: "a namespace with several", bindings: []*Binding{b("shop", "web"), b("shop", "api")}, want: []Scope{{Namespace: "shop"}}},
		{
			name:     "namespaced and cluster-scoped",
			bindings: []*Binding{b("b", "x"), b("", "role"), b("a", "y"), b("a", "z")},
			want:     []Scope{{Namespace: "a"}, {Namespace: "b", Name: "x"}, {ClusterScoped: true, Name: "role"}},
		},
		{name: "many namespaces share one watch", bindings: many, want: []Scope{{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, PlanScopes(tt.bindings))
		})
	}
}

// BenchmarkRun rebalances a batch over the fake API and reports the
// requests per workload; the count, not the time, is what must stay flat.
func BenchmarkRun(b *testing.B) {
	const size = 2000
	var targets []Target
	for i := range size {
		targets = append(targets, Target{Workload: Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: fmt.Sprintf("ns%d", i%20), Name: fmt.Sprintf("app%d", i)}})
	}
	b.ReportAllocs()
	var requests int
	for b.Loop() {
		f := newRunnerFixture(Options{Wait: true})
		for _, t := range targets {
			f.api.add(scheduledBinding(t.Workload, serverNow.Add(-time.Hour), member2Only...))
		}
		f.api.scheduler = reschedulingTo(backInMember...)
		result, err := f.runner.Run(context.Background(), targets)
		if err != nil || result.Failed+result.Pending > 0 {
			b.Fatalf("run failed: %v %+v", err, result)
		}
		requests = 0
		for _, n := range f.api.calls {
			requests += n
		}
	}
	b.ReportMetric(float64(requests)/size, "requests/workload")
}

// fakeFailures reports one failure event per binding, at a fixed time.
type fakeFailures struct {
	at    map[bindingKey]time.Time
	err   error
	calls int
}

func (f *fakeFailures) LastFailure(_ context.Context, b *Binding) (time.Time, string, error) {
	f.calls++
	if f.err != nil {
		return time.Time{}, "", f.err
	}
	return f.at[b.key()], "0/2 clusters are available: 2 cluster(s) did not match the placement cluster affinity constraint.", nil
}

func TestRunRepeatedFailureIsToldByTheSchedulersEvents(t *testing.T) {
	failing := func() *Binding {
		b := scheduledBinding(webDeploy, serverNow.Add(-time.Hour))
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: workv1alpha2.Scheduled, Status: metav1.ConditionFalse,
			Reason: "NoClusterFit", Message: "0/2 clusters are available.", LastTransitionTime: metav1.NewTime(serverNow.Add(-time.Minute))})
		return b
	}
	web := bindingKey{"shop", "web-deployment"}
	tests := []struct {
		name     string
		failures *fakeFailures
		want     Observation
	}{{
		name:     "failed again after the trigger",
		failures: &fakeFailures{at: map[bindingKey]time.Time{web: serverNow.Add(300 * time.Millisecond)}},
		want: Observation{Outcome: OutcomeSchedulingFailed, Reason: "NoClusterFit",
			Message: "0/2 clusters are available: 2 cluster(s) did not match the placement cluster affinity constraint."},
	}, {
		name:     "only failures from before the trigger",
		failures: &fakeFailures{at: map[bindingKey]time.Time{web: serverNow.Add(-time.Minute)}},
		want:     Observation{Outcome: OutcomeWaiting, Reason: ReasonFailedBeforeTrigger},
	}, {
		name:     "events cannot be read",
		failures: &fakeFailures{err: apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no events for you"))},
		want:     Observation{Outcome: OutcomeWaiting, Reason: ReasonFailedBeforeTrigger},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRunnerFixture(Options{Wait: true})
			f.api.add(failing())
			// The scheduler tries again and fails the same way: only the
			// observed generation is left as it was.
			f.api.scheduler = func(*Binding, time.Time) bool { return false }
			f.runner.Failures = tt.failures

			result, err := f.run(t, 2500*time.Millisecond, targetsOf(webDeploy)...)
			require.NoError(t, err)
			got := result.Rows[0].Observation
			assert.Equal(t, tt.want.Outcome, got.Outcome)
			assert.Equal(t, tt.want.Reason, got.Reason)
			if tt.want.Message != "" {
				assert.Equal(t, tt.want.Message, got.Message)
			}
			if tt.failures.err != nil {
				assert.Equal(t, 1, tt.failures.calls, "a refused read is not repeated")
			}
		})
	}
}

// Retries go on until the context ends, also once the backoff reached its
// cap: an apiserver restart longer than the backoff's climb must not leave
// a binding pending while --timeout has time left.
func TestRunRetriesPastTheBackoffCap(t *testing.T) {
	f := newRunnerFixture(Options{})
	f.runner.Backoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Cap: 4 * time.Millisecond, Steps: 1 << 30}
	b := scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...)
	f.api.add(b)
	for range 20 {
		f.api.patchErrors[b.key()] = append(f.api.patchErrors[b.key()], apierrors.NewServiceUnavailable("restarting"))
	}
	result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
	require.NoError(t, err)
	require.Len(t, result.Rows, 1)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, result.Rows[0].Result, result.Rows[0].Message)
}

// A trigger write whose answer is lost may have landed. The retry must not
// write a second trigger when it did: not blindly (the write tests the
// trigger it read), and not by moving the trigger past the schedule that
// answered the first write.
func TestRunLostAnswerWritesOneTrigger(t *testing.T) {
	reset := &url.Error{Op: "Patch", URL: "https://karmada/apis/work.karmada.io/v1alpha2/namespaces/shop/resourcebindings/web-deployment", Err: syscall.ECONNRESET}
	tests := []struct {
		name string
		// lost is the error the client hears after the server applied the
		// write; notSent the error of a write that never reached it.
		lost, notSent error
		// answered: the scheduler answers a trigger as soon as it lands.
		answered  bool
		wait      bool
		triggerAt bool
		want      Outcome
		patches   int
	}{
		{name: "landed and answered before the retry", lost: reset, answered: true, wait: true, want: OutcomeScheduled, patches: 1},
		{name: "landed and answered, not waiting", lost: reset, answered: true, patches: 1},
		{name: "landed, answered, 500 heard", lost: apierrors.NewInternalError(errors.New("etcd leader changed")), answered: true, wait: true, want: OutcomeScheduled, patches: 1},
		{name: "landed, not answered yet", lost: reset, patches: 1},
		{name: "landed and answered, recorded run", lost: reset, answered: true, triggerAt: true, wait: true, want: OutcomeScheduled, patches: 1},
		{name: "never reached the server", notSent: reset, answered: true, wait: true, want: OutcomeScheduled, patches: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Wait: tt.wait}
			if tt.triggerAt {
				opts.TriggerAt = ptr.To(metav1.NewTime(serverNow))
			}
			f := newRunnerFixture(opts)
			b := scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...)
			f.api.add(b)
			if tt.answered {
				f.api.scheduler = reschedulingTo(backInMember...)
			}
			if tt.lost != nil {
				f.api.lostAnswers[b.key()] = []error{tt.lost}
			}
			if tt.notSent != nil {
				f.api.patchErrors[b.key()] = []error{tt.notSent}
			}

			result, err := f.run(t, time.Minute, targetsOf(webDeploy)...)
			require.NoError(t, err)
			row := result.Rows[0]
			assert.Equal(t, 1, f.api.persisted[b.key()], "exactly one trigger written")
			assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result, row.Message)
			require.NotNil(t, row.TriggeredAt)
			assert.True(t, serverNow.Equal(row.TriggeredAt.Time), "triggered at %s", row.TriggeredAt)
			assert.True(t, serverNow.Equal(f.api.binding("shop", "web-deployment").Spec.RescheduleTriggeredAt.Time))
			assert.Equal(t, 1, result.Written, "the landed write is the run's own")
			assert.Empty(t, row.Message)
			assert.Equal(t, tt.want, row.Observation.Outcome, row.Observation.Message)
			assert.Equal(t, member2Only, row.Before)
			if tt.want == OutcomeScheduled {
				assert.Equal(t, backInMember, row.After)
			}
			assert.Equal(t, tt.patches, f.api.count("patch"))
		})
	}
}

// A run that ends before it could look at a binding after a lost answer
// leaves it pending and says that the trigger may be in place.
func TestRunLostAnswerLeftPendingSaysItMayHaveLanded(t *testing.T) {
	f := newRunnerFixture(Options{})
	f.runner.Backoff = wait.Backoff{Duration: 5 * time.Millisecond, Factor: 1, Steps: 1 << 30}
	b := scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...)
	f.api.add(b)
	f.api.lostAnswers[b.key()] = []error{apierrors.NewInternalError(errors.New("etcd leader changed"))}
	// The API server goes away for longer than the run lasts.
	f.api.getErrors[b.key()] = slices.Repeat([]error{apierrors.NewServiceUnavailable("restarting")}, 1<<20)

	result, err := f.run(t, 500*time.Millisecond, targetsOf(webDeploy)...)
	require.NoError(t, err)
	row := result.Rows[0]
	assert.Empty(t, row.Result)
	assert.Equal(t, 1, result.Pending)
	assert.Equal(t, "timed out after a trigger write on resourcebinding shop/web-deployment whose answer was lost (it may have landed): "+
		"Internal error occurred: etcd leader changed", row.Message)
	assert.Equal(t, 1, f.api.count("patch"), "no write before the binding was looked at")
}

// TestRunTriggerAnsweredBeforeTheRunReadsIt is a recorded run whose record
// Karmada's controller acted on first: the binding holds the run's trigger
// (the record's creation time) and the scheduler has answered it already.
// The row's before is the caller's read, where there is one.
func TestRunTriggerAnsweredBeforeTheRunReadsIt(t *testing.T) {
	tests := []struct {
		name       string
		before     []workv1alpha2.TargetCluster
		statusLate bool
		wantBefore []workv1alpha2.TargetCluster
	}{
		{name: "read by the caller", before: member2Only, wantBefore: member2Only},
		{name: "read by the caller, status not written yet", before: member2Only, statusLate: true, wantBefore: member2Only},
		{name: "not read", wantBefore: backInMember},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRunnerFixture(Options{Wait: true})
			created := metav1.NewTime(serverNow.Add(-time.Second))
			b := scheduledBinding(webDeploy, serverNow.Add(-time.Second), backInMember...)
			b.Spec.RescheduleTriggeredAt = ptr.To(created)
			if tt.statusLate {
				// The scheduler wrote spec.clusters; its status patch,
				// lastScheduledTime included, has not landed yet.
				b.Status.LastScheduledTime = ptr.To(metav1.NewTime(serverNow.Add(-time.Hour)))
			}
			f.api.add(b)
			f.runner.TriggerAt = &created

			// The late status never comes here: the wait ends with the run.
			result, err := f.run(t, 2*time.Second, Target{Workload: webDeploy, Before: tt.before})
			require.NoError(t, err)
			row := result.Rows[0]
			assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result)
			assert.Equal(t, tt.wantBefore, row.Before)
			assert.Equal(t, backInMember, row.After)
			assert.Equal(t, 0, f.api.count("patch"))
		})
	}
}
