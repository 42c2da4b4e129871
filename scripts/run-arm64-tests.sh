#!/usr/bin/env bash
# The ring and DMA unit tests built for arm64 and run under qemu-aarch64-static.
#
# On arm64 the ring engine takes paths x86 never builds: cache maintenance
# for non-coherent DMA (dc cvac / dc civac), the release barrier before the
# doorbell (dmb oshst) and the acquire load of the completed head (ldar).
# This cross-builds those suites with Debian's cross compiler against the
# multiarch arm64 Check/liburing/hwloc (scripts/install-deps.sh) and runs
# them through ctest, which starts each test under the emulator
# (cmake/aarch64-linux-gnu.cmake sets CMAKE_CROSSCOMPILING_EMULATOR).
#
# What qemu-user cannot show, and is left out here:
#   - ring_poll_makes_no_syscalls: a seccomp filter installed by the guest
#     applies to qemu's own host system calls;
#   - unit_dma's "mbind" case: qemu-user does not emulate mbind(2);
#   - the ordering of DMA against a real device: the emulator runs the
#     barriers and cache maintenance as instructions, with one coherent
#     memory behind them; the recording test (ring_restart_order) checks
#     the order of the maintenance calls instead. ring_device_on_another_core
#     runs the engine's arm64 loads, fences and acquire/release against a
#     device thread (emulated on the host's cores; its races still show).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
b=$root/build/arm64-tests

for tool in aarch64-linux-gnu-gcc qemu-aarch64-static; do
    command -v "$tool" >/dev/null || { echo "run-arm64-tests: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done
if [ ! -f /usr/lib/aarch64-linux-gnu/pkgconfig/check.pc ]; then
    echo "run-arm64-tests: check:arm64 missing (scripts/install-deps.sh)" >&2
    exit 1
fi

tests=(ring_engine ring_restart_order ring_irq_waits ring_edgetpu_shaped_fake ring_device_on_another_core
       unit_dma unit_iova unit_domain)
echo "== arm64: configure and build ${tests[*]}"
cmake -S "$root" -B "$b" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPUVFIO_WERROR=ON >"$b.log" 2>&1 || { cat "$b.log"; exit 1; }
cmake --build "$b" -j "$(nproc)" --target "${tests[@]}" >"$b.build.log" 2>&1 \
    || { tail -50 "$b.build.log"; exit 1; }
file "$b/tests/ring/ring_engine" | grep -q 'ARM aarch64' \
    || { echo "run-arm64-tests: the test binaries are not arm64" >&2; exit 1; }

echo "== arm64: run under qemu-aarch64-static (left out: the mbind case, qemu-user has no mbind)"
regex="^($(IFS='|'; echo "${tests[*]}"))\$"
CK_EXCLUDE_TAGS=mbind ctest --test-dir "$b" -R "$regex" --output-on-failure
