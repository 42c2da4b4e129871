#!/usr/bin/env bash
# Fails when clang-format (with the repo's .clang-format) would change a C file.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h')
bad=()
for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
    echo "check-format: clang-format would change: ${bad[*]}" >&2
    echo "check-format: run clang-format -i on them" >&2
    exit 1
fi
echo "check-format: ${#files[@]} files formatted"
