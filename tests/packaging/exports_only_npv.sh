#!/usr/bin/env bash
# The shared library exports nothing but npv_* symbols.
#   exports_only_npv.sh LIBNPUVFIO_SO
set -euo pipefail
lib=$1
all=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
count=$(printf '%s\n' "$all" | grep -c '^npv_' || true)
others=$(printf '%s\n' "$all" | grep -v '^npv_' | grep -v '^$' || true)
if [ -n "$others" ]; then
    echo "FAIL: exported symbols outside npv_*:"
    printf '%s\n' "$others" | sed 's/^/  /'
    exit 1
fi
if [ "$count" -lt 5 ]; then
    echo "FAIL: only $count npv_* symbols exported; the public API is missing"
    exit 1
fi
echo "PASS: $count symbols exported, all npv_*"
