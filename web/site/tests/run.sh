#!/usr/bin/env bash
# Builds the site (with a small pretrained model built in) and runs its browser tests in
# headless Chromium. Screenshots and downloads land in build-site-test/ (PTL_SITE_TEST_OUT).
#
#   web/site/tests/run.sh [test files...]
#
# Needs: the native ptl (build/ or PTL_NATIVE_BIN), the WebAssembly builds simd-threads and simd
# (wasm/build.sh), the npm packages of web/ (npm --prefix web ci), Debian's chromium. Installs nothing.
set -euo pipefail
SITE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="$(cd "$SITE/../.." && pwd)"
OUT="${PTL_SITE_TEST_OUT:-$ROOT/build-site-test}"
PTL="${PTL_NATIVE_BIN:-$ROOT/build/ptl}"
die() { echo "web/site/tests/run.sh: $*" >&2; exit 1; }
[[ -x "$PTL" ]] || die "native ptl not found at $PTL (build it first, or set PTL_NATIVE_BIN)"
[[ -d "$ROOT/web/node_modules/astro" && -d "$ROOT/web/node_modules/playwright-core" ]] || die "run 'npm --prefix web ci' first"
export PTL_NATIVE_BIN="$PTL"

# The "pretrained" model of this test: Tiny, 60 steps (the published model is a later issue).
mkdir -p "$OUT"
rm -rf "$OUT/pretrained"
data="${PTL_DATA_DIR:-$ROOT/../shared/data}/tinyshakespeare.txt"
"$PTL" train --preset tiny --steps 60 --data "$data" --out "$OUT/pretrained" --eval-every 1000 --sample-every 0 >/dev/null
export PTL_PRETRAINED_MODEL="$OUT/pretrained/model.tinygpt"
(cd "$SITE" && npm run --silent build >"$OUT/site-build.log" 2>&1) || { tail -40 "$OUT/site-build.log"; die "the site did not build (log: $OUT/site-build.log)"; }

files=("$@")
((${#files[@]})) || files=("$SITE"/tests/*.test.mjs)
node --test --test-concurrency=1 "${files[@]}"
