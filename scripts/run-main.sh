#!/usr/bin/env bash
# The main job, from a fresh Debian bookworm machine: installs what is missing
# (as root; only then is root needed), builds, and runs `npuvfio demo`: every
# device's sample workload through its driver against its model, checked on
# the CPU, as one table, then what the host offers (`npuvfio status`).
# Build output goes to a log file, shown only when the build fails.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! scripts/install-deps.sh --check >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        echo "run-main.sh: packages are missing; run as root to install them:" >&2
        scripts/install-deps.sh --check >&2 || true
        exit 1
    fi
    echo "run-main.sh: installing the missing Debian packages (a few minutes on a fresh machine)"
    scripts/install-deps.sh
fi

log=build/run-main-build.log
mkdir -p build
if [ -x build/default/tools/npuvfio ]; then
    echo "run-main.sh: bringing the build up to date (log: $log)"
else
    echo "run-main.sh: building npuvfio (about 3-5 minutes on 2 cores; log: $log)"
fi
if ! { cmake --preset default && cmake --build --preset default -j "$(nproc)"; } >"$log" 2>&1; then
    echo "run-main.sh: the build failed; its output:" >&2
    cat "$log" >&2
    exit 1
fi
echo
exec build/default/tools/npuvfio demo
