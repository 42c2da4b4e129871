#!/usr/bin/env bash
# Builds that prove the tree stays portable:
#  1. with bookworm's own 6.1 uapi headers (no linux/iommufd.h): configure must
#     turn iommufd off and the whole tree must build with -Werror;
#  2. the library's sources compiled for arm64 with Debian's cross compiler,
#     so the cache-maintenance (DMA sync) and barrier paths build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${NPUVFIO_CACHE:-/var/cache/npuvfio}
mkdir -p "$cache/old-uapi"

echo "== build with bookworm's 6.1 uapi headers"
old=$cache/old-uapi
if [ ! -f "$old/usr/include/linux/vfio.h" ]; then
    (cd "$old" && apt-get download -q linux-libc-dev/bookworm >/dev/null)
    dpkg -x "$old"/linux-libc-dev_*.deb "$old"
fi
if [ -f "$old/usr/include/linux/iommufd.h" ]; then
    echo "check-portability: the bookworm headers unexpectedly have linux/iommufd.h" >&2
    exit 1
fi
b=$root/build/old-uapi
# A header-only sysroot: the system's /usr/include with linux/, asm/ and
# asm-generic/ taken from the 6.1 package instead (gcc -isysroot applies to
# headers only), so configure-time checks see exactly what bookworm ships.
inc=$b/sysroot/usr/include
rm -rf "$b" && mkdir -p "$inc/x86_64-linux-gnu"
for e in /usr/include/*; do
    case ${e##*/} in linux | asm-generic | x86_64-linux-gnu) ;; *) ln -s "$e" "$inc/" ;; esac
done
for e in /usr/include/x86_64-linux-gnu/*; do
    [ "${e##*/}" = asm ] || ln -s "$e" "$inc/x86_64-linux-gnu/"
done
ln -s "$old/usr/include/linux" "$inc/linux"
ln -s "$old/usr/include/asm-generic" "$inc/asm-generic"
ln -s "$old/usr/include/x86_64-linux-gnu/asm" "$inc/x86_64-linux-gnu/asm"
flags="-isysroot $b/sysroot"
cmake -S "$root" -B "$b" -DNPUVFIO_WERROR=ON -DCMAKE_C_FLAGS="$flags" >"$b.log" 2>&1 \
    || { cat "$b.log"; exit 1; }
grep -q 'iommufd support: 0' "$b.log" || { echo "iommufd was not turned off:"; cat "$b.log"; exit 1; }
cmake --build "$b" -j "$(nproc)" >"$b.build.log" 2>&1 || { tail -50 "$b.build.log"; exit 1; }
echo "ok: built with 6.1 headers, iommufd off"

echo "== arm64 cross compile of lib/"
x=$root/build/arm64
rm -rf "$x" && mkdir -p "$x/inc"
# Only the dependency headers we use, so the host's own libc headers stay out of the way.
for h in liburing.h liburing hwloc.h hwloc; do ln -s "/usr/include/$h" "$x/inc/$h"; done
# hwloc's generated config.h lives in the arch directory; it holds only
# compiler-feature macros (no type sizes), so the amd64 copy serves.
mkdir -p "$x/inc-arch/hwloc"
ln -s /usr/include/x86_64-linux-gnu/hwloc/autogen "$x/inc-arch/hwloc/autogen"
printf '#define NPV_HAVE_IOMMUFD 0\n#define NPV_HAVE_IOMMUFD_FAULT 0\n#define NPV_HAVE_USDT 0\n#define NPV_HAVE_FAILPOINTS 1\n#define NPV_VERSION "cross"\n' \
    > "$x/inc/npv_config.h"
lib_includes=()
for d in lib/*/; do lib_includes+=("-I$d"); done
for src in lib/*/*.c; do
    aarch64-linux-gnu-gcc -std=gnu17 -O2 -Wall -Wextra -Werror -Wno-sign-conversion \
        -D_GNU_SOURCE -DNPUVFIO_BUILDING_LIBRARY -Iinclude "${lib_includes[@]}" -I"$x/inc" \
        -I"$x/inc-arch" -c "$src" -o "$x/$(basename "$src" .c).o"
done
echo "ok: lib/ compiles for arm64"
