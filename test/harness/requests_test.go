package harness

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRequestVerb(t *testing.T) {
	tests := []struct {
		method, path, query, want string
	}{
		{"GET", "/api/v1/namespaces/default/pods", "", "LIST"},
		{"GET", "/api/v1/namespaces/default/pods/p", "", "GET"},
		{"GET", "/api/v1/namespaces", "", "LIST"},
		{"GET", "/api/v1/namespaces/default", "", "GET"},
		{"GET", "/api/v1/nodes", "watch=true", "WATCH"},
		{"GET", "/apis/work.karmada.io/v1alpha2/resourcebindings", "", "LIST"},
		{"GET", "/apis/work.karmada.io/v1alpha2/namespaces/d/resourcebindings", "", "LIST"},
		{"GET", "/apis/work.karmada.io/v1alpha2/namespaces/d/resourcebindings/x", "", "GET"},
		{"GET", "/apis/work.karmada.io/v1alpha2", "", "GET"},
		{"GET", "/version", "", "GET"},
		{"GET", "/api", "", "GET"},
		{"GET", "/apis", "", "GET"},
		{"GET", "/api/v1", "", "GET"},
		{"PATCH", "/apis/work.karmada.io/v1alpha2/namespaces/d/resourcebindings/x", "", "PATCH"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req := &http.Request{Method: tt.method, URL: &url.URL{Path: tt.path, RawQuery: tt.query}}
			assert.Equal(t, tt.want, requestVerb(req))
		})
	}
}

func TestFormatCounts(t *testing.T) {
	assert.Equal(t, "GET=3 PATCH=2 (total 5)", FormatCounts(map[string]int{"PATCH": 2, "GET": 3}))
}
