// Command catenactl is Catena's operator CLI: it lists and shows the
// attachments Catena records, garbage-collects and repairs them without a
// runtime, checks a node's setup (doctor), and reports the event journal as
// statistics, Prometheus metrics or one attachment's waterfall. See
// `catenactl --help`.
//
// Files:
//
//	doc.go             this comment
//	main.go            main: run with the process's stdio, environment and clock
//	root.go            the root command and global flags; the config, cache dir and engine a command works on
//	records.go         every record of the cache dir read, one unreadable record never hiding the others
//	list.go            list: one row per attachment
//	show.go            show: one container's records, step by step
//	locks.go           whether an attachment's lock is held, without taking part in the locking
//	gc.go              gc: the attachments no longer alive torn down, by a --valid list or by their netns, without a runtime
//	repair.go          repair: the teardowns that need it retried; --abandon first gives up on one delegate
//	reconcile.go       reconcile: one pass of the node reconciler
//	doctor.go          doctor: the node's setup checked, one row per check
//	doctor_confdir.go  doctor's conf dir check: a generated conflist renamed away
//	doctor_netdir.go   doctor's check of the network's plugin dir
//	doctor_state.go    doctor's cache dir check: modes, owners, symlinks, locks
//	conf.go            the network config file with a catena entry, as a runtime picks it
//	stats.go           stats: the event journal summarised over a window
//	trace.go           trace: an attachment's last operations from the event journal, each as a waterfall of its steps
//	leaks.go           leaks: what the networks hold that no sandbox owns; repair --from-report
//	metrics.go         metrics: the event journal and the records as Prometheus text
//	output.go          JSON and table output, escaped for a terminal
package main
