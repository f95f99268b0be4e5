// Package clitest has the test helpers that catenactl's and catena-agent's
// tests share.
//
// Files:
//
//	doc.go         this comment
//	clitest.go     AssertTerminalSafe: output a terminal could act on fails the test
//	failwriter.go  FailWriter: a stdout whose writes fail, as a full disk's or a closed pipe's
//	syncbuffer.go  SyncBuffer: an output sink safe for a command's goroutines and the test
//	version.go     VersionLine: what a binary prints for --version
package clitest
