// Package sbom reads the CycloneDX SBOMs make sbom writes and checks them
// against the Go build they describe: every module of the build at its
// version.
package sbom

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

// maxBOM bounds an SBOM read back.
const maxBOM = 16 << 20

// BOM is what a check needs of a CycloneDX BOM (JSON).
type BOM struct {
	BOMFormat   string      `json:"bomFormat"`
	SpecVersion string      `json:"specVersion"`
	Metadata    Metadata    `json:"metadata"`
	Components  []Component `json:"components"`
}

// Metadata is the BOM's subject and the tool that wrote it.
type Metadata struct {
	Component Component `json:"component"`
	Tools     []Tool    `json:"tools"`
}

// Tool is a generator of the BOM.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Component is one module.
type Component struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
}

// Read reads the CycloneDX JSON BOM at path.
func Read(path string) (*BOM, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sbom %s: %w", path, err)
	}
	if fi.Size() > maxBOM {
		return nil, fmt.Errorf("sbom %s: %d bytes, more than %d", path, fi.Size(), maxBOM)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sbom %s: %w", path, err)
	}
	var bom BOM
	if err := json.Unmarshal(b, &bom); err != nil {
		return nil, fmt.Errorf("sbom %s: %w", path, err)
	}
	if bom.BOMFormat != "CycloneDX" {
		return nil, fmt.Errorf("sbom %s: format %q, not CycloneDX", path, bom.BOMFormat)
	}
	return &bom, nil
}

// Versions are the BOM's components, by name.
func (b *BOM) Versions() map[string]string {
	m := make(map[string]string, len(b.Components))
	for _, c := range b.Components {
		m[c.Name] = c.Version
	}
	return m
}

// Missing lists each module of want (path to version) that the BOM lacks
// or names at another version, sorted.
func (b *BOM) Missing(want map[string]string) []string {
	have := b.Versions()
	var out []string
	for path, v := range want {
		switch got, ok := have[path]; {
		case !ok:
			out = append(out, path+"@"+v+": absent")
		case got != v:
			out = append(out, path+"@"+v+": the SBOM says "+got)
		}
	}
	slices.Sort(out)
	return out
}

// Extra lists each component of the BOM that want does not name, sorted.
func (b *BOM) Extra(want map[string]string) []string {
	var out []string
	for _, c := range b.Components {
		if _, ok := want[c.Name]; !ok {
			out = append(out, c.Name+"@"+c.Version)
		}
	}
	slices.Sort(out)
	return out
}
