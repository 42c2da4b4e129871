#!/usr/bin/env bash
# The ABI of the shared libraries against the baseline committed in abi/:
# abidiff (Debian's abigail-tools) on every libnpuvfio*.so of a build, public
# types only (include/npuvfio). Any change fails: an incompatible one
# (removed or changed function, changed type) must raise NPUVFIO_SOVERSION
# (cmake/NpvAbi.cmake) and a compatible one (added functions) must add them to
# the baseline, in the same change as the code:
#
#   scripts/check-abi.sh --update      # rewrite abi/*.abi from build/default
#
#   scripts/check-abi.sh [--update] [BUILD_DIR]   (default build/default)
set -euo pipefail
cd "$(dirname "$0")/.."

update=0
if [ "${1:-}" = --update ]; then
    update=1
    shift
fi
build=${1:-build/default}
headers=include/npuvfio

for tool in abidw abidiff; do
    command -v "$tool" >/dev/null || { echo "check-abi.sh: $tool missing (scripts/install-deps.sh installs abigail-tools)" >&2; exit 1; }
done
mapfile -t libs < <(find "$build" -name 'libnpuvfio*.so' -not -path '*/CMakeFiles/*' | sort)
if [ "${#libs[@]}" = 0 ]; then
    echo "check-abi.sh: no libnpuvfio*.so under $build: build it first (cmake --build --preset default)" >&2
    exit 1
fi

status=0
for so in "${libs[@]}"; do
    name=$(basename "$so" .so)
    baseline=abi/$name.abi
    if ! readelf -S "$so" | grep -c "\.debug_info" >/dev/null; then
        echo "check-abi.sh: $so has no debug info (build with -g, as the default preset does)" >&2
        exit 1
    fi
    if [ "$update" = 1 ]; then
        abidw --headers-dir "$headers" --drop-private-types --no-corpus-path --no-comp-dir-path \
            --no-show-locs --type-id-style hash --out-file "$baseline" "$so"
        # Translation units are named by path; keep the checkout's location out
        # (abidiff compares types and functions, not these names).
        sed -i "s#path='$PWD/#path='#" "$baseline"
        echo "check-abi.sh: wrote $baseline from $so"
        continue
    fi
    if [ ! -f "$baseline" ]; then
        echo "FAIL $name: no baseline $baseline (a new library: scripts/check-abi.sh --update)"
        status=1
        continue
    fi
    rc=0
    out=$(abidiff --hd2 "$headers" --drop-private-types --no-show-locs --fail-no-debug-info \
        "$baseline" "$so" 2>&1) || rc=$?
    if [ "$rc" = 0 ]; then
        echo "ok   $name: ABI identical to $baseline"
    elif [ $((rc & 12)) != 0 ]; then
        # abidiff flags only some breaks as incompatible (bit 8): a changed
        # parameter list or type is "a change" (bit 4) to it. For us any
        # removed or changed interface is a break; only additions are not.
        if [ $((rc & 8)) != 0 ] || printf '%s\n' "$out" | grep -Eq 'summary: [1-9][0-9]* Removed|, [1-9][0-9]* Changed'; then
            echo "FAIL $name: INCOMPATIBLE ABI change against $baseline:"
            printf '%s\n' "$out" | sed 's/^/    /'
            echo "     raise NPUVFIO_SOVERSION in cmake/NpvAbi.cmake and add a version node in"
            echo "     lib/npuvfio.map, then run scripts/check-abi.sh --update in the same change"
        else
            echo "FAIL $name: functions were added (compatible) but $baseline does not have them:"
            printf '%s\n' "$out" | sed 's/^/    /'
            echo "     run scripts/check-abi.sh --update and commit abi/ with the change"
        fi
        status=1
    else
        echo "FAIL $name: abidiff could not compare (exit $rc):"
        printf '%s\n' "$out" | sed 's/^/    /'
        status=1
    fi
done
[ "$update" = 1 ] && echo "check-abi.sh: baseline updated; commit abi/ with the change that made it"
exit "$status"
