#!/usr/bin/env bash
# Builds Catena's image from the Dockerfile with Debian's buildah and writes
# it as an OCI archive that `ctr images import` accepts:
#
#   bin/catena-image.tar   the archive, tagged localhost/catena:<version>
#   bin/catena-image.ref   that reference, one line
#   bin/image-rootfs/      iptables for the agent's delegates, staged from
#                          this host by scripts/image-rootfs.sh
#
# Run as root after `make build`. buildah's storage is private (--root and
# --runroot under bin/buildah/, vfs driver); buildah also writes its blob-info
# cache under /var/lib/containers/cache whatever --root says, so it runs in a
# private mount namespace with a tmpfs over /var/lib: the host is left as
# found. IMAGE_VERSION sets the tag (default: the release version, from
# libchain/release/release.go, as deploy/catena.yaml has it; e.g.
# IMAGE_VERSION=$(git describe --always) for an upgrade).
# IMAGE_BIN_DIR takes the binaries from another dir than bin/, and
# IMAGE_ARCHIVE writes the archive elsewhere (then no .ref is written): the
# Kubernetes test builds its upgrade image so.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'image: %s\n' "$*" >&2; }

release="$(sed -n 's/^const Version = "\(v[^"]*\)"$/\1/p' "${repo}/libchain/release/release.go")"
if [[ -z "$release" ]]; then
	log "error: no const Version in libchain/release/release.go"
	exit 1
fi
version="${IMAGE_VERSION:-$release}"
if [[ ! "$version" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
	log "error: version ${version@Q} is not a valid image tag"
	exit 1
fi
ref="localhost/catena:${version}"
bins="${IMAGE_BIN_DIR:-${repo}/bin}"
for b in catena catenactl catena-agent; do
	if [[ ! -x "${bins}/${b}" ]]; then
		log "error: ${bins}/${b} missing: run make build first"
		exit 1
	fi
done
if ! command -v buildah >/dev/null 2>&1; then
	bash "${repo}/scripts/install-buildah.sh"
fi

work="${repo}/bin/buildah"
archive="${IMAGE_ARCHIVE:-${repo}/bin/catena-image.tar}"
mkdir -p "${work}/root" "${work}/runroot" "${work}/tmp"
# The build context: the repo, or a private copy of the Dockerfile and the
# binaries in its bin/ when IMAGE_BIN_DIR names other ones.
context="$repo"
if [[ -n "${IMAGE_BIN_DIR:-}" ]]; then
	context="$(mktemp -d "${work}/tmp/context.XXXXXX")"
	trap 'rm -rf "$context"' EXIT
	mkdir "${context}/bin"
	cp "${repo}/Dockerfile" "${context}/"
	for b in catena catenactl catena-agent; do
		cp "${bins}/${b}" "${context}/bin/${b}"
	done
fi
# The rest of the image's files (iptables for the delegates the agent runs),
# staged from this host into the context's bin/image-rootfs.
bash "${repo}/scripts/image-rootfs.sh" "${context}/bin/image-rootfs"
# An explicit policy, so that nothing depends on /etc/containers/policy.json.
printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"${work}/policy.json"
rm -f "${archive}.tmp"

# What the image says of itself (OCI annotation keys, as config labels and
# manifest annotations): its version, the commit it was built from
# ("-dirty" when the tree had changes, "unknown" outside a git checkout), its
# licence and its source.
revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ "$revision" != unknown && -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
	revision="${revision}-dirty"
fi
created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
meta=()
for kv in "org.opencontainers.image.title=catena" \
	"org.opencontainers.image.description=Catena, a chained CNI meta-plugin: the plugin, catenactl and catena-agent" \
	"org.opencontainers.image.version=${version}" \
	"org.opencontainers.image.revision=${revision}" \
	"org.opencontainers.image.licenses=Apache-2.0" \
	"org.opencontainers.image.source=https://github.com/catena-cni/catena" \
	"org.opencontainers.image.created=${created}"; do
	meta+=(--label "$kv" --annotation "$kv")
done

start=$SECONDS
log "building ${ref} (${revision}) with buildah (about a minute on 2 cores)"
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m --propagation private env TMPDIR="${work}/tmp" \
	WORK="$work" CONTEXT="$context" REF="$ref" OUT="${archive}.tmp" bash -euo pipefail -c '
	mount -t tmpfs -o mode=0755 catena-image /var/lib
	b() { buildah --root "$WORK/root" --runroot "$WORK/runroot" --storage-driver vfs "$@"; }
	b bud --signature-policy "$WORK/policy.json" --layers=false "${@}" -f "$CONTEXT/Dockerfile" -t "$REF" "$CONTEXT"
	b push --signature-policy "$WORK/policy.json" "$REF" "oci-archive:$OUT:$REF"
	b rmi "$REF" >/dev/null
' - "${meta[@]}"
mv -f "${archive}.tmp" "$archive"
if [[ -z "${IMAGE_ARCHIVE:-}" ]]; then
	printf '%s\n' "$ref" >"${repo}/bin/catena-image.ref"
fi
log "wrote ${archive} (${ref}) in $((SECONDS - start)) s"
