#!/bin/bash
# fetch-debian-kernel.sh: print a directory holding Debian's 6.12 kernel from
# bookworm-backports (the image linux-image-amd64 points at there) as
#   vmlinuz, version, modules/<kver>/... (with modules.dep)
# downloading and unpacking it first when the cache lacks it. This kernel has
# no IOMMUFD (Debian builds it with CONFIG_IOMMUFD unset): the legacy backend
# is tested on it as users run it.
#
# Without network the newest cached copy is used, said loudly.
# usage: fetch-debian-kernel.sh       env: NPUVFIO_CACHE (default /var/cache/npuvfio)
set -euo pipefail
cache=${NPUVFIO_CACHE:-/var/cache/npuvfio}
die() { echo "fetch-debian-kernel: $*" >&2; exit 1; }
mkdir -p "$cache" || die "cannot create cache dir $cache (set NPUVFIO_CACHE)"

ver=$(apt-cache madison linux-image-amd64 2>/dev/null |
      awk -F'|' '/bookworm-backports/ && $2 ~ /6\.12\./ {gsub(/ /,"",$2); print $2; exit}')
pkg=""
[ -n "$ver" ] && pkg=$(apt-cache show "linux-image-amd64=$ver" |
      sed -n 's/^Depends: \(linux-image-[^ ,]*\).*/\1/p' | head -1)
if [ -z "$pkg" ]; then
  last=$(ls -d "$cache"/debian-kernel-*/ 2>/dev/null | sort -V | tail -1)
  [ -n "$last" ] || die "apt-cache knows no bookworm-backports linux-image-amd64 6.12 and nothing is cached (is bookworm-backports in the apt sources?)"
  echo "fetch-debian-kernel: apt-cache has no 6.12 kernel; using cached ${last%/}" >&2
  echo "${last%/}"; exit 0
fi
out=$cache/debian-kernel-$pkg-$ver
if [ -f "$out/vmlinuz" ]; then echo "$out"; exit 0; fi

exec 9>"$cache/debian-kernel.lock"
flock 9
if [ -f "$out/vmlinuz" ]; then echo "$out"; exit 0; fi
tmp=$out.tmp
rm -rf "$tmp" && mkdir -p "$tmp/deb"
echo "fetch-debian-kernel: apt-get download $pkg=$ver" >&2
(cd "$tmp/deb" && apt-get download "$pkg=$ver" >/dev/null 2>&1) ||
  die "apt-get download $pkg=$ver failed (no network or repository?)"
dpkg -x "$tmp"/deb/*.deb "$tmp/root"
kver=$(ls "$tmp/root/lib/modules")
depmod -b "$tmp/root" "$kver" || die "depmod failed (install kmod)"
mkdir -p "$tmp/modules"
mv "$tmp/root/lib/modules/$kver" "$tmp/modules/$kver"
mv "$tmp/root/boot/vmlinuz-$kver" "$tmp/vmlinuz"
echo "$kver" > "$tmp/version"
rm -rf "$tmp/root" "$tmp/deb"
rm -rf "$out" && mv "$tmp" "$out"
echo "$out"
