// Command minimal is the floor a Go process costs: it prints one line and
// exits. The bench's cpu phase (scripts/bench/cpu.go) runs it beside catena
// to express catena's CPU per call as a multiple of it; it is built with the
// same flags as catena (static, -trimpath -ldflags='-s -w').
package main

import "os"

func main() {
	_, _ = os.Stdout.WriteString("minimal\n")
}
