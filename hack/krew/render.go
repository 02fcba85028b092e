package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"text/template"
)

//go:embed rebalance.yaml.tmpl
var manifestTemplate string

// render fills the manifest template with rel.
func render(rel release) ([]byte, error) {
	t, err := template.New("rebalance.yaml").Option("missingkey=error").Parse(manifestTemplate)
	if err != nil {
		return nil, fmt.Errorf("parsing hack/krew/rebalance.yaml.tmpl: %w", err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, rel); err != nil {
		return nil, fmt.Errorf("rendering hack/krew/rebalance.yaml.tmpl: %w", err)
	}
	return buf.Bytes(), nil
}
