// Command noop is a test-only CNI plugin that does nothing, as cheaply as a
// Go plugin can: it drains its stdin and, for ADD, prints a fixed result
// (one interface, one address) of the request's cniVersion; VERSION prints
// the versions it supports; every other verb prints nothing and succeeds.
// The bench's cpu phase puts three of it under catena so that only catena's
// own work is counted. It imports no JSON library: it must cost no more than
// a minimal Go binary plus reading a few hundred bytes.
//
// Files:
//
//	doc.go   this comment
//	main.go  main: stdin drained, a fixed result for ADD, the supported versions for VERSION
package main
