#!/usr/bin/env bash
# The shared library exports nothing but npv_* symbols, each carrying a
# symbol version of lib/npuvfio.map (NPUVFIO_x.y).
#   exports_only_npv.sh LIBNPUVFIO_SO
set -euo pipefail
lib=$1
# Version definitions appear as absolute symbols named after the node.
syms=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sort -u)
all=$(printf '%s\n' "$syms" | sed 's/@.*//')
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
unversioned=$(printf '%s\n' "$syms" | grep -v '@@\?NPUVFIO_[0-9]' | grep -v '^$' || true)
if [ -n "$unversioned" ]; then
    echo "FAIL: exported without an NPUVFIO_ symbol version (lib/npuvfio.map):"
    printf '%s\n' "$unversioned" | sed 's/^/  /'
    exit 1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
case $soname in
    *.so.[0-9]*) ;;
    *) echo "FAIL: SONAME '$soname' carries no major version"; exit 1 ;;
esac
echo "PASS: $count symbols exported, all npv_*, versioned; SONAME $soname"
