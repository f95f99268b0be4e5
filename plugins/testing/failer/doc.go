// Command failer is a test-only CNI plugin that fails, hangs or misbehaves on
// demand. Tests place it anywhere in a chain (typically inside a catena
// delegates list) to exercise error handling, timeouts and rollback.
//
// Netconf fields (all optional):
//
//	failAdd, failDel, failCheck  bool   fail that verb with errorCode
//	failStatus                   bool   fail STATUS with code 50 (plugin not available)
//	errorCode                    uint   code for injected failures (default 100)
//	faultFile                    string fail* flags apply only while this file exists
//	faultDir                     string files in it turn faults on while they exist:
//	                                    fail-add, fail-del fail the verb; hang-add, hang-del
//	                                    sleep the duration they hold first; kill-add sends
//	                                    SIGKILL to the parent if it is catena (faultdir.go)
//	hangAdd                      string duration to sleep before answering ADD
//	hangGC                       string duration GC sleeps, after logging its invocation
//	                                    and before its GC-VALID line (see logFile)
//	hangDel                      string duration to sleep before answering DEL (while
//	                                    faultFile exists, if set)
//	waitFile                     string ADD blocks until this file exists (10ms polling)
//	waitTimeout                  string how long ADD waits for waitFile (default 60s);
//	                                    on expiry ADD fails with errorCode
//	delRequiresAdd               bool   ADD records <stateDir>/<containerID>-<ifname>;
//	                                    DEL fails unless that file exists, then removes it
//	stateDir                     string directory for delRequiresAdd state (required with it)
//	pidFile                      string ADD first starts a child (sleep, as long as hangAdd,
//	                                    which is required) in failer's process group and
//	                                    writes "<failer pid>\n<child pid>\n" here, atomically
//	daemonFile                   string a DEL that succeeds first leaves a process behind,
//	                                    as a delegate that starts a daemon does: a sleep of
//	                                    a minute in a session of its own, holding whatever
//	                                    fds failer inherited; its PID is written here,
//	                                    atomically (child.go)
//	padError                     int    append this many 'x' to an injected error's message
//	floodStdout                  int    every verb first writes this many spaces to stdout
//	                                    (before its result or error, which stays valid JSON)
//	floodStderr                  int    every verb first writes this many bytes of
//	                                    "failer <VERB> stderr noise\n" lines to stderr
//	logFile                      string append "<VERB> <containerID> <ifname> <netns>\n"
//	                                    per invocation (empty fields are written as "-");
//	                                    GC adds "GC-VALID <containerID>/<ifname> ...\n"
//	                                    with its valid attachments, sorted
//
// On ADD success failer returns its prevResult converted to its cniVersion,
// like any chained plugin, or an empty result of its cniVersion when there is
// no prevResult. Nothing but the result or the CNI error is written to stdout.
//
// Files:
//
//	doc.go       this comment
//	main.go      main: the CNI verbs through skel
//	failer.go    NetConf and the verbs: ADD, DEL, CHECK and STATUS, failing, hanging or waiting as the config says
//	hangdel.go   DEL that hangs first, while faultFile exists
//	gc.go        GC: logs the valid attachments it was given, after hangGC
//	faultdir.go  the faults faultDir's files turn on, for the chaos soak
//	child.go     the child in failer's process group (pidFile) and the daemon a DEL leaves behind (daemonFile)
//	flood.go     stdout and stderr flooded, injected errors padded
package main
