#!/usr/bin/env bash
# Formats the code: clang-format for C++ (.clang-format), prettier for TypeScript and JavaScript
# (web/), Ruff for Python (pyproject.toml, scripts/ruff.mjs). With --check it changes nothing and
# fails if a file is not in its format or the linters (eslint, Ruff) find a problem (CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
case "${1:-}" in
  -h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --check) check=1 ;;
  "") ;;
  *) echo "$0: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
command -v clang-format >/dev/null || { echo "format: clang-format is missing (scripts/setup.sh installs it)" >&2; exit 1; }

status=0
mapfile -t cpp < <(git ls-files '*.cpp' '*.h')
if ((check)); then
  bad=$(clang-format --dry-run --Werror "${cpp[@]}" 2>&1 | sed -n 's/^\([^ :]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u || true)
  if [[ -n "$bad" ]]; then
    sed 's/$/: not in clang-format'"'"'s format (scripts\/format.sh formats it)/' <<<"$bad"
    status=1
  fi
  npm --prefix web run --silent format:check || status=1
  npm --prefix web run --silent lint || status=1
  node scripts/ruff.mjs || status=1
else
  clang-format -i "${cpp[@]}"
  npm --prefix web run --silent format
  node scripts/ruff.mjs --fix || status=1
fi
exit $status
