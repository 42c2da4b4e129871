#!/usr/bin/env bash
# Install every Debian package npuvfio needs to build, test and benchmark.
# Idempotent: packages already installed are skipped, and apt is only asked
# for what is missing. Runs on Debian 12 (bookworm), as root when something
# is missing (with nothing missing it changes nothing and needs no root).
#
# bookworm-backports is enabled for the few packages that need it, and only
# those are taken from it (backports is pinned low by Debian by default). Its
# address is the one the machine already uses for bookworm's main archive
# (a machine configured with a mirror may reach nothing else):
#   linux-libc-dev 6.12  uapi headers with iommufd and the VFIO cdev API
#   qemu-system-x86 10   the guest for the kernel VFIO tests
#   linux-image / linux-source 6.12  the guest kernels
set -euo pipefail

# Print the URI of the first enabled "deb" source for Debian's bookworm main
# archive in the apt configuration under $1 (default /etc/apt).
bookworm_archive_uri() {
    local all
    all=$(bookworm_archive_uris "$@")
    [ -z "$all" ] || printf '%s\n' "${all%%$'\n'*}"
}

# Every such URI, one a line, in apt's order of files.
bookworm_archive_uris() {
    local etc=${1:-/etc/apt} f
    local files=()
    [ -f "$etc/sources.list" ] && files+=("$etc/sources.list")
    for f in "$etc"/sources.list.d/*.list; do [ -f "$f" ] && files+=("$f"); done
    for f in "${files[@]}"; do
        # One-line style: deb [options] URI SUITE COMPONENT...
        awk '
            { sub(/#.*/, "") }
            $1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                uri = $i; suite = $(i + 1)
                if (suite != "bookworm") next
                for (k = i + 2; k <= NF; k++) if ($k == "main") { print uri; exit }
            }' "$f"
    done
    for f in "$etc"/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        # deb822: stanzas separated by blank lines; fields may fold onto
        # continuation lines (leading space).
        awk '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && suites ~ /(^| )bookworm( |$)/ &&
                    comps ~ /(^| )main( |$)/ && enabled != "no" && uris != "") {
                    split(uris, u, " "); print u[1]; found = 1; exit
                }
                types = suites = comps = uris = last = ""; enabled = "yes"
            }
            BEGIN { enabled = "yes" }
            /^#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/ { val = $0; gsub(/^[ \t]+|[ \t]+$/, "", val); add(last, val); next }
            {
                key = tolower(substr($0, 1, index($0, ":") - 1)); val = substr($0, index($0, ":") + 1)
                gsub(/^[ \t]+|[ \t]+$/, "", val); last = key; add(key, val)
            }
            function add(k, v) {
                if (k == "types") types = types " " v
                else if (k == "uris") uris = uris " " v
                else if (k == "suites") suites = suites " " v
                else if (k == "components") comps = comps " " v
                else if (k == "enabled") enabled = tolower(v)
            }
            END { if (!found) flush() }' "$f"
    done
}

#   install-deps.sh --check
# lists the packages that are missing and exits 1 when any is, 0 when all are
# present; it changes nothing and needs no root.
#   install-deps.sh --print-archive [APT_DIR]
# prints the archive address backports would be taken from (parsing APT_DIR,
# default /etc/apt) and changes nothing; it needs no root.
if [ "${1:-}" = --print-archive ]; then
    uri=$(bookworm_archive_uri "${2:-/etc/apt}")
    if [ -z "$uri" ]; then
        echo "install-deps.sh: no enabled 'deb' source for bookworm main in ${2:-/etc/apt}" >&2
        exit 1
    fi
    echo "$uri"
    exit 0
fi

# Packages from bookworm itself.
BASE_PACKAGES=(
    build-essential cmake pkg-config git
    scdoc man-db abigail-tools
    liburing-dev libhwloc-dev check libsubunit-dev
    clang clang-format libclang-rt-14-dev
    dpdk-dev linux-perf
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
    busybox-static kmod cpio xz-utils zstd
    bison flex bc libelf-dev file python3
    systemtap-sdt-dev
    debootstrap  # scripts/check-fresh-root.sh, the release check
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
# Dependencies of those that bookworm's versions do not satisfy (qemu 10's
# own data and firmware), named from backports in the same transaction:
# apt takes a PKG/SUITE only for the package named, not for what it needs.
BACKPORTS_DEPENDENCIES=(qemu-system-common qemu-system-data seabios)

# The apt configuration directory; tests/packaging/install_deps_stub_apt.sh
# points it at a scratch tree and runs the script against stub apt tools.
APT_ETC=${NPV_APT_ETC:-/etc/apt}
BACKPORTS_LIST=$APT_ETC/sources.list.d/bookworm-backports.sources
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=900)

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

