#!/usr/bin/env bash
# make-schema1-testdata.sh: regenerates integration/schema1/testdata, the
# records that "the old binary" (catena at commit 1daa3b7, the last release
# that wrote only schema-1 records: full snapshots, appended with fdatasync)
# leaves on a node, one per phase a node can be upgraded in.
#
# It builds the old catena (and the same commit with -tags failpoint, to
# crash it at a chosen point) in a temporary git worktree, and drives it as a
# runtime would (CNI_* environment, config on stdin, as libcni hands a
# conflist's catena entry over) with the real delegates of bin/cni (bridge +
# host-local, portmap, tuning, and the failer test plugin for faults) in real
# network namespaces. Every name and path is fixed, because the records
# cache them and integration/upgrade_schema1_test.go recreates the same world:
#
#   network catena-s1, netns /run/netns/catena-s1-<a..f>, bridge cs1br0,
#   subnet 10.253.71.0/24, host ports 39701-39706, under /run/catena-s1/:
#   cache/ (catena's cacheDir), ipam/ (host-local's dataDir), fault (the
#   failer's faultFile: while it exists, failDel fails).
#
# The records (attachment <container>/eth0 of network catena-s1):
#   a s1-a-complete          ADD of bridge, portmap, tuning completed
#   b s1-b-rollback-failed   ADD failed (failer failAdd), its rollback stopped
#                            at a failer whose DEL failed: needs-teardown,
#                            with the (empty) pending marker of that build
#   c s1-c-del-failed        ADD completed, DEL stopped at the failer's DEL
#                            after tuning's: needs-teardown, pending marker
#   d s1-d-v040-complete     ADD completed from a 0.4.0 conflist whose portmap
#                            pins cniVersion 1.0.0
#   e s1-e-crashed-add       catena killed (failpoint add-running:3) while
#                            tuning's ADD ran: adding, tuning starting
#   f s1-f-crashed-rollback  ADD failed (failer failAdd), catena killed
#                            (failpoint teardown-step:2) before portmap's
#                            rollback DEL: tearing-down
#
# The files are copied with their layout under the cache dir, records/ and
# pending/, each ':' of a name written as %3A (Go module zips refuse ':').
# Then every attachment is DELed with the old binary and all that this
# script made is removed: netns, bridge, /run/catena-s1, the worktree.
#
# Usage (root, after `make build`): bash scripts/make-schema1-testdata.sh
set -euo pipefail

old_commit=1daa3b7
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${repo}/integration/schema1/testdata"
cni_path="${CATENA_CNI_PATH:-${repo}/bin/cni}"
base=/run/catena-s1
network=catena-s1
bridge=cs1br0
subnet=10.253.71.0/24
fault="${base}/fault"

die() {
	echo "make-schema1-testdata: $*" >&2
	exit 1
}

[[ $(id -u) -eq 0 ]] || die "must run as root (netns, bridge, iptables)"
for p in bridge host-local portmap tuning failer; do
	[[ -x "${cni_path}/${p}" ]] || die "missing ${cni_path}/${p}; run 'make build' (and 'make plugins')"
done
[[ ! -e "$base" ]] || die "$base exists: another run (or the upgrade test) is using it"
! ip link show "$bridge" >/dev/null 2>&1 || die "bridge $bridge exists"
for n in a b c d e f; do
	[[ ! -e "/run/netns/catena-s1-${n}" ]] || die "netns catena-s1-${n} exists"
done

work="$(mktemp -d /tmp/catena-s1-gen.XXXXXX)"
made_worktree=""
cleanup() {
	local rc=$?
	set +e
	if [[ -d "$base" ]]; then
		rm -f "$fault"
		for n in a b c d e f; do
			cni DEL "$n" "$(conf_of "$n")" "${work}/catena" >/dev/null 2>&1 ||
				echo "make-schema1-testdata: cleanup: old catena DEL of ${n} failed" >&2
			ip netns del "catena-s1-${n}" 2>/dev/null
		done
		ip link del "$bridge" 2>/dev/null
		rm -rf "$base"
	fi
	[[ -n "$made_worktree" ]] && git -C "$repo" worktree remove --force "${work}/src"
	rm -rf "$work"
	if iptables-save | grep -q -e "s1-[a-f]-" -e "10\.253\.71\."; then
		echo "make-schema1-testdata: iptables still mentions the records' attachments" >&2
		rc=1
	fi
	exit "$rc"
}
trap cleanup EXIT

git -C "$repo" worktree add --detach "${work}/src" "$old_commit" >/dev/null
made_worktree=1
old_full="$(git -C "${work}/src" rev-parse HEAD)"
(cd "${work}/src" && CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -o "${work}/catena" ./plugins/catena)
(cd "${work}/src" && CGO_ENABLED=0 GOTOOLCHAIN=local go build -tags failpoint -trimpath -o "${work}/catena-fp" ./plugins/catena)

container() {
	case "$1" in
	a) echo s1-a-complete ;; b) echo s1-b-rollback-failed ;; c) echo s1-c-del-failed ;;
	d) echo s1-d-v040-complete ;; e) echo s1-e-crashed-add ;; f) echo s1-f-crashed-rollback ;;
	esac
}

