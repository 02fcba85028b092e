package deschedule

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
)

func TestMetadataTemplateLister(t *testing.T) {
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
	lister := NewMetadataTemplateLister(client, nil)
	deployments := deploymentKind.WithVersion("v1")

	names := func(items []metav1.PartialObjectMetadata) []string {
		var out []string
		for _, m := range items {
			out = append(out, m.Namespace+"/"+m.Name)
		}
		return out
	}
	got, err := lister.ListTemplates(context.Background(), deployments, "", labels.SelectorFromSet(labels.Set{"app": "web"}))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"shop/web", "blog/web"}, names(got))

	got, err = lister.ListTemplates(context.Background(), deployments, "shop", labels.SelectorFromSet(labels.Set{"app": "web"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"shop/web"}, names(got))

	got, err = lister.ListTemplates(context.Background(), deployments, "shop", nil)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"shop/web", "shop/db"}, names(got))

	_, err = lister.ListTemplates(context.Background(), schema.GroupVersionKind{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkDeployment"}, "", nil)
	assert.ErrorContains(t, err, "cannot find the resource of kind FlinkDeployment.flink.apache.org")
}

func TestOptedOut(t *testing.T) {
	tpl := func(v string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{SkipAnnotation: v}}}
	}
	out, _ := optedOut(&metav1.PartialObjectMetadata{})
	assert.False(t, out)
	out, why := optedOut(tpl("true"))
	assert.True(t, out)
	assert.Equal(t, "opted out: the template has deschedule.kubectl-rebalance.io/skip=true", why)
	out, _ = optedOut(tpl("false"))
	assert.False(t, out)
	out, why = optedOut(tpl("yes please"))
	assert.True(t, out, "a value that is not a boolean is not guessed at")
	assert.Contains(t, why, `is "yes please", neither true nor false`)
}
