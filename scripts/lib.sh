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
