#!/usr/bin/env bash
# The docs a newcomer reads agree with each other and resolve in a clone:
#   - every command synopsis of npuvfio(1) (docs/man/npuvfio.1.scd, the
#     COMMANDS section, markup stripped) is a line of the README's `npuvfio`
#     tool block, and that block has no command the man page lacks;
#   - no file of the tree (source, header, script, CMake file, doc, man
#     page: what git tracks or would track, binary files and this script
#     left out) points outside the repository: no `../shared/...`, no
#     absolute `/work/...` path, no
#     private research note (`shared/hw/`, `aicore.md`, `rknpu.md`,
#     `edgetpu.md`, ...). Such a path does not exist in a clone, so a comment
#     citing one names no source a reader can open: it names the public one
#     (docs/hardware-sources.md lists them).
#   docs_agree.sh SOURCE_DIR
set -euo pipefail
src=$1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# Synopses of the man page: lines from "# COMMANDS" to the next "# " heading
# that start with a bold command name; scdoc's *bold* and _underline_ dropped.
man_syn=$(awk '/^# COMMANDS/ { on = 1; next } /^# / { on = 0 } on && /^\*[a-z]+\*/' \
    "$src/docs/man/npuvfio.1.scd" | sed -e 's/\*//g' -e 's/\b_\([^_]*\)_/\1/g' -e 's/\\//g')
# The README's block: the fenced block after "## The `npuvfio` tool", its
# lines indented by two spaces and starting with a lowercase command.
readme_syn=$(awk '/^## The `npuvfio` tool/ { sec = 1; next } /^## / { sec = 0 }
    sec && /^```/ { if (blk) exit; blk = 1; next } sec && blk' "$src/README.md" |
    grep -E '^  [a-z]' | sed -e 's/^  //' -e 's/  \{2,\}.*$//')

[ -n "$man_syn" ] || bad "no synopses found in npuvfio.1.scd"
[ -n "$readme_syn" ] || bad "no synopses found in README.md"
while IFS= read -r line; do
    grep -qxF -- "$line" <<<"$readme_syn" || bad "README lacks the man page's synopsis: $line"
done <<<"$man_syn"
while IFS= read -r line; do
    grep -qxF -- "$line" <<<"$man_syn" || bad "README's synopsis is not the man page's: $line"
done <<<"$readme_syn"

# The files to look at: what git tracks or would track (not ignored), or, in
# a tree without git (a source tarball), every file outside build
# directories. Binary files (test models, fuzz corpora) are skipped by
# grep -I; a tracked file deleted in the work tree is skipped too.
self=tests/packaging/docs_agree.sh
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
    [ "$(cd "$src" && pwd -P)" = "$(cd "$(git -C "$src" rev-parse --show-toplevel)" && pwd -P)" ]; then
    files=$(git -C "$src" ls-files --cached --others --exclude-standard)
else
    files=$(cd "$src" && find . \( -path './build*' -o -path ./.git \) -prune -o -type f -print |
        sed 's|^\./||')
fi
files=$(grep -vxF "$self" <<<"$files")
[ -n "$files" ] || bad "no files found under $src"
# ../shared/...; an absolute /work/... (a /work/ that ends a longer path, as
# ${CMAKE_CURRENT_BINARY_DIR}/work/, is the build tree's and allowed); the
# notes by their own names.
outside='\.\./shared/|(^|[^[:alnum:]_.}/-])/work/|\bshared/(hw|reference|testdata|hooks)/|\bshared/(DESIGN|STYLE)\.md'
notes='\b(aicore|rknpu|edgetpu|vfio-landscape|kernel-vfio-in-a-vm|this-machine)\.md\b'
# Judged by what grep prints, not by its status: xargs may run grep more than
# once, and one run without a match must not hide another's.
out=$(cd "$src" && tr '\n' '\0' <<<"$files" | xargs -0 grep -sInE "$outside|$notes" -- || true)
if [ -n "$out" ]; then
    bad "paths outside the repository (name the public source instead, docs/hardware-sources.md):"
    echo "$out"
fi

[ "$fail" = 0 ] && echo "ok: $(wc -l <<<"$man_syn") synopses agree; no path leaves the repository ($(wc -l <<<"$files") files)"
exit "$fail"
