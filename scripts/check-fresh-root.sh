#!/usr/bin/env bash
# The release check: the README's two commands in a freshly bootstrapped
# Debian bookworm root, as a new user's machine would run them. A root made
# by `debootstrap --variant=minbase` with only git and ca-certificates added
# gets a clone of this repository's HEAD (committed work only), then runs
#   scripts/run-main.sh      and then      scripts/run-tests.sh
# as root inside it, timing each. Packages come from the archive address this
# machine's apt sources use for bookworm (install-deps.sh --print-archive),
# so a machine that reaches only a mirror keeps using it.
#
#   scripts/check-fresh-root.sh [--root DIR] [--logs DIR] [--keep]
#                               [--main-only] [--kernel-cache DIR]
#
#   --root DIR          where to bootstrap (default /var/tmp/npuvfio-fresh-root;
#                       must not exist; about 8 GiB with the builds)
#   --logs DIR          each command's output (default build/fresh-root)
#   --keep              leave the root in place (default: removed at exit)
#   --main-only         run scripts/run-main.sh only
#   --kernel-cache DIR  share DIR as the root's /var/cache/npuvfio (the kernel
#                       VFIO tests' guest kernel cache): an empty DIR still
#                       proves a first build, and then primes DIR for later runs
#
# Needs root and debootstrap (scripts/install-deps.sh installs it). Exits 0
# only when every command ran and exited 0. Takes about an hour on 2 cores
# (the guest kernel build and the ASan-free whole suite dominate).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

root=/var/tmp/npuvfio-fresh-root
logs=$repo/build/fresh-root
keep=0
main_only=0
kernel_cache=
usage() {
    sed -n '/^#   scripts/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --root) [ $# -ge 2 ] || usage; root=$2; shift ;;
    --logs) [ $# -ge 2 ] || usage; logs=$2; shift ;;
    --keep) keep=1 ;;
    --main-only) main_only=1 ;;
    --kernel-cache) [ $# -ge 2 ] || usage; kernel_cache=$2; shift ;;
    -h | --help) usage ;;
    *) echo "check-fresh-root.sh: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done

die() { echo "check-fresh-root.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot)"
command -v debootstrap >/dev/null || die "debootstrap is missing: run scripts/install-deps.sh"
[ ! -e "$root" ] || die "$root exists: remove it or give another --root"
archive=$(scripts/install-deps.sh --print-archive) || die "no bookworm archive in the apt sources"
head=$(git -C "$repo" rev-parse HEAD)
git -C "$repo" diff --quiet HEAD 2>/dev/null ||
    echo "check-fresh-root.sh: note: uncommitted changes are not part of the check (it clones HEAD $head)"

mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || true
    done
    if [ "$keep" = 0 ] && [ -d "$root" ]; then
        rm -rf --one-file-system "$root"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bind() { # bind SRC DST [mount options...]
    local src=$1 dst=$2; shift 2
    mkdir -p "$dst"
    mount "$@" "$src" "$dst"
    mounted+=("$dst")
}

mkdir -p "$logs"
seconds() { date +%s; }
t0=$(seconds)
echo "check-fresh-root.sh: bootstrapping bookworm (minbase + git, ca-certificates) from $archive into $root"
debootstrap --variant=minbase --include=git,ca-certificates bookworm "$root" "$archive" \
    >"$logs/debootstrap.log" 2>&1 || { tail -20 "$logs/debootstrap.log" >&2; die "debootstrap failed"; }
t_boot=$(($(seconds) - t0))

# What a machine has that a chroot lacks: the kernel's file systems and name
# resolution. Hugepages are the host kernel's (through /proc and /sys).
bind proc "$root/proc" -t proc
bind /sys "$root/sys" --rbind
bind /dev "$root/dev" --rbind
bind tmpfs "$root/run" -t tmpfs
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
if [ -n "$kernel_cache" ]; then
    mkdir -p "$kernel_cache"
    bind "$kernel_cache" "$root/var/cache/npuvfio" --bind
fi
git clone -q --no-local "$repo" "$root/root/npuvfio"
git -C "$root/root/npuvfio" checkout -q "$head"

in_root() { # in_root LOG COMMAND: run COMMAND in the clone, as root, with a clean environment
    local log=$1 cmd=$2 start rc
    start=$(seconds)
    set +e
    chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        /bin/bash -c "cd /root/npuvfio && $cmd" >"$log" 2>&1
    rc=$?
    set -e
    echo "$rc $(($(seconds) - start))"
}

results=()
status=0
for cmd in scripts/run-main.sh scripts/run-tests.sh; do
    [ "$main_only" = 0 ] || [ "$cmd" = scripts/run-main.sh ] || continue
    log=$logs/$(basename "$cmd" .sh).log
    echo "check-fresh-root.sh: running $cmd in the fresh root (log: $log)"
    read -r rc secs < <(in_root "$log" "$cmd")
    results+=("$(printf '%-22s exit %-3s %5d min %02d s' "$cmd" "$rc" $((secs / 60)) $((secs % 60)))")
    if [ "$rc" != 0 ]; then
        status=1
        echo "check-fresh-root.sh: $cmd failed (exit $rc); its last lines:" >&2
        tail -30 "$log" >&2
        break
    fi
done

echo
echo "fresh bookworm root at $head (debootstrap: $((t_boot / 60)) min $((t_boot % 60)) s):"
printf '  %s\n' "${results[@]}"
[ "$status" = 0 ] && echo "check-fresh-root.sh: the README's commands pass in a fresh root" ||
    echo "check-fresh-root.sh: FAILED" >&2
exit "$status"
