package rebalance

import (
	"testing"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
)

func TestSortKey(t *testing.T) {
	tests := []struct {
		name     string
		workload Workload
		want     string
	}{
		{name: "namespaced", workload: Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "a"}, want: "apps/v1 Deployment ns a"},
		{name: "cluster-scoped has two spaces", workload: Workload{APIVersion: "v1", Kind: "Namespace", Name: "ns"}, want: "v1 Namespace  ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, SortKey(tt.workload))
		})
	}
}

func TestSortObservedWorkloads(t *testing.T) {
	deploy := func(ns, name string) Workload {
		return Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}
	}
	tests := []struct {
		name  string
		input []Workload
		want  []Workload
	}{
		{
			name:  "by name within a namespace",
			input: []Workload{deploy("ns", "b"), deploy("ns", "a")},
			want:  []Workload{deploy("ns", "a"), deploy("ns", "b")},
		},
		{
			name:  "namespace before name",
			input: []Workload{deploy("b", "a"), deploy("a", "z")},
			want:  []Workload{deploy("a", "z"), deploy("b", "a")},
		},
		{
			name:  "upper case before lower case",
			input: []Workload{deploy("ns", "a"), deploy("ns", "B")},
			want:  []Workload{deploy("ns", "B"), deploy("ns", "a")},
		},
		{
			name:  "apiVersion first: apps/v1 before v1",
			input: []Workload{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "a"}, deploy("z", "z")},
			want:  []Workload{deploy("z", "z"), {APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "a"}},
		},
		{
			name: "cluster-scoped sorts before namespaced of the same kind",
			input: []Workload{
				{APIVersion: "example.io/v1", Kind: "Thing", Namespace: "a", Name: "a"},
				{APIVersion: "example.io/v1", Kind: "Thing", Name: "z"},
			},
			want: []Workload{
				{APIVersion: "example.io/v1", Kind: "Thing", Name: "z"},
				{APIVersion: "example.io/v1", Kind: "Thing", Namespace: "a", Name: "a"},
			},
		},
		{
			name:  "byte order, not length: name-10 before name-9",
			input: []Workload{deploy("ns", "name-9"), deploy("ns", "name-10")},
			want:  []Workload{deploy("ns", "name-10"), deploy("ns", "name-9")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			observed := make([]appsv1alpha1.ObservedWorkload, 0, len(tt.input))
			for _, w := range tt.input {
				observed = append(observed, appsv1alpha1.ObservedWorkload{Workload: w})
			}
			SortObservedWorkloads(observed)
			got := make([]Workload, 0, len(observed))
			for _, o := range observed {
				got = append(got, o.Workload)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
