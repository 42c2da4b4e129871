#!/usr/bin/env bash
# install-deps.sh takes bookworm-backports from the bookworm main archive the
# apt sources already name (one-line .list and deb822 .sources), skipping
# comments, other suites, deb-src and disabled stanzas.
#   install_deps_archive.sh SOURCE_DIR
set -euo pipefail
script=$1/scripts/install-deps.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # expect NAME WANT APT_DIR
    local got
    got=$("$script" --print-archive "$3" 2>/dev/null || echo "<none>")
    if [ "$got" = "$2" ]; then echo "ok: $1: $got"; else echo "FAIL: $1: got '$got', want '$2'"; fail=1; fi
}

mkdir -p "$tmp/list/sources.list.d"
cat > "$tmp/list/sources.list" <<'SRC'
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb http://mirror.example/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://mirror.example/debian bookworm contrib main
SRC
expect "one-line sources.list with options" http://mirror.example/debian "$tmp/list"

mkdir -p "$tmp/deb822/sources.list.d"
cat > "$tmp/deb822/sources.list.d/debian.sources" <<'SRC'
Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main

Types: deb-src deb
# a comment inside the stanza
URIs: http://deb822.example/debian
 http://second.example/debian
Suites: bookworm-updates
 bookworm
Components: contrib main
SRC
expect "deb822 with folded fields and a disabled stanza" http://deb822.example/debian "$tmp/deb822"

# Both formats at once: one address, the first in apt's order (sources.list first).
mkdir -p "$tmp/both/sources.list.d"
echo "deb http://first.example/debian bookworm main" > "$tmp/both/sources.list"
cp "$tmp/deb822/sources.list.d/debian.sources" "$tmp/both/sources.list.d/"
echo "deb http://third.example/debian bookworm main" > "$tmp/both/sources.list.d/third.list"
expect "several sources: the first only" http://first.example/debian "$tmp/both"

mkdir -p "$tmp/none/sources.list.d"
echo "deb http://x.example/debian trixie main" > "$tmp/none/sources.list.d/trixie.list"
expect "no bookworm source" "<none>" "$tmp/none"

# This machine's own sources: a bookworm archive is found (whatever its address).
got=$("$script" --print-archive /etc/apt 2>&1) || { echo "FAIL: this machine's sources: $got"; fail=1; }
echo "this machine: $got"
exit "$fail"
