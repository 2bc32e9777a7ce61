#!/usr/bin/env bash
# Builds the site (with a small stand-in for the pretrained model built in) and runs its browser tests in
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

# The pretrained model built in: a stand-in for the shipped one (models/shakespeare.tinygpt, which
# a default build serves), so that the tests that fine-tune and inspect it stay fast: Tiny, 60
# steps, exported in F16 as the shipped model is. PTL_SITE_TEST_PRETRAINED=FILE builds FILE in
# instead (e.g. models/shakespeare.tinygpt).
mkdir -p "$OUT"
if [[ -n "${PTL_SITE_TEST_PRETRAINED:-}" ]]; then
  [[ -f "$PTL_SITE_TEST_PRETRAINED" ]] || die "PTL_SITE_TEST_PRETRAINED=$PTL_SITE_TEST_PRETRAINED is not a file"
  export PTL_PRETRAINED_MODEL="$(cd "$(dirname "$PTL_SITE_TEST_PRETRAINED")" && pwd)/$(basename "$PTL_SITE_TEST_PRETRAINED")"
else
  rm -rf "$OUT/pretrained"
  data="${PTL_DATA_DIR:-$ROOT/../shared/data}/tinyshakespeare.txt"
  "$PTL" train --preset tiny --steps 60 --data "$data" --out "$OUT/pretrained" --eval-every 30 --sample-every 0 >/dev/null
  "$PTL" export "$OUT/pretrained/model.tinygpt" --out "$OUT/pretrained/model-f16.tinygpt" --dtype f16 >/dev/null
  export PTL_PRETRAINED_MODEL="$OUT/pretrained/model-f16.tinygpt"
fi
(cd "$SITE" && npm run --silent build >"$OUT/site-build.log" 2>&1) || { tail -40 "$OUT/site-build.log"; die "the site did not build (log: $OUT/site-build.log)"; }

files=("$@")
((${#files[@]})) || files=("$SITE"/tests/*.test.mjs)
node --test --test-concurrency=1 "${files[@]}" || exit

# Then the default build as a user gets it, with the shipped model (docs/models.md) built in: the
# banner and the sampling panel talk to it. Only on a full run with the stand-in above.
shipped="$ROOT/models/shakespeare.tinygpt"
if (($# == 0)) && [[ -z "${PTL_SITE_TEST_PRETRAINED:-}" && -f $shipped ]]; then
  export PTL_PRETRAINED_MODEL="$shipped"
  # Only the model changed since the build above: its assets (the model and its description) and
  # astro build again, without the packages' TypeScript build and astro check, which just passed.
  (cd "$SITE" && npm run --silent assets >"$OUT/site-build.log" 2>&1 && npx --no-install astro build >>"$OUT/site-build.log" 2>&1) ||
    { tail -40 "$OUT/site-build.log"; die "the site did not build with $shipped (log: $OUT/site-build.log)"; }
  node --test --test-concurrency=1 --test-name-pattern='pretrained model out of the box' "$SITE/tests/playground.test.mjs"
fi
