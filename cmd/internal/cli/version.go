package cli

import (
	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/libchain/release"
)

// versionTemplate is what --version prints: "catenactl v0.1.0 (commit
// 1a2b3c4d5e6f, modified)".
const versionTemplate = "{{.Name}} {{.Version}}\n"

// SetVersion gives root a --version flag that prints the binary's name,
// Catena's version and the commit the binary was built from, on stdout.
func SetVersion(root *cobra.Command) {
	root.Version = release.String()
	root.SetVersionTemplate(versionTemplate)
}
