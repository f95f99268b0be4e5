package main

import (
	"os"
	"time"

	"github.com/catena-cni/catena/node/reconcile"
)

func main() {
	os.Exit(run(os.Args[1:], env{
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		getenv:   os.Getenv,
		now:      time.Now,
		netDir:   defaultNetDir,
		ownerUID: 0,
		kubelet:  func() (reconcile.Kubelet, error) { return reconcile.FindKubelet("") },
	}))
}
