#!/usr/bin/env bash
# Every exported symbol of the installed libraries has a man page, and man
# finds the pages in the install prefix: a group's page (npv_ring_new), a
# function documented on another's page (npv_ring_submit's group), and
# npuvfio(1).
#   man_pages.sh BUILD_DIR
set -euo pipefail
build=$1
if [ ! -d "$build/man" ]; then
    echo "SKIPPED: the build made no man pages (scdoc was not found at configure time;"
    echo "         scripts/install-deps.sh installs it)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
man3=$prefix/share/man/man3
[ -d "$man3" ] || { echo "FAIL: no share/man/man3 installed"; exit 1; }

mapfile -t libs < <(find "$prefix" -name 'libnpuvfio*.so' | sort)
for want in libnpuvfio.so libnpuvfio-server.so libnpuvfio-testdev.so libnpuvfio-edgetpu.so libnpuvfio-rknpu.so \
    libnpuvfio-aicore.so; do
    printf '%s\n' "${libs[@]}" | grep -q "/$want\$" ||
        { echo "FAIL: $want not installed, found: ${libs[*]}"; exit 1; }
done
missing=0
total=0
for lib in "${libs[@]}"; do
    for sym in $(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u); do
        total=$((total + 1))
        if [ ! -f "$man3/$sym.3" ]; then
            [ "$missing" = 0 ] && echo "FAIL: exported functions without a man page (add them to a docs/man/*.scd NAME line):"
            echo "  $sym   ($(basename "$lib"))"
            missing=$((missing + 1))
        fi
    done
done
for page in npuvfio.1 npuvfio-bench.1; do
    [ -f "$prefix/share/man/man1/$page" ] || { echo "FAIL: $page not installed"; missing=$((missing + 1)); }
done
[ "$missing" = 0 ] || { echo "$missing of $total exported functions or tool pages have no page"; exit 1; }
echo "ok: all $total exported functions of ${#libs[@]} libraries have a page"

if ! command -v man >/dev/null; then
    echo "SKIPPED: the man lookup (man-db is not installed; scripts/install-deps.sh installs it)"
    exit 77
fi
export MANPATH=$prefix/share/man MANPAGER=cat MANWIDTH=80
check_man() { # check_man ARGS... -- WANT
    local want=${*: -1} out
    out=$(man "${@:1:$#-1}" 2>&1) || { echo "FAIL: man ${*:1:$#-1}: $out"; exit 1; }
    grep -q -- "$want" <<<"$out" || { echo "FAIL: man ${*:1:$#-1} lacks '$want':"; printf '%s\n' "$out" | head -20; exit 1; }
    echo "ok: man ${*:1:$#-1}"
}
check_man 3 npv_ring_new "int npv_ring_new(struct npv_ctx"
check_man npv_ring_submit "int npv_ring_submit(struct npv_ring"
check_man npv_ring_next "npv_ring_submit, npv_ring_next, npv_ring_push"
check_man 3 npv_edgetpu_open "int npv_edgetpu_open(struct npv_dev"
check_man npv_edgetpu_run "npv_edgetpu_load, npv_edgetpu_unload"
check_man 3 npv_aicore_prepare "int npv_aicore_prepare(struct npv_aicore"
check_man npv_aicore_wait "npv_aicore_poll, npv_aicore_wait"
check_man npuvfio "npuvfio demo"
check_man npuvfio-bench "--json FILE"
echo "PASS: man pages cover the exported API and are found in the install prefix"
