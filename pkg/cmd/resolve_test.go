package cmd

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// A selection (-l, --all, TYPE) is listed in pages of 500, every page is
// resolved, and the objects are not kept: a fleet's templates are never
// all held at once.
func TestResolveListsInPages(t *testing.T) {
	s := newFakeServer(t)
	lists := onDeploymentList(s, func(w http.ResponseWriter, r *http.Request) {
		page, next := "a", "page2"
		if r.URL.Query().Get("continue") == "page2" {
			page, next = "b", ""
		}
		var items []string
		for i := range 3 {
			items = append(items, fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"default","name":"%s%d","uid":"u-%s%d"}}`, page, i, page, i))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"apiVersion":"apps/v1","kind":"DeploymentList","metadata":{"continue":%q},"items":[%s]}`, next, strings.Join(items, ","))
	})
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := NewCmdRebalance(streams)
	root.SetArgs([]string{"--kubeconfig", kubeconfigFor(t, s.URL), "--cache-dir", t.TempDir(), "deployments", "--all", "--dry-run=client", "-o", "name"})
	Execute(root, streams)
	var limits []string
	for _, r := range lists() {
		limits = append(limits, r.URL.Query().Get("limit"))
	}
	assert.Equal(t, []string{"500", "500"}, limits, errOut.String())
	for _, name := range []string{"a0", "a2", "b0", "b2"} {
		require.Contains(t, out.String()+errOut.String(), name)
	}
}

// A selection the server lists asks for the workloads' metadata only, and
// takes whatever the server answers: a PartialObjectMetadataList, or the
// whole objects from a server that cannot give metadata alone. With a
// WorkloadRebalancer among the types every list asks for whole objects, as
// a rebalancer's spec.workloads is needed.
func TestResolveListsMetadataOnly(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		serverIgnore bool // the server answers whole objects whatever is asked
		wantMetadata bool
	}{
		{name: "a type with --all", args: []string{"deployments", "--all"}, wantMetadata: true},
		{name: "a short name with -l", args: []string{"deploy", "-l", "app=web"}, wantMetadata: true},
		{name: "a server without metadata lists", args: []string{"deployments.apps", "--all"}, serverIgnore: true, wantMetadata: true},
		{name: "workloadrebalancers among the types", args: []string{"deployments,workloadrebalancers", "--all"}, wantMetadata: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeServer(t)
			lists := onDeploymentList(s, func(w http.ResponseWriter, r *http.Request) {
				metadataOnly := strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList") && !tt.serverIgnore
				var items []string
				for i := range 2 {
					if metadataOnly {
						items = append(items, fmt.Sprintf(`{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"namespace":"default","name":"web%d","uid":"u-%d"}}`, i, i))
					} else {
						items = append(items, fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"default","name":"web%d","uid":"u-%d"},"spec":{"replicas":3}}`, i, i))
					}
				}
				w.Header().Set("Content-Type", "application/json")
				kind := `"apiVersion":"apps/v1","kind":"DeploymentList"`
				if metadataOnly {
					kind = `"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadataList"`
				}
				fmt.Fprintf(w, `{%s,"metadata":{},"items":[%s]}`, kind, strings.Join(items, ","))
			})
			s.on("GET /apis/apps.karmada.io/v1alpha1/workloadrebalancers", answer(http.StatusOK, "application/json",
				`{"apiVersion":"apps.karmada.io/v1alpha1","kind":"WorkloadRebalancerList","metadata":{},"items":[]}`))
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			root := NewCmdRebalance(streams)
			root.SetArgs(append([]string{"--kubeconfig", kubeconfigFor(t, s.URL), "--cache-dir", t.TempDir(), "--dry-run=client", "-o", "name"}, tt.args...))
			Execute(root, streams)
			requests := lists()
			require.Len(t, requests, 1, errOut.String())
			accept := requests[0].Header.Get("Accept")
			assert.Equal(t, tt.wantMetadata, strings.Contains(accept, "as=PartialObjectMetadataList"), accept)
			for _, name := range []string{"deployment.apps/web0", "deployment.apps/web1"} {
				assert.Contains(t, out.String(), name, errOut.String())
			}
		})
	}
}

// onDeploymentList answers the LISTs of Deployments in namespace default with
// answer and returns what lists them so far; other requests under that path
// get the fake server's defaults.
func onDeploymentList(s *fakeServer, answer http.HandlerFunc) (lists func() []*http.Request) {
	var (
		mu   sync.Mutex
		seen []*http.Request
	)
	s.on("GET /apis/apps/v1/namespaces/default/deployments", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/deployments") {
			s.passThrough(w, r)
			return
		}
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		answer(w, r)
	})
	return func() []*http.Request {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// Workloads named as arguments are not listed, and their names are never
// looked up as types: a name the cached discovery does not know as a type
// would make it be read again on every run.
func TestResolveNamesKeepTheDiscoveryCache(t *testing.T) {
	s := newFakeServer(t)
	cache := t.TempDir()
	run := func() []string {
		before := len(s.requests())
		streams, _, _, errOut := genericiooptions.NewTestIOStreams()
		root := NewCmdRebalance(streams)
		root.SetArgs([]string{"--kubeconfig", kubeconfigFor(t, s.URL), "--cache-dir", cache, "--dry-run=client", "-o", "name", "deployments", "app00", "app01"})
		Execute(root, streams)
		t.Log(errOut.String())
		return s.requests()[before:]
	}
	run() // fills the discovery cache
	for _, request := range run() {
		assert.NotRegexp(t, `^GET /(api|apis)(/[^/]+/[^/]+)?$`, request, "discovery read again with a warm cache")
	}
}