arm64_enabled() {
    dpkg --print-foreign-architectures | grep -qx arm64
}

# Some enabled apt source already names bookworm-backports.
backports_in_sources() {
    [ -f "$BACKPORTS_LIST" ] || grep -qs 'bookworm-backports' "$APT_ETC/sources.list" \
        "$APT_ETC"/sources.list.d/*.list "$APT_ETC"/sources.list.d/*.sources
}

# Add bookworm-backports from the archive address the machine already uses
# for bookworm, unless some source has it already.
enable_backports() {
    backports_in_sources && return 0
    local archive
    archive=$(bookworm_archive_uri "$APT_ETC")
    if [ -z "$archive" ]; then
        archive=http://deb.debian.org/debian
        echo "install-deps.sh: no bookworm main archive found in the apt sources; using $archive" >&2
    fi
    mkdir -p "$(dirname "$BACKPORTS_LIST")"
    cat > "$BACKPORTS_LIST" <<SRC
Types: deb
URIs: $archive
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    echo "install-deps.sh: enabled bookworm-backports from $archive (the bookworm archive of the apt sources) in $BACKPORTS_LIST"
}

# Fetch the package indexes. Runs after every change to the sources and the
# architectures, so no install ever asks for a suite or an architecture
# whose index was never fetched. A third-party source that cannot be reached
# must not stop us: only Debian's archive is needed, and that is checked
# after (backports_index_present).
apt_update() {
    "${APT[@]}" update -q || echo "install-deps.sh: apt-get update reported errors; continuing" >&2
}

# apt knows a bookworm-backports release (its index was fetched).
backports_index_present() {
    # Read it whole first: grep -q stops at the first match, and under
    # pipefail apt-cache's SIGPIPE would make the answer a race.
    local policy
    policy=$(apt-cache policy 2>/dev/null) || true
    grep -q 'a=bookworm-backports\|n=bookworm-backports' <<<"$policy"
}

# apt-get install PKG... where a PKG/bookworm-backports may need more of
# backports than it names: apt takes a PKG/SUITE only for the package named.
# apt's complaint says which, one line each:
#   X : Depends: Y (= V1) but V2 is to be installed
# V2 from backports: X is a bookworm package that cannot take backports' Y,
# so X comes from backports too (libbpf-dev beside backports' libbpf1);
# V2 from bookworm: Y itself must come from backports (qemu 10's data).
# Up to four rounds, each adding what apt named; anything else fails as apt
# failed.
install_with_backports_dependencies() {
    local pkgs=("$@") log round more=()
    log=$(mktemp)
    for round in 1 2 3 4; do
        if "${APT[@]}" install -y -q --no-install-recommends "${pkgs[@]}" 2>&1 | tee "$log"; then
            rm -f "$log"
            return 0
        fi
        [ "${#need_bpo[@]}" -gt 0 ] || break
        mapfile -t more < <(sed -n '
            s/^ *\([^ ]*\) : Depends: [^ ]* (.*) but [^ ]*bpo[^ ]* is to be installed.*/\1/p
            t
            s/.*Depends: \([^ ]*\) (.*) but .* is to be installed.*/\1/p' "$log" | sort -u)
        local next=() p m added=()
        for p in "${pkgs[@]}"; do
            [[ " ${more[*]} " == *" $p "* ]] || next+=("$p")
        done
        for m in "${more[@]}"; do
            [[ " ${next[*]} " == *" $m/bookworm-backports "* ]] && continue
            next+=("$m/bookworm-backports")
            added+=("$m")
        done
        [ "${#added[@]}" -gt 0 ] || break
        echo "install-deps.sh: also from bookworm-backports, as apt asks (round $round): ${added[*]}"
        pkgs=("${next[@]}")
    done
    rm -f "$log"
    echo "install-deps.sh: apt could not install the packages (above)" >&2
    exit 100
}

