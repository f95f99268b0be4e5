#!/usr/bin/env bash
# Installs what Catena's tests, demo and bench need on a fresh Debian 12
# machine, as root. Idempotent: apt runs only when a package is missing, and
# the Go installs run only when bin/ does not already hold the pinned
# versions. `make test` and .ci/run run it (`make plugins`); `make demo`
# needs only the first part, scripts/install-demo-deps.sh.
#
#   bin/cni/   bridge host-local portmap tuning loopback firewall
#              ptp bandwidth (a Calico-shaped primary)          (CNI_PATH)
#   bin/       cnitool                          (scripts/install-demo-deps.sh)
#   bin/cni/flannel, from the Go module proxy or ../shared/vendor-src
#                                               (scripts/install-flannel.sh)
#   bin/containerd2/  containerd 2.4, and Debian's containerd 1.6 and runc
#                                               (scripts/install-containerd.sh)
#   bin/crio/  CRI-O, pinns, copyimg, and Debian's conmon
#                                               (scripts/install-crio.sh)
#   buildah, for `make image`                   (scripts/install-buildah.sh)
#   bin/k8s/   etcd and the Kubernetes components (scripts/install-k8s.sh)
#   bin/tools/promtool, Prometheus's, for the alerting rules
#                                               (scripts/install-promtool.sh)
#   bin/tools/jaeger, Jaeger v2, for the integration tests' traces
#                                               (scripts/install-jaeger.sh)
#   bin/tools/cyclonedx-gomod, for make sbom and its test
#                                               (scripts/install-cyclonedx.sh)
#   bin/tools/helm, for the chart: make manifests, make chart, make lint,
#              the deploy tests and the Kubernetes node test
#                                               (scripts/install-helm.sh)
#   bin/tools/prometheus-operator-crds/, its ServiceMonitor and
#              PrometheusRule CRDs, for the Kubernetes node test
#                                               (scripts/install-prometheus-crds.sh)
#   /usr/lib/cni/  Debian 12's reference plugins (apt containernetworking-plugins,
#              1.1.1: VERSION answers at most 1.0.0), which TestAutoVersions
#              drives through "cniVersion": "auto"
#
# About 30 minutes cold on 2 cores (Kubernetes and CRI-O are most of it);
# seconds warm.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# flannel first: with neither the module proxy nor the pinned source it
# stops at once, before minutes of other installs.
bash "${repo}/scripts/install-flannel.sh"
bash "${repo}/scripts/install-demo-deps.sh"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"
log() { printf 'install-deps: %s\n' "$*" >&2; }
ensure_apt_pkgs containernetworking-plugins
bash "${repo}/scripts/install-containerd.sh"
bash "${repo}/scripts/install-crio.sh"
bash "${repo}/scripts/install-buildah.sh"
bash "${repo}/scripts/install-k8s.sh"
bash "${repo}/scripts/install-promtool.sh"
bash "${repo}/scripts/install-jaeger.sh"
bash "${repo}/scripts/install-cyclonedx.sh"
bash "${repo}/scripts/install-helm.sh"
bash "${repo}/scripts/install-prometheus-crds.sh"

printf 'install-deps: done\n' >&2
