#!/usr/bin/env bash
# Builds the pinned Kubernetes node and control plane that the Kubernetes
# integration test (integration/k8s_*_test.go) runs, from the Go module proxy:
#
#   bin/k8s/<K8S_VERSION>/  kube-apiserver kube-controller-manager
#                           kube-scheduler kubectl kubelet etcd
#
# k8s.io/kubernetes replaces its staging modules with ./staging/..., and etcd's
# server module is built from a module with replace directives of its own, so
# `go install pkg@version` refuses both. Each is built through a throw-away
# wrapper module generated in a private temp dir (removed on exit):
#   - kubernetes: require k8s.io/kubernetes, plus one
#     `replace k8s.io/<m> => k8s.io/<m> v0.<minor>.<patch>` per staging module,
#     read from kubernetes's own go.mod;
#   - etcd: require go.etcd.io/etcd/server/v3, whose root package is main.
# Idempotent: each group is built only when its version file in the bin dir does not
# name the pinned version or a binary is missing. 10 to 40 minutes cold on 2
# cores; seconds when cached.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"

log() { printf 'install-k8s: %s\n' "$*" >&2; }

use_local_go

if [[ ! "$K8S_VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
	log "error: K8S_VERSION ${K8S_VERSION@Q} is not v1.<minor>.<patch>"
	exit 1
fi
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

dest="${repo}/bin/k8s/${K8S_VERSION}"
k8s_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)

work="$(mktemp -d /tmp/catena-install-k8s.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest"
gobuild=(env CGO_ENABLED=0 go build -trimpath)

# --- Kubernetes ---------------------------------------------------------------
k8s_vfile="${dest}/.kubernetes.version"
k8s_want="kubernetes=${K8S_VERSION} staging=${staging_version}"
if version_current "$k8s_vfile" "$k8s_want" "$dest" "${k8s_bins[@]}"; then
	log "kubernetes ${K8S_VERSION} already in ${dest}"
else
	start=$SECONDS
	log "building kubernetes ${K8S_VERSION} (${k8s_bins[*]}) into ${dest} (8 to 35 minutes cold: 34 measured on a busy 2-core machine; seconds with a warm Go cache)"
	rm -f "$k8s_vfile"
	mod="${work}/kubernetes"
	mkdir -p "$mod"
	(
		cd "$mod"
		go mod init catena.local/k8s-build >/dev/null 2>&1
		go mod download "k8s.io/kubernetes@${K8S_VERSION}"
		kgomod="$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" |
			sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
		mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/.*#\1#p' "$kgomod")
		if ((${#staging[@]} == 0)); then
			log "error: no staging replaces found in ${kgomod}"
			exit 1
		fi
		log "${#staging[@]} staging modules replaced with ${staging_version}"
		go mod edit -require="k8s.io/kubernetes@${K8S_VERSION}"
		for m in "${staging[@]}"; do
			go mod edit -replace="${m}=${m}@${staging_version}"
		done
		{
			printf '//go:build tools\n\npackage tools\n\nimport (\n'
			for b in "${k8s_bins[@]}"; do
				printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$b"
			done
			printf ')\n'
		} >tools.go
		go mod tidy
		pkgs=()
		for b in "${k8s_bins[@]}"; do
			pkgs+=("k8s.io/kubernetes/cmd/${b}")
		done
		# The -X of client-go's version is for kubectl; the linker ignores it
		# in the binaries that do not link that package.
		"${gobuild[@]}" -ldflags="-s -w \
-X k8s.io/component-base/version.gitVersion=${K8S_VERSION} \
-X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}" \
			-o "${work}/out/" "${pkgs[@]}"
	)
	for b in "${k8s_bins[@]}"; do
		mv -f "${work}/out/${b}" "${dest}/${b}"
	done
	write_version "$k8s_vfile" "$k8s_want"
	log "kubernetes ${K8S_VERSION} built in $((SECONDS - start)) s"
fi

# --- etcd ---------------------------------------------------------------------
etcd_vfile="${dest}/.etcd.version"
etcd_want="etcd=${ETCD_VERSION}"
if version_current "$etcd_vfile" "$etcd_want" "$dest" etcd; then
	log "etcd ${ETCD_VERSION} already in ${dest}"
else
	start=$SECONDS
	log "building etcd ${ETCD_VERSION} into ${dest} (3 to 5 minutes cold)"
	rm -f "$etcd_vfile"
	mod="${work}/etcd"
	mkdir -p "$mod"
	(
		cd "$mod"
		go mod init catena.local/etcd-build >/dev/null 2>&1
		go mod edit -require="go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
		printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
		go mod tidy
		"${gobuild[@]}" -ldflags='-s -w' -o "${work}/out/etcd" go.etcd.io/etcd/server/v3
	)
	mv -f "${work}/out/etcd" "${dest}/etcd"
	write_version "$etcd_vfile" "$etcd_want"
	log "etcd ${ETCD_VERSION} built in $((SECONDS - start)) s"
fi

log "done: $(cd "$dest" && echo "${k8s_bins[@]}" etcd)"
