package cmd

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/scheme"
)

// leaseStore serves Leases in karmada-system as the API server does for
// client-go's leader election: get, create and update.
type leaseStore struct {
	mu     sync.Mutex
	leases map[string]map[string]any
}

const leasesPath = "/apis/coordination.k8s.io/v1/namespaces/karmada-system/leases"

func (l *leaseStore) serve(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		if lease, ok := l.leases[r.URL.Path]; ok {
			writeJSON(w, http.StatusOK, lease)
			return
		}
		writeStatus(w, http.StatusNotFound, "NotFound", "leases.coordination.k8s.io not found", nil)
	case http.MethodPost, http.MethodPut:
		// client-go sends built-in types as protobuf, or JSON.
		body, _ := io.ReadAll(r.Body)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error(), nil)
			return
		}
		obj.GetObjectKind().SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("Lease"))
		var lease map[string]any
		encoded, _ := json.Marshal(obj)
		_ = json.Unmarshal(encoded, &lease)
		name := lease["metadata"].(map[string]any)["name"].(string)
		lease["metadata"].(map[string]any)["resourceVersion"] = time.Now().Format("150405.000000")
		l.leases[leasesPath+"/"+name] = lease
		writeJSON(w, http.StatusOK, lease)
	}
}

// holder returns the holder the Lease named name records now.
func (l *leaseStore) holder(name string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lease, ok := l.leases[leasesPath+"/"+name]
	if !ok {
		return "", false
	}
	spec, _ := lease["spec"].(map[string]any)
	holder, _ := spec["holderIdentity"].(string)
	return holder, true
}

// TestDescheduleDaemonReleasesItsLeaseOnSignal stops a leading deschedule
// daemon as a signal does and checks that it gives its Lease up on the way
// out: the requests it makes after the signal are meant to outlive it, and
// the request guard must not cut them.
func TestDescheduleDaemonReleasesItsLeaseOnSignal(t *testing.T) {
	s := newFakeServer(t)
	leases := &leaseStore{leases: map[string]map[string]any{}}
	s.on("GET "+leasesPath, leases.serve).on("POST "+leasesPath, leases.serve).on("PUT "+leasesPath, leases.serve)
	s.object(bindingsPath, map[string]any{"kind": "ResourceBindingList", "apiVersion": "work.karmada.io/v1alpha2", "metadata": map[string]any{}, "items": []any{}})

	streams, _, _, errOut := genericiooptions.NewTestIOStreams()
	root := NewCmdRebalance(streams)
	root.SetArgs([]string{"--kubeconfig", kubeconfigFor(t, s.URL), "deschedule", "--interval", "1h", "--leader-elect-identity", "test"})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	root.SetContext(ctx)
	exited := make(chan int, 1)
	go func() { exited <- Execute(root, streams) }()

	took := assert.Eventually(t, func() bool {
		holder, _ := leases.holder("karmada-descheduler")
		return strings.HasSuffix(holder, "test")
	}, 10*time.Second, 20*time.Millisecond)
	if !took {
		stop()
		<-exited
		require.FailNow(t, "the daemon never took the Lease", "requests: %v\nstderr:\n%s", s.requests(), errOut.String())
	}
	stop()
	select {
	case code := <-exited:
		assert.Equal(t, ExitOK, code)
	case <-time.After(15 * time.Second):
		require.FailNow(t, "the daemon did not stop")
	}
	holder, _ := leases.holder("karmada-descheduler")
	assert.Empty(t, holder, "the Lease still names the daemon; stderr:\n%s", errOut.String())
	assert.Contains(t, errOut.String(), "released the lease")
}
