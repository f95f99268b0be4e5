// Package fileutil is how Catena reaches the files it must trust and
// writes the files it must not lose, in the manner of etcd's
// client/pkg/fileutil: one small leaf that the record store (cache), the
// event journal (libchain/events), the libcni cache reader
// (libchain/libcnientry, node/adopt) and the node installer
// (node/nodeconf) share. It imports nothing of the module.
//
// # Trusted files
//
// TrustedFs is the filesystem of a trusted tree (the cache dir, the libcni
// results dir): on the real disk every path is reached by the openat walk
// from the tree's root, every directory on the way must be Catena's own and
// writable by nobody else, and no symlink is ever followed; anything else
// is an *UntrustedError, wrapping ErrUntrusted. CheckPrivateFile is the
// same verdict on a file Catena reads back. On afero.MemMapFs and the
// tests' fault-injecting filesystems, which have no owners, only the type
// checks apply.
//
// # Durable files
//
// A durable write replaces a file whole (temp file in the same directory,
// fsync, rename, fsync of the directory): WriteFileDurable for a writer
// that holds a lock on the path, WriteFileAtomic for one that does not.
// RemoveDurable, RenameDurable and MkdirAllDurable make a change of a
// directory survive a crash; SyncDir and SyncFile are the fsyncs.
//
// # Files
//
//	doc.go       this comment
//	walk.go      the openat walk from a root: every directory checked, no symlink followed
//	statinfo.go  FstatInfo: an os.FileInfo from fstat(2), as os.Lstat's
//	walkfs.go    TrustedFs: an afero.Fs that reaches every path by that walk
//	trust.go     the ownership and mode checks, UntrustedError
//	open.go      Lstat, no-follow opens
//	readfile.go  ReadSmallFile and OpenRegular: bounded reads that can refuse a symlink
//	durable.go   WriteFileDurable: temp file, fsync, rename, fsync of the dir, for a writer under a lock
//	atomic.go    WriteFileAtomic, WriteReaderAtomic: the same with a unique temp file and a mode, for writers without a lock
//	dirops.go    RemoveDurable, RenameDurable, MkdirAllDurable: directory changes made durable
//	sync.go      SyncFile and SyncDir: fsync and fdatasync, by raw system call in a one-P process
package fileutil
