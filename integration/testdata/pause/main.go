// Command pause is the sandbox ("pause") process of the CRI integration
// tests' local image: no registry is reachable, so the tests build it and
// pack it as an OCI image themselves. It sleeps until SIGINT or SIGTERM and,
// as PID 1 of the sandbox, reaps any child it inherits.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
