# shellcheck shell=bash
# Shared helpers for Catena's install scripts. Source it; it defines
# functions only. Callers define log().

# ensure_apt_pkgs [--with-recommends] PKG... installs the Debian packages
# that are missing (apt runs only then) and logs what it found.
ensure_apt_pkgs() {
	local p status
	local missing=() opts=(--no-install-recommends)
	if [[ "${1:-}" == --with-recommends ]]; then
		opts=()
		shift
	fi
	for p in "$@"; do
		status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
		if [[ "$status" != "install ok installed" ]]; then
			missing+=("$p")
		fi
	done
	if ((${#missing[@]} == 0)); then
		log "apt packages present: $*"
		return 0
	fi
	log "installing ${missing[*]} with apt-get (about a minute)"
	DEBIAN_FRONTEND=noninteractive apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y "${opts[@]}" "${missing[@]}"
}

# use_local_go puts Go on PATH (from /usr/local/go if need be) and pins the
# local toolchain: the scripts never download another one.
use_local_go() {
	if ! command -v go >/dev/null 2>&1; then
		if [[ ! -x /usr/local/go/bin/go ]]; then
			log "error: go not found in PATH or /usr/local/go/bin"
			return 1
		fi
		export PATH="/usr/local/go/bin:${PATH}"
	fi
	export GOTOOLCHAIN=local
}

# version_current VFILE WANT DIR BIN... succeeds when the version file VFILE
# holds WANT and every BIN is an executable in DIR: what was built is what
# versions.env pins.
version_current() {
	local vfile="$1" want="$2" dir="$3" b
	shift 3
	[[ "$(cat "$vfile" 2>/dev/null || true)" == "$want" ]] || return 1
	for b in "$@"; do
		[[ -x "${dir}/${b}" ]] || return 1
	done
}

# write_version VFILE WANT replaces VFILE atomically.
write_version() {
	printf '%s\n' "$2" >"${1}.tmp"
	mv -f "${1}.tmp" "$1"
}

# go_install_pinned [--ldflags=FLAGS] DIR PKG@VERSION... builds static,
# trimmed binaries of the pinned packages from the Go module proxy into DIR,
# outside the repo so that its go.mod plays no part in the install; the
# modules are checked against the checksum database as GOSUMDB says. FLAGS
# (-X main.Version=... and such) are passed to the linker after -s -w.
go_install_pinned() {
	local ldflags='-s -w'
	if [[ "${1:-}" == --ldflags=* ]]; then
		ldflags+=" ${1#--ldflags=}"
		shift
	fi
	local dir="$1"
	shift
	mkdir -p "$dir"
	(cd / && CGO_ENABLED=0 GOBIN="$dir" go install -trimpath -ldflags="$ldflags" "$@")
}

# vendor_src_dir REPO prints the dir of pinned third-party source:
# $CATENA_VENDOR_SRC, else ../shared/vendor-src beside the repo's checkout;
# in a linked git worktree, beside the main checkout (the parent of the
# common .git dir) when the first is absent.
vendor_src_dir() {
	local repo="$1" dir common
	dir="${CATENA_VENDOR_SRC:-}"
	if [[ -n "$dir" ]]; then
		printf '%s\n' "$dir"
		return
	fi
	dir="$(realpath -m "${repo}/../shared/vendor-src")"
	common="$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
	if [[ ! -d "$dir" && "$common" == */.git ]]; then
		dir="$(realpath -m "${common%/.git}/../shared/vendor-src")"
	fi
	printf '%s\n' "$dir"
}

# tree_sha256 DIR prints the sha256 of DIR's tree: of its files' sha256sum
# lines, in byte order of their paths, where a symlink counts as a file
# holding its target's text (what git writes where it makes no symlinks,
# and what an archive that stores a link's text as a file holds). A
# checkout with symlinks and such a copy of it thus hash the same, while a
# changed file or a link retargeted does not. A symlink that resolves out
# of DIR makes it print which, on stdout, and fail: the build would read
# what the sum does not cover.
tree_sha256() {
	local dir="$1" root link target sha
	root="$(realpath -e "$dir")"
	while IFS= read -r -d '' link; do
		target="$(realpath -m -- "${dir}/${link}")"
		if [[ "$target" != "$root" && "$target" != "$root"/* ]]; then
			printf '%s\n' "${dir}/${link#./}: a symlink out of the tree, to ${target}"
			return 1
		fi
	done < <(cd "$dir" && find . -type l -print0)
	if ! sha="$(set -o pipefail && cd "$dir" && tree_sums | sha256sum | cut -d' ' -f1)"; then
		printf '%s\n' "${dir}: its files cannot all be read"
		return 1
	fi
	printf '%s\n' "$sha"
}

# tree_sums prints the sha256sum lines of tree_sha256 for the current dir:
# the files in batches (xargs), each symlink's line from its target's text.
tree_sums() {
	local p batch=()
	while IFS= read -r -d '' p; do
		if [[ -L "$p" ]]; then
			if ((${#batch[@]} > 0)); then
				printf '%s\0' "${batch[@]}" | xargs -0 sha256sum || return 1
				batch=()
			fi
			printf '%s  %s\n' "$(readlink -n -- "$p" | sha256sum | cut -d' ' -f1)" "$p"
		else
			batch+=("$p")
		fi
	done < <(find . \( -type f -o -type l \) -print0 | LC_ALL=C sort -z)
	if ((${#batch[@]} > 0)); then
		printf '%s\0' "${batch[@]}" | xargs -0 sha256sum || return 1
	fi
}

# check_pinned_source VENDOR_SRC SUBDIR NAME MODULE VERSION COMMIT SHA256 VAR
# succeeds when VENDOR_SRC/README.md's row for SUBDIR/ pins VERSION and
# COMMIT, SUBDIR's go.mod declares MODULE, and the sha256 of SUBDIR's tree
# (tree_sha256: its files' sha256sum lines, in byte order, a symlink as a
# file holding its target's text) is SHA256; else it prints why on stdout and fails. NAME is the software's name in the message, VAR
# the prefix of its variables in versions.env.
check_pinned_source() {
	local vendor_src="$1" subdir="$2" name="$3" module="$4" version="$5" commit="$6" want_sha="$7" var="$8"
	local src="${vendor_src}/${subdir}" row release pinned tree_sha
	# The README's row: | `SUBDIR/` | upstream | release | commit | license |
	row="$(grep -F "| \`${subdir}/\` |" "${vendor_src}/README.md" || true)"
	if [[ -z "$row" ]]; then
		printf '%s\n' "${vendor_src}/README.md has no row for ${subdir}/"
		return 1
	fi
	IFS='|' read -r _ _ _ release pinned _ <<<"$row"
	release="$(echo "$release" | xargs)"
	pinned="$(echo "$pinned" | xargs)"
	if [[ "$release" != "$version" || "$pinned" != "$commit" ]]; then
		printf '%s\n' "${vendor_src}/README.md pins ${name} ${release} (${pinned}), versions.env ${version} (${commit}): update ${var}_* in scripts/versions.env after checking the new release"
		return 1
	fi
	if ! grep -q "^module ${module}\$" "${src}/go.mod"; then
		printf '%s\n' "${src}/go.mod is not ${module}"
		return 1
	fi
	if ! tree_sha="$(tree_sha256 "$src")"; then
		printf '%s\n' "$tree_sha"
		return 1
	fi
	if [[ "$tree_sha" != "$want_sha" ]]; then
		printf '%s\n' "${src} is not the pinned ${version} tree: sha256 of its files ${tree_sha}, want ${want_sha} (${var}_SRC_SHA256 in scripts/versions.env)"
		return 1
	fi
}