need_arch=0
arm64_enabled || need_arch=1
mapfile -t need_base < <(missing "${BASE_PACKAGES[@]}" "${ARM64_PACKAGES[@]}")
need_bpo=()
for p in "${BACKPORTS_PACKAGES[@]}"; do
    backports_version_installed "$p" || need_bpo+=("$p")
done
# An install interrupted or forced through ("dependency problems, but
# removing anyway") leaves packages whose dependencies are unmet; apt then
# refuses every later install until they are fixed.
broken=0
if ! apt-get -o Debug::NoLocking=1 check -q >/dev/null 2>&1; then broken=1; fi

#   install-deps.sh --check
# lists what is missing and exits 1 when anything is, 0 when all is present;
# it changes nothing (not even the dpkg architectures) and needs no root.
if [ "${1:-}" = --check ]; then
    what=("${need_base[@]}" "${need_bpo[@]}")
    [ "$need_arch" = 0 ] || what+=("(the arm64 dpkg architecture)")
    [ "$broken" = 0 ] || what+=("(unmet dependencies: apt-get check fails)")
    if [ "${#what[@]}" -gt 0 ]; then
        echo "install-deps.sh: missing: ${what[*]}"
        exit 1
    fi
    exit 0
fi

if [ "$need_arch" = 0 ] && [ "$broken" = 0 ] && [ "${#need_base[@]}" -eq 0 ] &&
    [ "${#need_bpo[@]}" -eq 0 ]; then
    echo "install-deps.sh: all packages present"
    exit 0
fi
# Root only when something must be installed.
if [ "$(id -u)" != 0 ]; then
    echo "install-deps.sh: must run as root to install ${need_base[*]} ${need_bpo[*]}" >&2
    exit 1
fi

# Every change to what apt reads comes first, then one index update, then
# the installs.
if [ "$need_arch" = 1 ]; then
    dpkg --add-architecture arm64
    echo "install-deps.sh: enabled the arm64 architecture (multiarch)"
fi
[ "${#need_bpo[@]}" -eq 0 ] || enable_backports
apt_update
if [ "${#need_bpo[@]}" -gt 0 ] && ! backports_index_present; then
    echo "install-deps.sh: apt has no index of bookworm-backports after 'apt-get update'" \
        "(is $(bookworm_archive_uri "$APT_ETC") reachable?); cannot install ${need_bpo[*]}" >&2
    exit 1
fi
[ "$broken" = 0 ] || "${APT[@]}" install -y -q --no-install-recommends -f
# One transaction for everything, the backports packages named as
# PKG/bookworm-backports: apt then takes only those from backports, and
# everything else from bookworm. Two transactions break a machine with nothing on it both ways:
# backports first with -t makes every new dependency a backports version
# (libelf1 0.192, which bookworm's libelf-dev cannot take); bookworm first
# installs linux-libc-dev:arm64 under the arm64 libraries, which backports'
# Architecture: all linux-libc-dev then removes "anyway".
install=("${need_base[@]}")
for p in "${need_bpo[@]}"; do install+=("$p/bookworm-backports"); done
if [[ " ${need_bpo[*]} " == *" qemu-system-x86 "* ]]; then
    for p in "${BACKPORTS_DEPENDENCIES[@]}"; do install+=("$p/bookworm-backports"); done
fi
if [ "${#install[@]}" -gt 0 ]; then
    [ "${#need_base[@]}" -eq 0 ] || echo "install-deps.sh: installing ${need_base[*]}"
    [ "${#need_bpo[@]}" -eq 0 ] || echo "install-deps.sh: installing from bookworm-backports: ${need_bpo[*]}"
    install_with_backports_dependencies "${install[@]}"
fi
if ! apt-get -o Debug::NoLocking=1 check -q >/dev/null 2>&1; then
    echo "install-deps.sh: apt reports unmet dependencies after the install (apt-get check):" >&2
    apt-get -o Debug::NoLocking=1 check -q >&2 || true
    exit 1
fi
echo "install-deps.sh: all packages present"
bpo_report=()
for p in "${BACKPORTS_PACKAGES[@]}"; do
    bpo_report+=("$p $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)")
done
echo "install-deps.sh: from bookworm-backports: $(IFS=,; echo "${bpo_report[*]}" | sed 's/,/, /g')"
