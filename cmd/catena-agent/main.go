package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/node/reconcile"
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
		// without these --runtime-endpoint auto knows nothing of kubelet
		kubelet:     func() (reconcile.Kubelet, error) { return reconcile.FindKubelet("") },
		nodeRuntime: nodeRuntimeVersion,
	}))
}
