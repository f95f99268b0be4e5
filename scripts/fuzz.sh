#!/usr/bin/env bash
# Runs every Fuzz* target in the module, each for FUZZTIME.
#
#   FUZZTIME=30s     how long each target runs (go test -fuzztime)
#   FUZZJOBS=1       how many targets run at once
#   FUZZPARALLEL=    workers per target (go test -parallel; default GOMAXPROCS)
#   FUZZNICE=0       niceness of the fuzzers (19 lets other work go first)
#   FUZZLOGS=        a directory for one log per target (default: a temp dir)
#   FUZZKEEP=0       1: copy the inputs each target found into its
#                    testdata/fuzz/<Target> (the seed corpus `go test` runs)
#   FUZZMATCH=.      only targets whose name matches this regexp
#
# At the end it prints one line per target: its run time, execs and new
# interesting inputs, from the last status line `go test -fuzz` printed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${FUZZTIME:=30s}"
: "${FUZZJOBS:=1}"
: "${FUZZNICE:=0}"
: "${FUZZKEEP:=0}"
: "${FUZZMATCH:=.}"
GO="${GO:-go}"

listing="$(mktemp)"
trap 'rm -f "$listing"' EXIT
logs="${FUZZLOGS:-$(mktemp -d)}"
mkdir -p "$logs"

# `go test -list` prints the matching names of a package, then a line
# "ok <pkg> <time>" closing that package.
"$GO" test -run '^$' -list '^Fuzz' ./... >"$listing"

targets=()
names=()
while read -r first second _; do
	case "$first" in
	Fuzz*) names+=("$first") ;;
	ok)
		for n in "${names[@]}"; do
			if [[ "$n" =~ $FUZZMATCH ]]; then targets+=("${second} ${n}"); fi
		done
		names=()
		;;
	*) names=() ;;
	esac
done <"$listing"

if ((${#targets[@]} == 0)); then
	echo "fuzz: no Fuzz targets found"
	exit 0
fi

module="$("$GO" list -m)"
gocache="$("$GO" env GOCACHE)"

# keep copies the inputs the fuzzer found for a target (kept by go in its
# cache) into the package's testdata/fuzz/<Target>, so that plain `go test`
# runs them from now on.
keep() {
	local pkg="$1" name="$2"
	local from="${gocache}/fuzz/${pkg}/${name}"
	local to="${pkg#"$module"/}/testdata/fuzz/${name}"
	[[ -d "$from" ]] || return 0
	mkdir -p "$to"
	local n=0 f
	for f in "$from"/*; do
		[[ -f "$f" ]] || continue
		if [[ ! -e "$to/$(basename "$f")" ]]; then
			cp "$f" "$to/"
			n=$((n + 1))
		fi
	done
	echo "fuzz: ${name}: kept ${n} new inputs in ${to}"
}

run() {
	local pkg="$1" name="$2"
	local log="${logs}/${name}.log"
	local args=(test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME")
	if [[ -n "${FUZZPARALLEL:-}" ]]; then args+=(-parallel "$FUZZPARALLEL"); fi
	echo "fuzz: ${pkg} ${name} for ${FUZZTIME} (log ${log})"
	local rc=0
	nice -n "$FUZZNICE" "$GO" "${args[@]}" "$pkg" >"$log" 2>&1 || rc=$?
	if ((rc != 0)); then
		# A duration -fuzztime can end in "context deadline exceeded" with
		# no failing input: a race in Go's fuzz coordinator under CPU
		# contention (golang/go#75804, fixed in Go 1.27), not a finding. A
		# real one writes its input and says "Failing input written to".
		if ! grep -q 'Failing input written to' "$log" && tail -n 5 "$log" | grep -q 'context deadline exceeded'; then
			echo "fuzz: ${name}: ended by Go's fuzztime race (golang/go#75804), no failing input"
		else
			echo "fuzz: ${name} FAILED (exit ${rc}); its log:"
			tail -n 40 "$log"
			return "$rc"
		fi
	fi
	if [[ "$FUZZKEEP" == 1 ]]; then keep "$pkg" "$name"; fi
}

failed=0
running=0
for t in "${targets[@]}"; do
	if ((running >= FUZZJOBS)); then
		wait -n || failed=1
		running=$((running - 1))
	fi
	run "${t% *}" "${t#* }" &
	running=$((running + 1))
done
while ((running > 0)); do
	wait -n || failed=1
	running=$((running - 1))
done

echo "fuzz: summary (last status line of each target)"
for t in "${targets[@]}"; do
	name="${t#* }"
	last="$(grep -E '^fuzz: elapsed:' "${logs}/${name}.log" | tail -n 1 || true)"
	printf '  %-24s %s\n' "$name" "${last#fuzz: }"
done
exit "$failed"
