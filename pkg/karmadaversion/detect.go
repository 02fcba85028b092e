package karmadaversion

import (
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

const (
	bindingGroupVersion = "work.karmada.io/v1alpha2"
	bindingResource     = "resourcebindings"
	bindingKind         = "ResourceBinding"
)

// Detect bounds the Karmada release of the control plane behind disco from
// the ResourceBinding schema it publishes. With a cached discovery client the
// served resources cost nothing; the schema costs one or two GETs. A control
// plane that cannot be rebalanced gets an *UnsupportedError.
func Detect(disco discovery.DiscoveryInterface) (Info, error) {
	resources, err := disco.ServerResourcesForGroupVersion(bindingGroupVersion)
	if err != nil && !apierrors.IsNotFound(err) {
		return Info{}, fmt.Errorf("reading the resources of %s: %w", bindingGroupVersion, err)
	}
	served := false
	if resources != nil {
		for _, r := range resources.APIResources {
			served = served || r.Name == bindingResource
		}
	}
	if !served {
		return Info{}, &UnsupportedError{Reason: "it does not serve " + bindingResource + "." + bindingGroupVersion +
			": it is not a Karmada apiserver, or Karmada's CRDs are not installed"}
	}
	schema, err := bindingSchema(disco)
	if err != nil {
		return Info{}, err
	}
	return FromSchema(schema)
}

// bindingSchema fetches the OpenAPI v3 document of work.karmada.io/v1alpha2
// and returns the ResourceBinding schema in it.
func bindingSchema(disco discovery.DiscoveryInterface) (Schema, error) {
	paths, err := disco.OpenAPIV3().Paths()
	if err != nil {
		return nil, fmt.Errorf("reading the OpenAPI v3 index: %w", err)
	}
	gv, ok := paths["apis/"+bindingGroupVersion]
	if !ok {
		return nil, errors.New("the OpenAPI v3 index has no apis/" + bindingGroupVersion)
	}
	data, err := gv.Schema("application/json")
	if err != nil {
		return nil, fmt.Errorf("reading the OpenAPI v3 schema of %s: %w", bindingGroupVersion, err)
	}
	return schemaOfKind(data, bindingKind)
}

// schemaOfKind finds, in an OpenAPI v3 document of work.karmada.io/v1alpha2,
// the component schema of kind.
func schemaOfKind(doc []byte, kind string) (Schema, error) {
	var parsed struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &parsed); err != nil {
		return nil, fmt.Errorf("decoding the OpenAPI v3 schema of %s: %w", bindingGroupVersion, err)
	}
	for _, s := range parsed.Components.Schemas {
		gvks, _ := s["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			if m["group"] == "work.karmada.io" && m["version"] == "v1alpha2" && m["kind"] == kind {
				return mapSchema(s), nil
			}
		}
	}
	return nil, fmt.Errorf("the OpenAPI v3 schema of %s has no %s", bindingGroupVersion, kind)
}
