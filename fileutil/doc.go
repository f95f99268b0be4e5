// Package fileutil is how Catena reaches the files it must trust and
// writes the ones it must not lose, in the manner of etcd's
// client/pkg/fileutil: one small leaf that the record store, the event
// journal, the libcni cache reader and the node installer share. It
// imports nothing of the module.
//
// # Files
//
//	doc.go       this comment
//	walk.go      the openat walk from a root: every directory checked, no symlink followed
//	walkfs.go    TrustedFs: an afero.Fs that reaches every path by that walk
//	trust.go     the ownership and mode checks, UntrustedError
//	open.go      Lstat, no-follow opens
//	readfile.go  ReadSmallFile and OpenRegular: bounded reads that can refuse a symlink
//	durable.go   durable writes: temp file, fsync, rename, fsync of the dir; durable remove, rename, mkdir
//	sync.go      fsync and fdatasync of a file, by raw system call in a one-P process
package fileutil
