#!/usr/bin/env bash
# The docs a newcomer reads agree with each other and resolve in a clone:
#   - every command synopsis of npuvfio(1) (docs/man/npuvfio.1.scd, the
#     COMMANDS section, markup stripped) is a line of the README's `npuvfio`
#     tool block, and that block has no command the man page lacks;
#   - nothing in docs/ or the README points outside the repository
#     (`../shared/`, `/work/`): such a path does not exist in a clone.
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

if out=$(grep -rnE '\.\./shared/|/work/' "$src/docs" "$src/README.md"); then
    bad "paths outside the repository:"
    echo "$out"
fi

[ "$fail" = 0 ] && echo "ok: $(wc -l <<<"$man_syn") synopses agree; no path leaves the repository"
exit "$fail"
