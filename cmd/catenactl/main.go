// Command catenactl is Catena's operator CLI: it lists and shows the
// attachments Catena records, garbage-collects and repairs them without a
// runtime, checks a node's setup (doctor), and reports the event journal as
// statistics or Prometheus metrics. See `catenactl --help`.
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