bridge_d="{\"type\":\"bridge\",\"bridge\":\"${bridge}\",\"isGateway\":true,\"ipMasq\":false,\"ipam\":{\"type\":\"host-local\",\"dataDir\":\"${base}/ipam\",\"ranges\":[[{\"subnet\":\"${subnet}\"}]]}}"
portmap_d='{"type":"portmap","capabilities":{"portMappings":true},"snat":true}'
tuning_d='{"type":"tuning","sysctl":{"net.core.somaxconn":"512"}}'
faildel_d="{\"type\":\"failer\",\"failDel\":true,\"faultFile\":\"${fault}\"}"
failadd_d='{"type":"failer","failAdd":true}'

# conf_of N is catena's stdin for attachment N: its conflist's catena entry
# with name and cniVersion, and runtimeConfig as libcni injects it.
conf_of() {
	local version=1.1.0 delegates port
	case "$1" in
	a | e) delegates="${bridge_d},${portmap_d},${tuning_d}" ;;
	b) delegates="${bridge_d},${portmap_d},${faildel_d},${failadd_d}" ;;
	c) delegates="${bridge_d},${portmap_d},${faildel_d},${tuning_d}" ;;
	d) version=0.4.0 delegates="${bridge_d},${portmap_d%\}},\"cniVersion\":\"1.0.0\"},${tuning_d}" ;;
	f) delegates="${bridge_d},${portmap_d},${failadd_d}" ;;
	esac
	case "$1" in a) port=39701 ;; b) port=39702 ;; c) port=39703 ;; d) port=39704 ;; e) port=39705 ;; f) port=39706 ;; esac
	printf '{"cniVersion":"%s","name":"%s","type":"catena","cacheDir":"%s/cache","delegateTimeout":"20s","lockTimeout":"10s","capabilities":{"portMappings":true},"delegates":[%s],"runtimeConfig":{"portMappings":[{"hostPort":%d,"containerPort":80,"protocol":"tcp"}]}}' \
		"$version" "$network" "$base" "$delegates" "$port"
}

# cni VERB N CONF BINARY [VAR=VALUE...] runs catena for attachment N.
cni() {
	local verb=$1 n=$2 conf=$3 bin=$4
	shift 4
	env "$@" CNI_COMMAND="$verb" CNI_CONTAINERID="$(container "$n")" CNI_NETNS="/run/netns/catena-s1-${n}" \
		CNI_IFNAME=eth0 CNI_PATH="$cni_path" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=upgrade;K8S_POD_NAME=pod-${n}" \
		"$bin" <<<"$conf"
}

# expect_fail N DESCRIPTION CMD...: CMD must fail (the record is what we want).
expect_fail() {
	local n=$1 what=$2
	shift 2
	if "$@" >"${work}/out-${n}" 2>&1; then
		die "${n}: ${what} succeeded; want a failure"
	fi
	echo "${n}: ${what} failed as intended: $(head -c 300 "${work}/out-${n}")"
}

mkdir -m 0700 "$base"
for n in a b c d e f; do
	ip netns add "catena-s1-${n}"
done
old="${work}/catena"

# In this order: a later successful ADD on the network retries the teardown
# a record with a pending marker needs, so b and c come last, and the fault
# stays in force until the files are copied.
cni ADD a "$(conf_of a)" "$old" >/dev/null
cni ADD d "$(conf_of d)" "$old" >/dev/null
expect_fail e "ADD killed at add-running:3" cni ADD e "$(conf_of e)" "${work}/catena-fp" CATENA_FAILPOINT=add-running:3
expect_fail f "ADD killed at teardown-step:2" cni ADD f "$(conf_of f)" "${work}/catena-fp" CATENA_FAILPOINT=teardown-step:2
cni ADD c "$(conf_of c)" "$old" >/dev/null
touch "$fault"
expect_fail c "DEL" cni DEL c "$(conf_of c)" "$old"
expect_fail b "ADD (rollback DEL fails)" cni ADD b "$(conf_of b)" "$old"

rm -rf "${out}/records" "${out}/pending"
for sub in records pending; do
	mkdir -p "${out}/${sub}/${network}"
	for src in "${base}/cache/${sub}/${network}"/*; do
		name="$(basename "$src")"
		install -m 0600 "$src" "${out}/${sub}/${network}/${name//:/%3A}"
	done
done

cat >"${out}/README.txt" <<EOF
Schema-1 records, as catena ${old_full} (the release before delta
entries) wrote them on a node, with their layout under its cacheDir
(records/ and pending/; each ':' of a file name is written %3A). Made by
scripts/make-schema1-testdata.sh, which says what each record is and the
world (netns, bridge, subnet, paths) they describe; regenerate them with it.
Made with $(go version | cut -d' ' -f3) and the plugins of bin/cni ($(cat "${cni_path}/.version" 2>/dev/null || echo "version unknown")).

records/catena-s1/<container>%3Aeth0.json, by container (IP in 10.253.71.0/24):
  s1-a-complete          .2  complete: bridge, portmap, tuning added
  s1-d-v040-complete     .3  complete, 0.4.0 conflist, portmap pinned to 1.0.0
  s1-e-crashed-add       .4  adding: catena killed while tuning's ADD ran
  s1-f-crashed-rollback  .5  tearing-down: killed before portmap's rollback DEL
  s1-c-del-failed        .6  needs-teardown: DEL stopped at the failer's DEL
  s1-b-rollback-failed   .7  needs-teardown: rollback stopped at the failer's DEL
pending/catena-s1/: the empty markers of b and c.

The files in git are not 0600: tests copy them into a fresh 0700 cacheDir
as 0600 files (integration/schema1.Copy).
EOF
ls -l "${out}"/records/"${network}" "${out}"/pending/"${network}"
