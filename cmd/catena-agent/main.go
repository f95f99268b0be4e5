// Command catena-agent installs Catena on a node and keeps it installed: it
// wraps the node's primary CNI config in a generated conflist that runs it
// through Catena, copies Catena's binaries into the CNI bin dir, and, as
// `run`, serves health endpoints for the DaemonSet. See `catena-agent --help`.
package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/afero"
)

func main() {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	os.Exit(run(os.Args[1:], env{
		stdout:  os.Stdout,
		stderr:  os.Stderr,
		fs:      afero.NewOsFs(),
		selfDir: filepath.Dir(self),
		getenv:  os.Getenv, // without it no CATENA_AGENT_* variable (the ConfigMap) is read
	}))
}
