#!/usr/bin/env bash
# Stages the files Catena's image needs besides its own binaries, from this
# host (offline): the Dockerfile copies DEST into the image's root.
#
#   bash scripts/image-rootfs.sh bin/image-rootfs
#
# What: iptables in its nf_tables variant (Debian's xtables-nft-multi, with
# iptables, iptables-save, iptables-restore and their ip6tables names
# linked to it), its extensions (the xtables dir) and the shared libraries
# they load, with the dynamic loader. The agent's reconciler runs the
# delegates in its container; portmap tears its DNAT rules down with the
# iptables it finds in PATH, and without one its DEL fails, so an attachment
# with port mappings was never released by the agent. The host's rules are
# reached because the agent runs in the host's network namespace; the nft
# variant sees the rules that iptables-nft (Debian 12's default) made, not
# iptables-legacy's.
#
# The files are copied as the host has them (Debian 12: the iptables
# package); scripts/install-deps.sh installs it. scripts/image.sh runs this.
set -euo pipefail

log() { printf 'image-rootfs: %s\n' "$*" >&2; }

if [[ $# -ne 1 || -z "$1" ]]; then
	log "usage: $0 DEST"
	exit 2
fi
dest="$1"
multi=/usr/sbin/xtables-nft-multi
if [[ ! -x "$multi" ]]; then
	log "error: $multi missing: install Debian's iptables (scripts/install-deps.sh)"
	exit 1
fi
# The multiarch dir (x86_64-linux-gnu) is where the binary's libxtables is.
multiarch="$(basename "$(dirname "$(ldd "$multi" | awk '$1 ~ /^libxtables/ {print $3}')")")"
xtables="/usr/lib/${multiarch}/xtables"
if [[ ! -d "$xtables" ]]; then
	log "error: $xtables missing: install Debian's iptables (scripts/install-deps.sh)"
	exit 1
fi

rm -rf "$dest"
mkdir -p "${dest}/usr/sbin" "${dest}/usr/lib/${multiarch}" "${dest}/lib/${multiarch}"
cp "$multi" "${dest}/usr/sbin/"
for name in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -s xtables-nft-multi "${dest}/usr/sbin/${name}"
done
# The extensions iptables loads by name (-m comment, -j DNAT, ...); ebtables'
# and arptables' are not needed.
mkdir "${dest}/usr/lib/${multiarch}/xtables"
cp "$xtables"/libxt_*.so "$xtables"/libipt_*.so "$xtables"/libip6t_*.so "${dest}/usr/lib/${multiarch}/xtables/"

# Every shared library the binary and the extensions need, resolved by ldd
# as the loader would, copied to the loader's default dir; the loader at the
# path the binaries name.
libs=()
while read -r lib; do
	libs+=("$lib")
done < <(for f in "$multi" "${dest}/usr/lib/${multiarch}/xtables"/*.so; do ldd "$f"; done |
	awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)
for lib in "${libs[@]}"; do
	case "$lib" in
	*/ld-linux*)
		mkdir -p "${dest}$(dirname "$lib")"
		cp -L "$lib" "${dest}${lib}"
		;;
	*) cp -L "$lib" "${dest}/lib/${multiarch}/" ;;
	esac
done
log "staged $("$multi" iptables -V) in ${dest}: $(du -sh "$dest" | cut -f1)"
