#!/usr/bin/env bash
# Prints the output of each top-level test that failed in a `go test -v`
# log: the lines go test attributes to it (after its "=== RUN", "=== CONT"
# or "=== NAME" header) up to its "--- FAIL" line, the last MAX of them
# (default 80) per test, where its assertions are. make's test steps print
# it when a step fails, after the log's tail, so the failure's own words
# are the last thing a CI page shows.
#
#   bash scripts/failed-tests.sh LOG [MAX]
set -euo pipefail

log="${1:?usage: failed-tests.sh LOG [MAX]}"
max="${2:-80}"

awk -v max="$max" '
function top(name) { sub(/\/.*/, "", name); return name }
/^=== (RUN|CONT|NAME|PAUSE) / { cur = top($3) }
/^--- FAIL: / { failed[++nfailed] = $3; cur = "" }
cur != "" {
	n[cur]++
	buf[cur, n[cur] % max] = $0
}
END {
	for (i = 1; i <= nfailed; i++) {
		name = failed[i]
		first = n[name] > max ? n[name] - max + 1 : 1
		printf "--- the output of %s (the last %d of %d lines):\n", name, n[name] - first + 1, n[name]
		for (j = first; j <= n[name]; j++) print buf[name, j % max]
	}
}' "$log"
