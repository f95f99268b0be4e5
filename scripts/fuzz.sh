#!/usr/bin/env bash
# Runs every Fuzz* target in the module, one at a time, each for FUZZTIME.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${FUZZTIME:=30s}"
GO="${GO:-go}"

listing="$(mktemp)"
trap 'rm -f "$listing"' EXIT

# `go test -list` prints the matching names of a package, then a line
# "ok <pkg> <time>" closing that package.
"$GO" test -run '^$' -list '^Fuzz' ./... >"$listing"

targets=()
names=()
while read -r first second _; do
	case "$first" in
	Fuzz*) names+=("$first") ;;
	ok)
		for n in "${names[@]}"; do targets+=("${second} ${n}"); done
		names=()
		;;
	*) names=() ;;
	esac
done <"$listing"

if ((${#targets[@]} == 0)); then
	echo "fuzz: no Fuzz targets found"
	exit 0
fi

for t in "${targets[@]}"; do
	pkg="${t% *}"
	name="${t#* }"
	echo "fuzz: ${pkg} ${name} for ${FUZZTIME}"
	"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"
done
