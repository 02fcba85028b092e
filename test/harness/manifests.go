package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// The release's own deploy manifests, copied by hack/build-controlplane.sh
// into manifests/ beside the binaries. local-up-karmada deploys exactly these,
// so the flags and feature gates in their container commands are what our
// users run; the harness starts each component with them.
const (
	manifestScheduler         = "karmada-scheduler.yaml"
	manifestControllerManager = "karmada-controller-manager.yaml"
	manifestEstimator         = "karmada-scheduler-estimator.yaml"
	manifestDescheduler       = "karmada-descheduler.yaml"
	manifestAgent             = "karmada-agent.yaml"
)

// localFlags are the flags that only describe where a component runs: file
// paths inside its pod, the pod's addresses, log format and verbosity. The
// harness sets its own for these (loopback ports, its certificates, text logs
// at the default verbosity, which keeps the logs of a 2-core run readable and
// small); every other flag of the manifest is passed through unchanged.
var localFlags = map[string]bool{
	"kubeconfig":                    true,
	"karmada-kubeconfig":            true,
	"metrics-bind-address":          true,
	"health-probe-bind-address":     true,
	"scheduler-estimator-ca-file":   true,
	"scheduler-estimator-cert-file": true,
	"scheduler-estimator-key-file":  true,
	"grpc-auth-cert-file":           true,
	"grpc-auth-key-file":            true,
	"grpc-client-ca-file":           true,
	"logging-format":                true,
	"v":                             true,
}

// releaseFlags returns the flags of the first container of the Deployment in
// the named manifest, less localFlags, with every {{placeholder}} replaced
// from vars. A placeholder without a value is an error: the harness would
// otherwise start a component with a literal template in a flag.
func (cp *ControlPlane) releaseFlags(manifest string, vars map[string]string) ([]string, error) {
	path := filepath.Join(cp.opts.AssetsDir, "manifests", manifest)
	flags, err := readManifestFlags(path)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(flags))
	for _, f := range flags {
		name := strings.TrimLeft(strings.SplitN(f, "=", 2)[0], "-")
		if localFlags[name] {
			continue
		}
		for k, v := range vars {
			f = strings.ReplaceAll(f, "{{"+k+"}}", v)
		}
		if strings.Contains(f, "{{") {
			return nil, fmt.Errorf("%s: flag %s has a placeholder the harness does not fill", path, f)
		}
		out = append(out, f)
	}
	return out, nil
}

// placeholderOpen and placeholderClose stand for a template's braces while
// it is parsed as YAML.
const placeholderOpen, placeholderClose = "PLACEHOLDER-OPEN-", "-PLACEHOLDER-CLOSE"

// readManifestFlags reads the command (or args) of the first container of
// the Deployment in a manifest file and returns its flags, without the binary.
func readManifestFlags(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v; rebuild them with %s", ErrAssetsMissing, err, BuildCommand)
	}
	// The manifests are templates: a bare {{placeholder}} as a value is not
	// YAML. Hide the braces while parsing and put them back in the flags.
	hide := strings.NewReplacer("{{", placeholderOpen, "}}", placeholderClose)
	show := strings.NewReplacer(placeholderOpen, "{{", placeholderClose, "}}")
	for _, doc := range strings.Split(hide.Replace(string(raw)), "\n---") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil || d.Kind != "Deployment" {
			continue
		}
		containers := d.Spec.Template.Spec.Containers
		if len(containers) == 0 {
			continue
		}
		cmd := append(append([]string(nil), containers[0].Command...), containers[0].Args...)
		var flags []string
		for _, c := range cmd {
			if strings.HasPrefix(c, "-") {
				flags = append(flags, show.Replace(c))
			}
		}
		return flags, nil
	}
	return nil, fmt.Errorf("%s holds no Deployment with a container command", path)
}
