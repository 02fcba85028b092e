package deschedule

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/reference"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
)

func TestEventSchemeNamesBindings(t *testing.T) {
	rb := newBinding("default", "web", cluster{"m1", 1, 1})
	ref, err := reference.GetReference(daemon.EventScheme(), rb)
	require.NoError(t, err)
	assert.Equal(t, "work.karmada.io/v1alpha2", ref.APIVersion)
	assert.Equal(t, "ResourceBinding", ref.Kind)
	assert.Equal(t, "web-deployment", ref.Name)
	assert.Equal(t, rb.UID, ref.UID)
}

func TestEventClientWritesEvent(t *testing.T) {
	kube := fake.NewClientset()
	c := NewEventClient(kube, EventComponent)
	c.now = func() time.Time { return testNow }
	rb := newBinding("team-a", "web", cluster{"m1", 1, 1})

	require.NoError(t, c.WriteEvent(context.Background(), templateReference(rb), corev1.EventTypeNormal, ReasonDescheduleSucceed, "moved"))
	events, err := kube.CoreV1().Events("team-a").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, events.Items, 1)
	e := events.Items[0]
	assert.True(t, strings.HasPrefix(e.Name, "web."))
	assert.Equal(t, corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: "web", UID: rb.Spec.Resource.UID}, e.InvolvedObject)
	assert.Equal(t, int32(1), e.Count)
	assert.Equal(t, testNow, e.FirstTimestamp.Time.UTC())
	assert.Equal(t, "DescheduleBindingSucceed", e.Reason)
	assert.Equal(t, EventComponent, e.ReportingController)
}

func TestEventClientReportsRefusal(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	err := NewEventClient(kube, EventComponent).WriteEvent(context.Background(), newBinding("default", "web"), corev1.EventTypeWarning, ReasonDescheduleFailed, "x")
	assert.ErrorContains(t, err, "cannot record event DescheduleBindingFailed on ResourceBinding default/web-deployment")
	assert.ErrorContains(t, err, "forbidden")
}
