#!/usr/bin/env bash
# install-deps.sh against stub apt tools: apt-get, apt-cache, dpkg and
# dpkg-query on PATH keep a scratch package state and record every call, and
# the stub apt-get refuses what the real one refuses:
#   - an install from a suite (-t SUITE) whose index the last `update` did
#     not fetch (the first run on a fresh machine failed this way: backports
#     was added to the sources after the only update);
#   - an install of a PKG:arm64 while the last update ran without the arm64
#     architecture enabled.
# Cases: a fresh machine (one run installs everything, in an order that
# never removes an arm64 package), --check changes nothing, a second run
# changes nothing and needs no root, unmet dependencies are reported.
#   install_deps_stub_apt.sh SOURCE_DIR
set -euo pipefail
script=$1/scripts/install-deps.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

mkdir -p "$tmp/bin"
# The stubs share one state folder: installed (name version), arches,
# indexed (suites seen by the last update), indexed-arches, calls (the log),
# broken (present: apt-get check fails).
cat > "$tmp/bin/dpkg-query" <<'STUB'
#!/usr/bin/env bash
# dpkg-query -W -f=FORMAT PKG
fmt=${2#-f=}; pkg=$3
line=$(grep -m1 "^$pkg " "$STUB_STATE/installed" 2>/dev/null) || exit 1
ver=${line#* }
fmt=${fmt//'${Status}'/install ok installed}; fmt=${fmt//'${Version}'/$ver}
printf "$fmt"
STUB
cat > "$tmp/bin/dpkg" <<'STUB'
#!/usr/bin/env bash
echo "dpkg $*" >> "$STUB_STATE/calls"
case "$1" in
--print-foreign-architectures) cat "$STUB_STATE/arches" 2>/dev/null; exit 0 ;;
--add-architecture) echo "$2" >> "$STUB_STATE/arches"; exit 0 ;;
esac
echo "dpkg stub: unexpected $*" >&2; exit 2
STUB
cat > "$tmp/bin/apt-cache" <<'STUB'
#!/usr/bin/env bash
[ "$1" = policy ] || { echo "apt-cache stub: unexpected $*" >&2; exit 2; }
while read -r s; do
    echo " 500 http://archive.example/debian $s/main amd64 Packages"
    echo "     release o=Debian,a=$s,n=$s,l=Debian,c=main,b=amd64"
done < "$STUB_STATE/indexed"
STUB
cat > "$tmp/bin/apt-get" <<'STUB'
#!/usr/bin/env bash
echo "apt-get $*" >> "$STUB_STATE/calls"
args=(); suite=; cmd=
while [ $# -gt 0 ]; do
    case "$1" in
    -o) shift ;;
    -t) suite=$2; shift ;;
    -*) ;;
    *) if [ -z "$cmd" ]; then cmd=$1; else args+=("$1"); fi ;;
    esac
    shift
