package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"
)

const (
	krewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	krewKind       = "Plugin"
	// maxShortDescription is krew-index's limit; `kubectl krew search`
	// prints the short description in a single table column.
	maxShortDescription = 50
)

var (
	pluginNameRE = regexp.MustCompile(`^[\w-]+$`)
	sha256RE     = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// Windows refuses these as file names, and krew stores plugins by name.
	windowsReserved = []string{"CON", "PRN", "AUX", "NUL",
		"COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8", "COM9",
		"LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9"}
)

// Manifest is the part of a krew Plugin that the project writes. Decoding is
// strict, so a misspelled field fails instead of being dropped.
type Manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Caveats          string     `json:"caveats,omitempty"`
		Platforms        []Platform `json:"platforms"`
	} `json:"spec"`
}

// Platform is one download of a krew Plugin.
type Platform struct {
	Selector *Selector `json:"selector"`
	URI      string    `json:"uri"`
	SHA256   string    `json:"sha256"`
	Bin      string    `json:"bin"`
	Files    []File    `json:"files"`
}

// Selector picks the platforms a download is for. The project only uses
// matchLabels; matchExpressions is decoded so that it can be rejected.
type Selector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []any             `json:"matchExpressions,omitempty"`
}

// File copies files matching From in the archive to To in the plugin's directory.
type File struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// validateFile checks the manifest at path; the plugin name is the file's.
func validateFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading krew manifest: %w", err)
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if err := validate(name, data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// validate decodes a manifest and checks it the way `kubectl krew install`
// and krew-index's review do. All problems are reported together.
func validate(name string, data []byte) error {
	var m Manifest
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return fmt.Errorf("decoding krew manifest: %w", err)
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if m.APIVersion != krewAPIVersion {
		add("apiVersion is %q: krew only reads %q", m.APIVersion, krewAPIVersion)
	}
	if m.Kind != krewKind {
		add("kind is %q: set it to %q", m.Kind, krewKind)
	}
	if !pluginNameRE.MatchString(name) || slices.ContainsFunc(windowsReserved, func(r string) bool { return strings.EqualFold(r, name) }) {
		add("plugin name %q is not allowed: use letters, digits, '_' and '-' only", name)
	}
	if m.Metadata.Name != name {
		add("metadata.name is %q: it must match the file name %q", m.Metadata.Name, name)
	}

	spec := m.Spec
	if err := validateVersion(spec.Version); err != nil {
		errs = append(errs, err)
	}
	switch sd := spec.ShortDescription; {
	case sd == "":
		add("spec.shortDescription is empty: describe the plugin in a few words")
	case strings.ContainsAny(sd, "\r\n"):
		add("spec.shortDescription spans several lines: keep it to one")
	case len(sd) > maxShortDescription:
		add("spec.shortDescription has %d characters: shorten it to %d", len(sd), maxShortDescription)
	}
	if strings.TrimSpace(spec.Description) == "" {
		add("spec.description is empty: say what the plugin does")
	}
	if u, err := url.Parse(spec.Homepage); err != nil || u.Scheme != "https" || u.Host == "" {
		add("spec.homepage %q is not an https address: point it at the project page", spec.Homepage)
	}

	if len(spec.Platforms) == 0 {
		add("spec.platforms is empty: list a download per os/arch")
	}
	for i, p := range spec.Platforms {
		for _, err := range validatePlatform(p) {
			add("spec.platforms[%d]: %w", i, err)
		}
	}
	for _, t := range targets {
		var matches int
		for _, p := range spec.Platforms {
			if p.Selector != nil && p.Selector.matches(t) {
				matches++
			}
		}
		if matches != 1 {
			add("%d platforms match %s/%s: krew needs exactly one", matches, t.OS, t.Arch)
		}
	}
	return errors.Join(errs...)
}

// validateVersion accepts semantic versions with a leading "v", as krew does.
func validateVersion(v string) error {
	if !strings.HasPrefix(v, "v") {
		return fmt.Errorf("spec.version %q has no leading v: write it as v%s", v, v)
	}
	if _, err := semver.Parse(strings.TrimPrefix(v, "v")); err != nil {
		return fmt.Errorf("spec.version %q is not a semantic version (vMAJOR.MINOR.PATCH): %w", v, err)
	}
	return nil
}

func validatePlatform(p Platform) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if u, err := url.Parse(p.URI); err != nil || u.Scheme != "https" || u.Host == "" {
		add("uri %q is not an https address of the archive", p.URI)
	}
	if !sha256RE.MatchString(p.SHA256) {
		add("sha256 %q is not 64 lower-case hex digits: copy it from checksums.txt", p.SHA256)
	}
	if p.Bin == "" {
		add("bin is empty: name the plugin executable")
	}
	if p.Files != nil && len(p.Files) == 0 {
		add("files is an empty list: list the files to install or leave files out")
	}
	installsBin := p.Files == nil
	for j, f := range p.Files {
		if f.From == "" || f.To == "" {
			add("files[%d] needs both from and to", j)
		}
		if f.From == p.Bin || f.From == "./"+p.Bin {
			installsBin = true
		}
	}
	if p.Bin != "" && !installsBin {
		add("bin %q is not among the files: add {from: %s, to: .}", p.Bin, p.Bin)
	}

	switch sel := p.Selector; {
	case sel == nil:
		add("selector is missing: match the platform's os and arch")
	case len(sel.MatchExpressions) > 0:
		add("selector uses matchExpressions: use matchLabels with os and arch")
	case len(sel.MatchLabels) == 0:
		add("selector.matchLabels is empty: set os and arch")
	default:
		for k := range sel.MatchLabels {
			if k != "os" && k != "arch" {
				add("selector label %q is not supported: krew only knows os and arch", k)
			}
		}
	}
	return errs
}

// matches reports whether krew would pick this selector on t.
func (s *Selector) matches(t target) bool {
	if len(s.MatchLabels) == 0 || len(s.MatchExpressions) > 0 {
		return false
	}
	for k, v := range s.MatchLabels {
		if (k == "os" && v != t.OS) || (k == "arch" && v != t.Arch) || (k != "os" && k != "arch") {
			return false
		}
	}
	return true
}
