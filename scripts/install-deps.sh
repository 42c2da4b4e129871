#!/usr/bin/env bash
# Install every Debian package npuvfio needs to build, test and benchmark.
# Idempotent: packages already installed are skipped, and apt is only asked
# for what is missing. Runs as root on Debian 12 (bookworm).
#
# bookworm-backports is enabled for the few packages that need it, and only
# those are taken from it (backports is pinned low by Debian by default):
#   linux-libc-dev 6.12  uapi headers with iommufd and the VFIO cdev API
#   qemu-system-x86 10   the guest for the kernel VFIO tests
#   linux-image / linux-source 6.12  the guest kernels
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
    echo "install-deps.sh: must run as root (apt-get install)" >&2
    exit 1
fi

# Packages from bookworm itself.
BASE_PACKAGES=(
    build-essential cmake pkg-config git
    liburing-dev libhwloc-dev check libsubunit-dev
    clang clang-format libclang-rt-14-dev
    dpdk-dev
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
    busybox-static kmod cpio xz-utils zstd
    bison flex bc libelf-dev file python3
)
# arm64 builds of the libraries the ring and DMA unit tests link, for the
# cross-built test run under qemu-aarch64-static (scripts/run-arm64-tests.sh).
# Needs the arm64 architecture enabled in dpkg (multiarch); every package
# here is Multi-Arch: same, so the amd64 copies stay installed beside them.
ARM64_PACKAGES=(
    check:arm64 libsubunit-dev:arm64 liburing-dev:arm64 libhwloc-dev:arm64
)
# Packages taken from bookworm-backports.
BACKPORTS_PACKAGES=(
    linux-libc-dev
    qemu-system-x86
    linux-source-6.12
)

BACKPORTS_LIST=/etc/apt/sources.list.d/bookworm-backports.sources
export DEBIAN_FRONTEND=noninteractive

missing() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
            || echo "$p"
    done
}

backports_version_installed() {
    # linux-libc-dev is installed from bookworm already on a fresh machine;
    # what we need is the backports version (6.12, with linux/iommufd.h).
    dpkg-query -W -f='${Version}\n' "$1" 2>/dev/null | grep -q 'bpo12'
}

updated=0
apt_update() {
    if [ "$updated" = 0 ]; then
        # A third-party source that cannot be reached must not stop us: only
        # Debian's archive is needed.
        apt-get -o DPkg::Lock::Timeout=900 update -q || echo "install-deps.sh: apt-get update reported errors; continuing" >&2
        updated=1
    fi
}

if [ ! -f "$BACKPORTS_LIST" ] && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    cat > "$BACKPORTS_LIST" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    echo "install-deps.sh: enabled bookworm-backports in $BACKPORTS_LIST"
fi

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    echo "install-deps.sh: enabled the arm64 architecture (multiarch)"
fi

mapfile -t need_base < <(missing "${BASE_PACKAGES[@]}" "${ARM64_PACKAGES[@]}")
need_bpo=()
for p in "${BACKPORTS_PACKAGES[@]}"; do
    backports_version_installed "$p" || need_bpo+=("$p")
done

if [ "${#need_base[@]}" -gt 0 ]; then
    apt_update
    echo "install-deps.sh: installing ${need_base[*]}"
    apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${need_base[@]}"
fi
if [ "${#need_bpo[@]}" -gt 0 ]; then
    apt_update
    echo "install-deps.sh: installing from bookworm-backports: ${need_bpo[*]}"
    apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends -t bookworm-backports "${need_bpo[@]}"
fi
echo "install-deps.sh: all packages present"
