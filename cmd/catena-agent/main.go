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
