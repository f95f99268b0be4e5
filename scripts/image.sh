#!/usr/bin/env bash
# Builds Catena's image from the Dockerfile with Debian's buildah and writes
# it as an OCI archive that `ctr images import` accepts:
#
#   bin/catena-image.tar   the archive, tagged localhost/catena:<version>
#   bin/catena-image.ref   that reference, one line
#
# Run as root after `make build`. buildah's storage is private (--root and
# --runroot under bin/buildah/, vfs driver); buildah also writes its blob-info
# cache under /var/lib/containers/cache whatever --root says, so it runs in a
# private mount namespace with a tmpfs over /var/lib: the host is left as
# found. IMAGE_VERSION sets the tag (default dev, as deploy/catena.yaml has
# it; e.g. IMAGE_VERSION=$(git describe --always) for an upgrade).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'image: %s\n' "$*" >&2; }

version="${IMAGE_VERSION:-dev}"
if [[ ! "$version" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
	log "error: version ${version@Q} is not a valid image tag"
	exit 1
fi
ref="localhost/catena:${version}"
for b in catena catenactl catena-agent; do
	if [[ ! -x "${repo}/bin/${b}" ]]; then
		log "error: bin/${b} missing: run make build first"
		exit 1
	fi
done
if ! command -v buildah >/dev/null 2>&1; then
	bash "${repo}/scripts/install-buildah.sh"
fi

work="${repo}/bin/buildah"
archive="${repo}/bin/catena-image.tar"
mkdir -p "${work}/root" "${work}/runroot" "${work}/tmp"
# An explicit policy, so that nothing depends on /etc/containers/policy.json.
printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"${work}/policy.json"
rm -f "${archive}.tmp"

log "building ${ref}"
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m --propagation private env TMPDIR="${work}/tmp" \
	WORK="$work" REPO="$repo" REF="$ref" OUT="${archive}.tmp" bash -euo pipefail -c '
	mount -t tmpfs -o mode=0755 catena-image /var/lib
	b() { buildah --root "$WORK/root" --runroot "$WORK/runroot" --storage-driver vfs "$@"; }
	b bud --signature-policy "$WORK/policy.json" --layers=false -f "$REPO/Dockerfile" -t "$REF" "$REPO"
	b push --signature-policy "$WORK/policy.json" "$REF" "oci-archive:$OUT:$REF"
	b rmi "$REF" >/dev/null
'
mv -f "${archive}.tmp" "$archive"
printf '%s\n' "$ref" >"${repo}/bin/catena-image.ref"
log "wrote ${archive} (${ref})"
