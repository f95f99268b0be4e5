// Command minimal is the floor a Go process costs: it prints one line and
// exits. The bench's cpu phase (tools/bench/cpu.go) runs it beside catena
// to express catena's CPU per call as a multiple of it; it is built with the
// same flags as catena (static, -trimpath -ldflags='-s -w').
//
// Files:
//
//	doc.go   this comment
//	main.go  main: one line printed
package main
