#!/usr/bin/env bash
# The whole test suite, from a fresh Debian bookworm machine, as root:
# installs what is missing, configures and builds with a CMake preset
# (default: "default"; "asan" for ASan+UBSan), and runs every ctest test.
#
#   scripts/run-tests.sh [--preset NAME] [ctest args...]
#
# Tests that need hugepages reserve and return them themselves.
#
# Tests run two at a time (NPUVFIO_TEST_JOBS, default 2: the machine CI runs
# on has two cores, and most tests wait on a model more than they compute);
# tests that measure or own the machine are RUN_SERIAL, the QEMU guests take
# one lock so only one boots at a time.
set -euo pipefail
cd "$(dirname "$0")/.."

preset=default
if [ "${1:-}" = "--preset" ]; then
    preset=$2
    shift 2
fi

scripts/install-deps.sh
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset" -j "${NPUVFIO_TEST_JOBS:-2}" "$@"
