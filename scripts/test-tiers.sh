#!/usr/bin/env bash
# Runs make test's steps, each a make target (vet, lint, test-unit,
# test-integration, test-k8s), one after the other with NODEPS=1 (make test
# has run their prerequisites once, first), stops at the first that fails,
# and prints how long each took, whether the run passed or not:
#
#   make test: step times
#     vet                  1m 05s  ok
#     test-unit            2m 41s  FAIL
#     test-integration          -  not run
#     total                3m 46s
#
#   bash scripts/test-tiers.sh TARGET...   (MAKE: the make to run, default make)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
make="${MAKE:-make}"

# mmss prints a number of seconds as "1m 05s".
mmss() { printf '%dm %02ds' $(($1 / 60)) $(($1 % 60)); }

declare -a secs=() status=()
rc=0
for step in "$@"; do
	if [[ $rc -ne 0 ]]; then
		secs+=(-) status+=("not run")
		continue
	fi
	echo "make test: ${step}"
	start=$SECONDS
	"$make" --no-print-directory NODEPS=1 "$step" || rc=$?
	secs+=($((SECONDS - start)))
	if [[ $rc -eq 0 ]]; then status+=(ok); else status+=(FAIL); fi
done

total=0
echo "make test: step times"
for i in "${!status[@]}"; do
	took=-
	if [[ ${secs[i]} != - ]]; then
		took="$(mmss "${secs[i]}")"
		total=$((total + secs[i]))
	fi
	printf '  %-18s %8s  %s\n' "${@:i+1:1}" "$took" "${status[i]}"
done
printf '  %-18s %8s\n' total "$(mmss "$total")"
exit "$rc"
