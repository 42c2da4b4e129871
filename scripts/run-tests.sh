#!/usr/bin/env bash
# The whole test suite, from a fresh Debian bookworm machine, as root:
# installs what is missing, configures and builds with a CMake preset
# (default: "default"; "asan" for ASan+UBSan), and runs every ctest test.
#
#   scripts/run-tests.sh [--preset NAME] [ctest args...]
#
# Tests that need hugepages reserve and return them themselves.
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
ctest --preset "$preset" "$@"
