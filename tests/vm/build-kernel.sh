#!/bin/bash
# build-kernel.sh: print the path of a guest bzImage built from Debian's
# linux-source-6.12 with tests/vm/kernel.config (IOMMUFD + VFIO_DEVICE_CDEV,
# which no Debian kernel has), building it first when the cache lacks it.
#
# The cache key hashes the config fragment, the source tarball's package
# version and the compiler, so a change to any of them rebuilds; nothing else
# does. The cache lives outside the build dir so a fresh CMake tree (CI) reuses
# it. Two ctest tests may ask at once: a lock serialises the build.
#
# usage: build-kernel.sh [kernel.config]      env: NPUVFIO_CACHE (default /var/cache/npuvfio)
# exit:  0 and the bzImage path on stdout; nonzero with the reason on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
frag=${1:-$here/kernel.config}
cache=${NPUVFIO_CACHE:-/var/cache/npuvfio}
src_tar=/usr/src/linux-source-6.12.tar.xz
die() { echo "build-kernel: $*" >&2; exit 1; }

[ -r "$src_tar" ] || die "no $src_tar: install linux-source-6.12 from bookworm-backports"
for t in make gcc bison flex bc xz; do
  command -v "$t" >/dev/null || die "missing build tool '$t' (make bison flex bc libelf-dev xz-utils)"
done
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || stat -c %s "$src_tar")
key=$( { cat "$frag"; echo "src=$srcver"; gcc --version | head -1; } | sha256sum | cut -c1-16)
out=$cache/kernel-$key
if [ -f "$out/bzImage" ]; then echo "$out/bzImage"; exit 0; fi

mkdir -p "$cache" || die "cannot create cache dir $cache (set NPUVFIO_CACHE)"
exec 9>"$cache/kernel-build.lock"
if ! flock -n 9; then
  echo "build-kernel: another run is building the guest kernel; waiting for it (up to ~5 min)" >&2
  flock 9
fi
if [ -f "$out/bzImage" ]; then echo "$out/bzImage"; exit 0; fi
echo "build-kernel: no cached guest kernel for this configuration: building one from" \
  "linux-source-6.12 with IOMMUFD (about 5 min on 2 cores, once; cached in $out)" >&2

work=$cache/kbuild-$key
rm -rf "$work" && mkdir -p "$work"
t0=$(date +%s)
echo "build-kernel: unpacking $src_tar into $work" >&2
tar -C "$work" -xf "$src_tar"
ksrc=$work/linux-source-6.12
kout=$work/out
echo "build-kernel: allnoconfig + $frag" >&2
make -s -C "$ksrc" O="$kout" allnoconfig >/dev/null
"$ksrc/scripts/kconfig/merge_config.sh" -m -O "$kout" "$kout/.config" "$frag" >/dev/null
make -s -C "$ksrc" O="$kout" olddefconfig >/dev/null
lost=""
for o in $(sed -n 's/^\(CONFIG_[A-Z0-9_]*\)=y$/\1/p' "$frag"); do
  grep -q "^$o=y" "$kout/.config" || lost="$lost $o"
done
[ -z "$lost" ] || die "olddefconfig dropped:$lost (a dependency is missing from $frag)"
echo "build-kernel: make bzImage (about 4 min on 2 cores; log $work/build.log)" >&2
if ! make -C "$ksrc" O="$kout" -j"$(( $(nproc) + 1 ))" bzImage >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log" >&2
  die "kernel build failed; full log in $work/build.log"
fi
mkdir -p "$out.tmp"
cp "$kout/arch/x86/boot/bzImage" "$out.tmp/bzImage"
cp "$kout/.config" "$out.tmp/config"
cp "$frag" "$out.tmp/kernel.config"
echo "$(( $(date +%s) - t0 ))" > "$out.tmp/build-seconds"
rm -rf "$out" && mv "$out.tmp" "$out"
rm -rf "$work"
echo "build-kernel: built in $(cat "$out/build-seconds")s -> $out/bzImage" >&2
echo "$out/bzImage"
