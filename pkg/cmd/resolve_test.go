package cmd

import (
	"fmt"
	"net/http"
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
	var (
		mu     sync.Mutex
		limits []string
	)
	s.on("GET /apis/apps/v1/namespaces/default/deployments", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/deployments") {
			s.passThrough(w, r)
			return
		}
		mu.Lock()
		limits = append(limits, r.URL.Query().Get("limit"))
		mu.Unlock()
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
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"500", "500"}, limits, errOut.String())
	for _, name := range []string{"a0", "a2", "b0", "b2"} {
		require.Contains(t, out.String()+errOut.String(), name)
	}
}
