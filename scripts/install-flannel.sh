#!/usr/bin/env bash
# Builds flannel's CNI plugin, pinned in scripts/versions.env, into
# bin/cni/flannel (static), for the integration tests and the Kubernetes node
# test. The Go module proxy does not serve github.com/flannel-io/cni-plugin,
# so its source is read from the shared vendor-src dir beside the repo
# (../shared/vendor-src; for a git worktree, beside the main checkout; or
# $CATENA_VENDOR_SRC), whose README pins the release and commit. This
# script checks that README's row and the tree's sha256 against
# versions.env, copies the tree to a temp dir (the source is never written
# to, nor copied into the repo) and builds it there with CGO_ENABLED=0
# -trimpath, its dependencies from the module proxy. Idempotent: a stamp in
# bin/cni names what was built. 6 to 15 s cold here.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"

log() { printf 'install-flannel: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# The shared dir is beside the repo's checkout; in a linked git worktree,
# beside the main checkout (the parent of the common .git dir).
vendor_src="${CATENA_VENDOR_SRC:-}"
if [[ -z "$vendor_src" ]]; then
	vendor_src="$(realpath -m "${repo}/../shared/vendor-src")"
	common="$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
	if [[ ! -d "$vendor_src" && "$common" == */.git ]]; then
		vendor_src="$(realpath -m "${common%/.git}/../shared/vendor-src")"
	fi
fi
src="${vendor_src}/flannel-cni-plugin"
if [[ ! -f "${src}/go.mod" || ! -f "${vendor_src}/README.md" ]]; then
	die "flannel's source is not at ${src} (no go.mod, or no README.md beside it): the project expects the shared vendor-src dir beside the repo, ../shared/vendor-src (see its README); set CATENA_VENDOR_SRC to where it is"
fi

# The README's row: | `flannel-cni-plugin/` | upstream | release | commit | license |
row="$(grep -F '| `flannel-cni-plugin/` |' "${vendor_src}/README.md" || true)"
[[ -n "$row" ]] || die "${vendor_src}/README.md has no row for flannel-cni-plugin/"
IFS='|' read -r _ _ _ release commit _ <<<"$row"
release="$(echo "$release" | xargs)"
commit="$(echo "$commit" | xargs)"
if [[ "$release" != "$FLANNEL_VERSION" || "$commit" != "$FLANNEL_COMMIT" ]]; then
	die "${vendor_src}/README.md pins flannel ${release} (${commit}), versions.env ${FLANNEL_VERSION} (${FLANNEL_COMMIT}): update FLANNEL_* in scripts/versions.env after checking the new release"
fi
grep -q '^module github.com/flannel-io/cni-plugin$' "${src}/go.mod" || die "${src}/go.mod is not github.com/flannel-io/cni-plugin"
tree_sha="$(cd "$src" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
if [[ "$tree_sha" != "$FLANNEL_SRC_SHA256" ]]; then
	die "${src} is not the pinned ${FLANNEL_VERSION} tree: sha256 of its files ${tree_sha}, want ${FLANNEL_SRC_SHA256} (FLANNEL_SRC_SHA256 in scripts/versions.env)"
fi

use_local_go
cni_dir="${repo}/bin/cni"
stamp="${cni_dir}/.flannel.version"
want="flannel=${FLANNEL_VERSION} commit=${FLANNEL_COMMIT} src=${FLANNEL_SRC_SHA256} static"
if stamp_current "$stamp" "$want" "$cni_dir" flannel; then
	log "flannel ${FLANNEL_VERSION} already in ${cni_dir}"
	exit 0
fi

start=$SECONDS
log "building flannel ${FLANNEL_VERSION} from ${src} into ${cni_dir}"
work="$(mktemp -d /tmp/catena-install-flannel.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cp -R "$src" "${work}/src"
chmod -R u+w "${work}/src"
mkdir -p "$cni_dir"
rm -f "$stamp"
ldflags="-s -w -X main.Program=flannel -X main.Version=${FLANNEL_VERSION} -X main.Commit=${FLANNEL_COMMIT}"
(cd "${work}/src" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags="$ldflags" -o "${work}/flannel" .)
# Without CNI_COMMAND, the plugin prints its version line and exits 0.
about="$("${work}/flannel" 2>&1 || true)"
[[ "$about" == *"version ${FLANNEL_VERSION} "*"commit ${FLANNEL_COMMIT}"* ]] || die "the built flannel says ${about@Q}"
mv -f "${work}/flannel" "${cni_dir}/flannel.tmp"
mv -f "${cni_dir}/flannel.tmp" "${cni_dir}/flannel"
write_stamp "$stamp" "$want"
log "flannel ${FLANNEL_VERSION} built in $((SECONDS - start)) s"
