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

# stamp_current STAMP WANT DIR BIN... succeeds when the version stamp STAMP
# holds WANT and every BIN is an executable in DIR: what was built is what
# versions.env pins.
stamp_current() {
	local stamp="$1" want="$2" dir="$3" b
	shift 3
	[[ "$(cat "$stamp" 2>/dev/null || true)" == "$want" ]] || return 1
	for b in "$@"; do
		[[ -x "${dir}/${b}" ]] || return 1
	done
}

# write_stamp STAMP WANT replaces STAMP atomically.
write_stamp() {
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
