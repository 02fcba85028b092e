package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReleaseFlags: the flags of a manifest's container, less the ones that
// only say where the component runs, with placeholders filled; a template
// value that is not YAML until filled (labels: {{name}}) still parses.
func TestReleaseFlags(t *testing.T) {
	assets := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(assets, "manifests"), 0o755))
	manifest := `apiVersion: v1
kind: ServiceAccount
metadata: {name: x}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: estimator-{{member_cluster_name}}
  labels:
    cluster: {{member_cluster_name}}
spec:
  template:
    spec:
      containers:
        - name: estimator
          command:
            - /bin/karmada-scheduler-estimator
            - --kubeconfig=/etc/{{member_cluster_name}}-kubeconfig
            - --cluster-name={{member_cluster_name}}
            - --metrics-bind-address=$(POD_IP):8080
            - --feature-gates=AllAlpha=true,AllBeta=true
            - --logging-format=json
            - --v=4
`
	require.NoError(t, os.WriteFile(filepath.Join(assets, "manifests", "e.yaml"), []byte(manifest), 0o644))
	cp := &ControlPlane{opts: Options{AssetsDir: assets}}

	flags, err := cp.releaseFlags("e.yaml", map[string]string{"member_cluster_name": "member3"})
	require.NoError(t, err)
	assert.Equal(t, []string{"--cluster-name=member3", "--feature-gates=AllAlpha=true,AllBeta=true"}, flags)

	_, err = cp.releaseFlags("e.yaml", nil)
	assert.ErrorContains(t, err, "flag --cluster-name={{member_cluster_name}} has a placeholder the harness does not fill")

	_, err = cp.releaseFlags("missing.yaml", nil)
	assert.ErrorIs(t, err, ErrAssetsMissing)
}

// TestReleaseFlagsOfTheAssets reads the built manifests, when there are:
// the scheduler asks the estimators and the controller-manager runs every
// default controller, as local-up-karmada deploys them.
func TestReleaseFlagsOfTheAssets(t *testing.T) {
	dir, err := DefaultAssetsDir()
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "manifests")); err != nil {
		t.Skipf("no control-plane manifests in %s", dir)
	}
	cp := &ControlPlane{opts: Options{AssetsDir: dir}}
	scheduler, err := cp.releaseFlags(manifestScheduler, nil)
	require.NoError(t, err)
	assert.Contains(t, scheduler, "--enable-scheduler-estimator=true")
	manager, err := cp.releaseFlags(manifestControllerManager, nil)
	require.NoError(t, err)
	assert.Contains(t, manager, "--controllers=*,hpaScaleTargetMarker,deploymentReplicasSyncer")
	// The default options keep the manifest's controllers: until 2026-11-26
	// they put "*" in their place, so hpaScaleTargetMarker and
	// deploymentReplicasSyncer never ran.
	opts := Options{AssetsDir: dir}
	require.NoError(t, opts.defaults())
	started, err := (&ControlPlane{opts: opts}).controllerManagerFlags()
	require.NoError(t, err)
	assert.Contains(t, started, "--controllers=*,hpaScaleTargetMarker,deploymentReplicasSyncer")
	deviating := Options{AssetsDir: dir, KarmadaControllers: "*,-workloadRebalancer"}
	require.NoError(t, deviating.defaults())
	started, err = (&ControlPlane{opts: deviating}).controllerManagerFlags()
	require.NoError(t, err)
	assert.Contains(t, started, "--controllers=*,-workloadRebalancer")
	for _, m := range []string{manifestEstimator, manifestAgent} {
		_, err := cp.releaseFlags(m, map[string]string{
			"member_cluster_name": "member3", "karmada_context": "admin", "member_cluster_api_endpoint": "https://127.0.0.1:1",
		})
		assert.NoError(t, err, m)
	}
	_, err = cp.releaseFlags(manifestDescheduler, nil)
	assert.NoError(t, err)
}
