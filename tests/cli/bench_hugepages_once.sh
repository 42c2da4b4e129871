#!/usr/bin/env bash
# npuvfio-bench on a machine without free 2 MiB hugepages (issue 19 section 3):
# it says so once, as one line naming the command that reserves some, however
# many repetitions run (and a starved rte_ring peer at most once); no
# "Cannot allocate memory" block; the 2 MiB rows
# are marked SKIPPED, the 4 KiB rows still run; no last-repetition
# percentile is printed as 0, nor a measured rate too small for its column.
#   bench_hugepages_once.sh BENCH
# Skips (77) with two allowed CPUs missing or free 2 MiB hugepages present:
# then the message cannot appear and the case proves nothing.
set -euo pipefail
bench=$1
free=/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
if [ -r "$free" ] && [ "$(cat "$free")" -gt 0 ]; then
    echo "SKIP: $(cat "$free") free 2 MiB hugepages here: the message under test cannot appear" >&2
    exit 77
fi
allowed=$(nproc)
if [ "$allowed" -lt 2 ]; then
    echo "SKIP: $allowed allowed CPU: the bench refuses before it allocates" >&2
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
"$bench" --reps 3 --duration 2 --qd 1 --mode poll --no-devices >"$tmp/out" 2>"$tmp/err" || rc=$?
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# Exit 1 is the bench's "no ratio target has a value" on a starved machine; the
# case is about what it says, not what it measured.
[ "$rc" -le 1 ] || bad "exit status $rc"
n=$(grep -c -i 'hugepage' "$tmp/err" || true)
[ "$n" = 1 ] || bad "$n stderr lines about hugepages in 3 repetitions, want 1"
grep -q 'no free 2 MiB hugepage (reserve some: npuvfio hugepages 64)' "$tmp/err" ||
    bad "the hugepage line does not name the command that reserves some"
grep -q -i 'cannot allocate memory' "$tmp/err" "$tmp/out" && bad "an ENOMEM block is printed"
# A starved rte_ring peer is said once too, with how many repetitions it cost.
n=$(grep -c 'rte_ring bound moved nothing' "$tmp/err" || true)
[ "$n" -le 1 ] || bad "$n stderr lines about the starved rte_ring bound, want at most 1"
grep -q 'ours, 2 MiB ring memory: SKIPPED (no free 2 MiB hugepage' "$tmp/out" ||
    bad "the 2 MiB rows are not marked SKIPPED"
grep -q '^  ours poll, 4 KiB' "$tmp/out" || bad "the 4 KiB rows did not run"
# The QD1 rows: p50 median [min - max] p99 p99.9; '-' where nothing was measured, never 0.
if awk '/^QD1 round trip/ { on = 1; next } /^$/ { on = 0 } on && / (0|0\.0+)( |$)/' "$tmp/out" |
    grep -q .; then
    bad "a QD1 figure printed as 0"
fi
# Throughput: a rate is added only when jobs finished, so a 0.00 cell is a
# measured rate rounded away; it reads <0.01.
if awk '/^Throughput/ { on = 1; next } /^$/ { on = 0 } on' "$tmp/out" | grep -qE '(^| )0\.00( |$)'; then
    bad "a measured rate printed as 0.00"
fi
if [ "$fail" != 0 ]; then
    echo "--- stdout"; cat "$tmp/out"; echo "--- stderr"; cat "$tmp/err"
    exit 1
fi
echo "ok: one hugepage line in 3 repetitions, 2 MiB rows skipped, 4 KiB rows measured"
