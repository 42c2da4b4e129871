#!/usr/bin/env bash
# Install the built tree into a temporary prefix, then build and run a tiny
# consumer twice: once with pkg-config, once with find_package(npuvfio).
#   install_consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# Extra flags for the consumer (the sanitizer build needs -fsanitize=...).
extra=${NPV_CONSUMER_CFLAGS:-}
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name 'libnpuvfio.so' -printf '%h\n' | head -n1)
[ -n "$libdir" ] || { echo "FAIL: libnpuvfio.so not installed"; exit 1; }
[ -f "$prefix/include/npuvfio/dev.h" ] || { echo "FAIL: headers not installed"; exit 1; }

echo "== pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --exists npuvfio || { echo "FAIL: pkg-config does not find npuvfio.pc"; exit 1; }
# shellcheck disable=SC2046,SC2086
cc -std=gnu17 -Wall -Werror $extra -o "$tmp/consumer_pc" "$src/tests/packaging/consumer/consumer.c" \
    $(pkg-config --cflags --libs npuvfio)
LD_LIBRARY_PATH=$libdir "$tmp/consumer_pc"
# The static archive with the shared system libraries it needs (Debian ships
# no static libudev, which hwloc's static link would want).
# shellcheck disable=SC2046,SC2086
cc -std=gnu17 -Wall -Werror $extra -o "$tmp/consumer_pc_static" "$src/tests/packaging/consumer/consumer.c" \
    $(pkg-config --cflags npuvfio) "$libdir/libnpuvfio.a" $(pkg-config --libs liburing hwloc) -lpthread
"$tmp/consumer_pc_static"

echo "== find_package"
cmake -S "$src/tests/packaging/consumer" -B "$tmp/cbuild" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" >/dev/null
cmake --build "$tmp/cbuild" >/dev/null
LD_LIBRARY_PATH=$libdir "$tmp/cbuild/consumer"
"$tmp/cbuild/consumer_static"
echo "== the installed testdev examples, from the installed header and driver library"
pkg-config --exists npuvfio-testdev || { echo "FAIL: pkg-config does not find npuvfio-testdev.pc"; exit 1; }
for name in testdev_minimal testdev_serve caller_memory two_domains; do
    example=$(find "$prefix" -name "$name.c" | head -n1)
    [ -n "$example" ] || { echo "FAIL: examples/$name.c not installed with the docs"; exit 1; }
    # shellcheck disable=SC2046,SC2086
    cc -std=gnu17 -Wall -Werror $extra -o "$tmp/$name" "$example" \
        $(pkg-config --cflags --libs npuvfio-testdev) -pthread
done
LD_LIBRARY_PATH=$libdir "$src/tests/devices/run_example.sh" "$prefix/bin/npuvfio" testdev \
    "$tmp/testdev_minimal"
LD_LIBRARY_PATH=$libdir "$src/tests/devices/run_example.sh" "$prefix/bin/npuvfio" testdev \
    "$tmp/testdev_serve" --sims 2 --expect "summary: 200 completed, 0 failed" -- --jobs 200
LD_LIBRARY_PATH=$libdir "$src/tests/devices/run_example.sh" "$prefix/bin/npuvfio" testdev \
    "$tmp/caller_memory"
LD_LIBRARY_PATH=$libdir "$src/tests/devices/run_example.sh" "$prefix/bin/npuvfio" testdev \
    "$tmp/two_domains"
echo "== the installed Edge TPU driver: header and library through pkg-config"
[ -f "$prefix/include/npuvfio/edgetpu.h" ] || { echo "FAIL: npuvfio/edgetpu.h not installed"; exit 1; }
pkg-config --exists npuvfio-edgetpu || { echo "FAIL: pkg-config does not find npuvfio-edgetpu.pc"; exit 1; }
# shellcheck disable=SC2046,SC2086
cc -std=gnu17 -Wall -Werror $extra -o "$tmp/edgetpu_consumer" "$src/tests/packaging/edgetpu_consumer.c" \
    $(pkg-config --cflags --libs npuvfio-edgetpu)
LD_LIBRARY_PATH=$libdir "$tmp/edgetpu_consumer"
echo "== the installed Edge TPU example, from the installed headers (instruction format included)"
example=$(find "$prefix" -name edgetpu_sample.c | head -n1)
[ -n "$example" ] || { echo "FAIL: examples/edgetpu_sample.c not installed with the docs"; exit 1; }
[ -f "$prefix/include/npuvfio/edgetpu_insn.h" ] || { echo "FAIL: npuvfio/edgetpu_insn.h not installed"; exit 1; }
# shellcheck disable=SC2046,SC2086
cc -std=gnu17 -Wall -Wextra -Werror $extra -o "$tmp/edgetpu_sample" "$example" \
    $(pkg-config --cflags --libs npuvfio-edgetpu)
LD_LIBRARY_PATH=$libdir "$src/tests/devices/run_example.sh" "$prefix/bin/npuvfio" edgetpu \
    "$tmp/edgetpu_sample" --expect "matches the CPU reference bit for bit"
echo "== the installed AICore driver: header and library through pkg-config"
[ -f "$prefix/include/npuvfio/aicore.h" ] || { echo "FAIL: npuvfio/aicore.h not installed"; exit 1; }
pkg-config --exists npuvfio-aicore || { echo "FAIL: pkg-config does not find npuvfio-aicore.pc"; exit 1; }
# shellcheck disable=SC2046,SC2086
cc -std=gnu17 -Wall -Werror $extra -o "$tmp/aicore_consumer" "$src/tests/packaging/aicore_consumer.c" \
    $(pkg-config --cflags --libs npuvfio-aicore)
LD_LIBRARY_PATH=$libdir "$tmp/aicore_consumer"
echo "== the installed RKNPU and AICore examples, from the installed headers and driver libraries"
for pair in rknpu_matmul:npuvfio-rknpu aicore_cluster_graph:npuvfio-aicore; do
    name=${pair%%:*} pc=${pair#*:}
    example=$(find "$prefix" -name "$name.c" | head -n1)
    [ -n "$example" ] || { echo "FAIL: examples/$name.c not installed with the docs"; exit 1; }
    pkg-config --exists "$pc" || { echo "FAIL: pkg-config does not find $pc.pc"; exit 1; }
    # shellcheck disable=SC2046,SC2086
    cc -std=gnu17 -Wall -Wextra -Werror $extra -o "$tmp/$name" "$example" \
        $(pkg-config --cflags --libs "$pc")
done
LD_LIBRARY_PATH=$libdir "$src/tests/devices/run_example.sh" "$prefix/bin/npuvfio" rknpu \
    "$tmp/rknpu_matmul" --expect "matches the CPU reference bit for bit"
LD_LIBRARY_PATH=$libdir "$src/tests/devices/run_example.sh" "$prefix/bin/npuvfio" aicore \
    "$tmp/aicore_cluster_graph" --expect "matches the CPU reference bit for bit"
echo "PASS: installed library consumed through pkg-config and find_package"
