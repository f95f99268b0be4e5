// Package nodeconf puts Catena in front of a node's primary CNI: it chooses
// the primary's network config the way the runtime would, wraps its plugins
// as Catena's delegates in a generated conflist that sorts first, writes it
// atomically, keeps it current as the primary changes, and installs Catena's
// binaries into the CNI bin dir. catena-agent is its main.
//
// Files:
//
//	doc.go              this comment
//	installer.go        Config, Installer and Status: one Sync pass, from choosing the primary to writing the generated file
//	select.go           which conf dir file is the primary: the runtime's lexical order, Catena's own files passed over
//	primary.go          Primary: the primary's network config (a .conf or a .conflist), loaded and parsed
//	netdir.go           NetworkDirMode: a network's plugin dir, <conf dir>/<network>/*.conf, as the runtime reads it
//	plugins.go          every plugin the primary names must be in a CNI bin dir (ErrPluginMissing)
//	nesting.go          a primary's plugin that embeds Catena at any depth is refused
//	wrap.go             Wrap and CatenaOptions: the generated conflist, the primary's plugins as Catena's delegates
//	generated.go        Generated: the key that says catena-agent generated a file, and from which primary
//	mode.go             the generated file's mode: at most the primary's
//	ifchanged.go        writeIfChanged: fileutil's atomic write, only when the content or the mode differs
//	binaries.go         InstallBinaries: catena and catenactl copied into the CNI bin dir
//	inplace.go          what a pass does once the generated file is in place: files of an earlier --conf-name retired, adoption
//	adoptpass.go        adoption run on every pass with the file in place (Adopter)
//	taken.go            Taken: the generated file renamed away by Cilium's exclusive mode, or removed or changed by another writer
//	rewrite_backoff.go  the rewrites backed off against another writer that keeps taking the file away; ConflistObserver
//	ready.go            Current: readiness from what is on disk now
//	stale.go            StaleMount: the conf dir mount no longer shows the host's (mountinfo)
//	sweep.go            SweepTemp: temp files an agent killed mid-write left
//	interlock.go        DirLock: the conf dir's interlock between agents and uninstall
//	uninstall.go        Uninstall: the generated file (only if marked) and the binaries removed
//	uninstall_held.go   UninstallHeld: uninstall under the interlock, waiting for agents and for a rewrite
//	watch.go            Watch: a Sync now, after every change in the conf dir (debounced) and every resync
//	watch_dir.go        the fsnotify watch of the conf dir that follows the dir across a rename and re-creation
//	watch_netdir.go     the fsnotify watch of the primary's network dir
//	leave.go            Watch's last step: the generated file removed when Leaving says the agent leaves for good
//	oneof.go            oneOf: a setting that must be empty or one of a few values
package nodeconf
