// Command calicostub is a test-only stand-in for Calico's `calico` CNI
// plugin, whose real binary needs a Calico datastore. Like calico it gives
// the sandbox a veth with host routes and an IP from its "ipam" section: it
// delegates ADD, CHECK and DEL to the reference plugin ptp (found in
// CNI_PATH) with its own config, type changed to ptp (ptp honours "mtu" and
// "ipam" and ignores the rest). Tests put it first in a Calico-shaped
// conflist [calico, bandwidth, portmap], installed as "calico".
//
// Netconf fields besides ptp's:
//
//	generation  any     a value the test changes at each rewrite of the conflist
//	recordFile  string  if set, every ADD, CHECK and DEL that succeeds appends
//	                    {"cmd","containerID","ifName","generation"} as one JSON
//	                    line, so a test sees which config each verb was given
//
// Files:
//
//	doc.go   this comment
//	main.go  main: the CNI verbs through skel
//	stub.go  ADD, CHECK and DEL delegated to ptp with calicostub's own config, each recorded with its config generation
package main
