// Package clitest has the test helpers that catenactl's and catena-agent's
// tests share.
//
// Files:
//
//	doc.go         this comment
//	clitest.go     AssertTerminalSafe: output a terminal could act on fails the test
//	syncbuffer.go  SyncBuffer: an output sink safe for a command's goroutines and the test
package clitest
