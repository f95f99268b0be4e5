// Package selfwatch tells an agent whose pod is stopping whether its
// DaemonSet was deleted (an uninstall: helm uninstall, kubectl delete) or
// is still there (a rollout, a drain, a node shutdown), so that the agent
// removes the generated conflist only in the first case.
//
// The agent watches its own DaemonSet, and only it (a field selector on its
// name; the Role's resourceNames), from its start. At SIGTERM, Gone says:
//
//   - deleted: the watch saw the DaemonSet present and then deleted, or
//     being deleted (a deletionTimestamp, as a foreground deletion sets);
//     or, not having seen that yet, a GET finds it missing or being
//     deleted. Helm deletes a release's DaemonSet before its RBAC and
//     ServiceAccount, whatever its hooks, and an established watch still
//     delivers the deletion after them.
//   - kept, for every doubt: never seen present (a static pod, a pod with
//     no DaemonSet), present, re-created under another UID (a new install
//     will take over), or a GET that fails.
//
// Files:
//
//	doc.go      this comment
//	watch.go    Watch: the informer, its state, and Gone
package selfwatch
