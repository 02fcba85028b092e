package deschedule

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
)

func TestMetadataWorkloadLister(t *testing.T) {
	deployment := func(ns, name string, l map[string]string) runtime.Object {
		return &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		}
	}
	scheme := metadatafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	client := metadatafake.NewSimpleMetadataClient(scheme,
		deployment("shop", "web", map[string]string{"app": "web"}),
		deployment("shop", "db", map[string]string{"app": "db"}),
		deployment("blog", "web", map[string]string{"app": "web"}),
	)
	lister := NewMetadataWorkloadLister(client)

	got, err := lister.ListDeployments(context.Background(), "", labels.SelectorFromSet(labels.Set{"app": "web"}))
	require.NoError(t, err)
	assert.Equal(t, map[types.NamespacedName]bool{{Namespace: "shop", Name: "web"}: true, {Namespace: "blog", Name: "web"}: true}, got)

	got, err = lister.ListDeployments(context.Background(), "shop", labels.SelectorFromSet(labels.Set{"app": "web"}))
	require.NoError(t, err)
	assert.Equal(t, map[types.NamespacedName]bool{{Namespace: "shop", Name: "web"}: true}, got)
}
