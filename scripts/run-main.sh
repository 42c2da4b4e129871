#!/usr/bin/env bash
# The main job, from a fresh Debian bookworm machine, as root: installs what
# is missing, builds, and shows what npuvfio finds on this machine: the PCI
# functions (known NPUs marked, vfio-pci binding, IOMMU groups) and what the
# library detects (iommufd support, VFIO devices, hugepages), after running
# the Edge TPU's sample network on its model (checksum, latency, rate).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
build/default/tools/npuvfio run --device edgetpu
exec build/default/tools/npuvfio status
