// Package faultfs provides two afero filesystems for testing the durability
// of the record store:
//
//   - CrashFs models what survives a crash: file data only once the file
//     is synced, directory entries (create, rename, remove) only once the
//     directory is synced. It can freeze the machine after any number of
//     operations and then show what a reboot would find (Image).
//   - FaultFs wraps any afero.Fs and makes the n-th write, sync, rename,
//     remove, create or mkdir fail with a given errno (ENOSPC, EIO,
//     EROFS...), once or from then on.
//
// Both are test support: they are deterministic, in memory (CrashFs) and
// safe for concurrent use.
//
// Files:
//
//	doc.go         this comment
//	crash.go       CrashFs: its inodes, the operations it counts, the crash (CrashAfter, LieAboutSync, Release)
//	crash_file.go  the files and directories a CrashFs opens: writes, syncs, reads
//	crash_ops.go   CrashFs's namespace operations: mkdir, create, rename, remove
//	image.go       Mode and Image: what a reboot finds after a crash, by how the machine went down
//	fault.go       FaultFs: the n-th operation of a kind fails with an errno, once or from then on
package faultfs
