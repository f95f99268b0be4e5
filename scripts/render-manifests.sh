#!/usr/bin/env bash
# Renders deploy/catena.yaml and deploy/uninstall.yaml from the chart
# (deploy/chart/catena) with its default values, the Namespace included,
# into DIR (default: deploy/), for make manifests; the deploy package's test
# renders into a temp dir and compares. Needs bin/tools/helm
# (scripts/install-helm.sh).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${repo}/deploy}"
helm="${HELM:-${repo}/bin/tools/helm}"
chart="${repo}/deploy/chart/catena"

# render FILE HEADER ARGS...: helm template, without its "# Source:" lines,
# after HEADER.
render() {
	local file="$1" header="$2"
	shift 2
	{
		printf '%s\n' "$header"
		"$helm" template catena "$chart" --namespace catena-system --set namespace.create=true "$@" |
			grep -v '^# Source: ' | sed '1{/^---$/d}' | cat -s | awk 'NR > 1 && !(prev == "" && $0 == "---") { print prev } { prev = $0 } END { print prev }'
	} >"${file}.tmp"
	mv -f "${file}.tmp" "$file"
}

render "${out}/catena.yaml" "# Catena on every node: kubectl apply -f deploy/catena.yaml
#
# Rendered from the Helm chart deploy/chart/catena with its default values
# by make manifests; do not edit (a test compares). With Helm:
#   helm install catena deploy/chart/catena -n catena-system --create-namespace
#
# The DaemonSet runs \`catena-agent run\` in the host's network namespace. It
# wraps the node's primary CNI config (the file the runtime loads first in
# /etc/cni/net.d) in 00-catena.conflist, copies catena and catenactl into
# /opt/cni/bin, adopts the pods the primary made before, and keeps all that
# current. A rollout leaves Catena installed on the node (no pod may bypass
# it); deleting the DaemonSet makes each agent remove 00-catena.conflist as
# it exits (catena stays in /opt/cni/bin), and deploy/uninstall.yaml does it
# where an agent could not see that (docs/upgrade-uninstall.md).
#
# The pod template also runs as a static pod: drop serviceAccountName and
# envFrom (a static pod may reference neither), and put any option on the
# command line instead (--lock-timeout=...)."

render "${out}/uninstall.yaml" "# Removes Catena from every node, safely, where the agents did not remove
# it as their DaemonSet was deleted (docs/upgrade-uninstall.md):
#
#   kubectl delete daemonset -n catena-system catena-agent --cascade=foreground --wait
#   kubectl wait -n catena-system --for=delete pod -l app.kubernetes.io/component=agent --timeout=2m
#   kubectl apply -f deploy/uninstall.yaml                    # on each node:
#       wait for any agent still holding /etc/cni/net.d/.catena-agent.lock
#       to exit (up to --agent-timeout, 60 s), remove 00-catena.conflist (only
#       if it carries catena-agent's marker; the primary's file is never
#       touched), check for 1 s that it stays removed, list the records left,
#       and keep holding the lock: an agent pod started meanwhile writes
#       nothing
#   kubectl -n catena-system logs -l app.kubernetes.io/component=uninstall
#       (\"removed ...\", or \"not present\" where the agent removed it, on
#       every node; an error says what still runs)
#   kubectl delete -f deploy/uninstall.yaml -f deploy/catena.yaml
#
# Rendered from deploy/chart/catena (--set uninstall.manifest=true) by make
# manifests; do not edit. catena and catenactl stay in /opt/cni/bin
# (uninstall.removeBinaries=true removes them too). Pods created through
# Catena tear down through the primary's plugins afterwards." --set uninstall.manifest=true
