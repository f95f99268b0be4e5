package main

import (
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], env{
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		getenv:   os.Getenv,
		now:      time.Now,
		netDir:   defaultNetDir,
		ownerUID: 0,
	}))
}