done
case "$cmd" in
check) [ ! -e "$STUB_STATE/broken" ] || { echo "E: Unmet dependencies."; exit 100; }; exit 0 ;;
update)
    # The suites the sources name now, one-line and deb822.
    cat "$NPV_APT_ETC"/sources.list "$NPV_APT_ETC"/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $(i + 1) }' \
        > "$STUB_STATE/indexed"
    cat "$NPV_APT_ETC"/sources.list.d/*.sources 2>/dev/null |
        awk 'tolower($1) == "suites:" { for (i = 2; i <= NF; i++) print $i }' >> "$STUB_STATE/indexed"
    { echo amd64; cat "$STUB_STATE/arches" 2>/dev/null; } > "$STUB_STATE/indexed-arches"
    exit 0 ;;
install)
    if [ -n "$suite" ] && ! grep -qx "$suite" "$STUB_STATE/indexed" 2>/dev/null; then
        echo "E: The value '$suite' is invalid for APT::Default-Release as such a release is not available in the sources"
        exit 100
    fi
    for p in "${args[@]}"; do
        case "$p" in */*)
            grep -qx "${p#*/}" "$STUB_STATE/indexed" 2>/dev/null ||
                { echo "E: Release '${p#*/}' for '${p%/*}' was not found"; exit 100; } ;;
        esac
        case "${p%/*}" in *:*)
            grep -qx "${p#*:}" "$STUB_STATE/indexed-arches" 2>/dev/null ||
                { echo "E: Unable to locate package $p"; exit 100; } ;;
        esac
    done
    # A package named PKG/SUITE takes only itself from SUITE: backports'
    # qemu 10 needs its own data and firmware named from backports too (and
    # STUB_BPO_NEEDS names one more such dependency, as a later backports
    # update may add).
    named() { printf '%s\n' "${args[@]}" | grep -qx "$1"; }
    if named qemu-system-x86/bookworm-backports; then
        for d in qemu-system-common seabios ${STUB_BPO_NEEDS:-}; do
            named "$d/bookworm-backports" && continue
            echo " qemu-system-x86 : Depends: $d (>= 1:10.0) but 1:7.2+dfsg-7 is to be installed"
            echo "E: Unable to correct problems, you have held broken packages."
            exit 100
        done
        # STUB_BPO_DEPENDER: a bookworm package that cannot take the
        # backports library qemu 10 pulls in (libbpf-dev and libbpf1 on a
        # fresh root), so it must come from backports too.
        for d in ${STUB_BPO_DEPENDER:-}; do
            named "$d/bookworm-backports" && continue
            echo " $d : Depends: libbpf1 (= 1:1.1.2-0+deb12u1) but 1:1.4.6-1~bpo12+1 is to be installed"
            echo "E: Unable to correct problems, you have held broken packages."
            exit 100
        done
    fi
    # What apt does on a machine with nothing on it, in the two ways two
    # transactions went wrong:
    # -t makes every new dependency a backports version, and bookworm's
    # libelf-dev cannot take backports' libelf1 later;
    if [ -n "$suite" ] && ! grep -q '^libelf-dev ' "$STUB_STATE/installed"; then
        touch "$STUB_STATE/libelf1-from-backports"
    fi
    if [ -e "$STUB_STATE/libelf1-from-backports" ] && printf '%s\n' "${args[@]}" | grep -qx libelf-dev; then
        echo " libelf-dev : Depends: libelf1 (= 0.188-2.1) but 0.192-4~bpo12+1 is to be installed"
        echo "E: Unable to correct problems, you have held broken packages."
        exit 100
    fi
    # backports' Architecture: all linux-libc-dev installed after the arm64
    # libraries removes linux-libc-dev:arm64 from under them.
    if { [ -n "$suite" ] && printf '%s\n' "${args[@]}" | grep -qx linux-libc-dev ||
        printf '%s\n' "${args[@]}" | grep -qx 'linux-libc-dev/.*'; } &&
        grep -q '^check:arm64 ' "$STUB_STATE/installed"; then
        echo "dpkg: libc6-dev:arm64 depends on linux-libc-dev; dependency problems, but removing anyway"
        touch "$STUB_STATE/broken"
        exit 0
    fi
    [ -n "$suite" ] || [ "${#args[@]}" -gt 0 ] || rm -f "$STUB_STATE/broken"
    for p in "${args[@]}"; do
        name=${p%/*}; ver=1.0-1
        [ -z "$suite" ] && [ "$name" = "$p" ] || ver=6.12.0-1~bpo12+1
        sed -i "/^$name /d" "$STUB_STATE/installed"
        echo "$name $ver" >> "$STUB_STATE/installed"
    done
    exit 0 ;;
esac
echo "apt-get stub: unexpected $cmd" >&2; exit 2
STUB
cat > "$tmp/bin/id" <<'STUB'
#!/usr/bin/env bash
echo "${STUB_UID:-0}"
STUB
chmod +x "$tmp/bin"/*

# A fresh bookworm machine: bookworm's own linux-libc-dev, no backports
# source, no foreign architecture.
fresh() { # fresh DIR
    rm -rf "$1"; mkdir -p "$1/state" "$1/etc/sources.list.d"
    cat > "$1/etc/sources.list.d/debian.sources" <<'SRC'
Types: deb
URIs: http://archive.example/debian
Suites: bookworm bookworm-updates
Components: main
SRC
    echo "linux-libc-dev 6.1.0-1" > "$1/state/installed"
    : > "$1/state/calls"
}
run() { # run DIR [ARGS...]: the script with the stubs; output in DIR/out
    local d=$1; shift
    PATH="$tmp/bin:$PATH" STUB_STATE="$d/state" NPV_APT_ETC="$d/etc" \
        "$script" "$@" > "$d/out" 2>&1
}
calls() { cat "$1/state/calls"; }

# 1. A fresh machine: --check changes nothing.
m=$tmp/fresh
fresh "$m"
if run "$m" --check; then bad "--check on a fresh machine exited 0"; else ok "--check on a fresh machine exits 1"; fi
grep -q "linux-libc-dev" "$m/out" && grep -q "arm64" "$m/out" \
    && ok "--check names what is missing" || { bad "--check output: $(cat "$m/out")"; }
if grep -q -e '--add-architecture' -e 'install' -e 'update' "$m/state/calls" ||
    [ -e "$m/etc/sources.list.d/bookworm-backports.sources" ]; then
    bad "--check changed the machine: $(calls "$m")"
else
    ok "--check changes nothing"
fi

# 2. One run installs everything.
if run "$m"; then ok "a fresh machine's first run succeeds"; else
    bad "a fresh machine's first run failed: $(tail -3 "$m/out")"; fi
[ -e "$m/etc/sources.list.d/bookworm-backports.sources" ] && ok "backports enabled" || bad "backports not enabled"
# Order: every source change before the one update, then one install of
# everything (two transactions break a machine with nothing on it).
n_update=$(grep -n 'apt-get .*update' "$m/state/calls" | head -1 | cut -d: -f1)
n_arch=$(grep -n -e '--add-architecture' "$m/state/calls" | head -1 | cut -d: -f1)
n_install=$(grep -n 'apt-get .*install' "$m/state/calls" | head -1 | cut -d: -f1)
if [ -n "$n_update" ] && [ -n "$n_arch" ] && [ -n "$n_install" ] &&
    [ "$n_arch" -lt "$n_update" ] && [ "$n_update" -lt "$n_install" ]; then
    ok "architecture, then the update, then the install"
else
    bad "call order: $(calls "$m")"
fi
[ "$(grep -c 'apt-get .*install' "$m/state/calls")" = 1 ] &&
    grep 'apt-get .*install' "$m/state/calls" | grep -q 'check:arm64' &&
    grep 'apt-get .*install' "$m/state/calls" | grep -q 'linux-libc-dev/bookworm-backports' &&
    ok "one install transaction, backports packages named by suite" \
    || bad "installs: $(grep 'install' "$m/state/calls")"
grep -q "broken" <(ls "$m/state") && bad "the install left unmet dependencies" || ok "no unmet dependencies"
[ "$(grep -c 'apt-get .*update' "$m/state/calls")" = 1 ] && ok "one index update" \
    || bad "index updates: $(grep -c 'apt-get .*update' "$m/state/calls")"
grep -q "from bookworm-backports: linux-libc-dev 6.12" "$m/out" && ok "the backports report names 6.12" \
    || bad "report: $(tail -2 "$m/out")"

# 3. --check agrees with what was installed; a second run changes nothing
# and needs no root.
if run "$m" --check; then ok "--check after the run exits 0"; else bad "--check after the run: $(cat "$m/out")"; fi
: > "$m/state/calls"
if STUB_UID=1000 run "$m"; then ok "a second run as a user succeeds"; else bad "second run: $(cat "$m/out")"; fi
grep -q -e install -e update -e add-arch "$m/state/calls" && bad "second run called: $(calls "$m")" \
    || ok "a second run installs nothing"

# 4. A machine with backports enabled by hand (in sources.list) but never
# updated, and everything else present: the update still comes first.
m=$tmp/handmade
fresh "$m"
echo "deb http://archive.example/debian bookworm-backports main" > "$m/etc/sources.list"
echo arm64 > "$m/state/arches"
run "$m" && ok "backports in sources.list without an index: installs" \
    || bad "backports in sources.list without an index: $(tail -3 "$m/out")"
[ ! -e "$m/etc/sources.list.d/bookworm-backports.sources" ] && ok "no second backports source" \
    || bad "a second backports source was written"

# 5. Unmet dependencies (a package removed under another) are missing for
# --check, and a run repairs them.
m=$tmp/broken
fresh "$m"
run "$m" >/dev/null || true
touch "$m/state/broken"
if run "$m" --check; then bad "--check with unmet dependencies exited 0"; else
    grep -q "unmet dependencies" "$m/out" && ok "--check reports unmet dependencies" \
        || bad "--check output: $(cat "$m/out")"; fi
run "$m" && [ ! -e "$m/state/broken" ] && grep -q 'install .*-f' "$m/state/calls" && ok "a run repairs unmet dependencies" \
    || bad "repair: $(cat "$m/out")"

# 5b. A backports package that needs one more of its own dependencies than the
# script names, and a bookworm package that cannot take a backports library:
# apt's complaints name them, and the retries take them from backports.
m=$tmp/more
fresh "$m"
if STUB_BPO_NEEDS=ipxe-qemu STUB_BPO_DEPENDER=libbpf-dev run "$m" &&
    grep 'install' "$m/state/calls" | tail -1 | grep -q 'ipxe-qemu/bookworm-backports' &&
    grep 'install' "$m/state/calls" | tail -1 | grep -q 'libbpf-dev/bookworm-backports'; then
    ok "what apt asks for (a dependency, a package that depends on one) is taken from backports"
else
    bad "extra backports dependency: $(tail -3 "$m/out")"
fi

# 6. Nothing installed and not root: refused with the list, nothing changed.
m=$tmp/user
fresh "$m"
if STUB_UID=1000 run "$m"; then bad "a user's run on a fresh machine exited 0"; else
    grep -q "must run as root" "$m/out" && ok "a user is told to run as root" || bad "user: $(cat "$m/out")"; fi
grep -q -e install -e add-arch "$m/state/calls" && bad "a user's run changed things" || ok "a user's run changes nothing"
exit "$fail"
