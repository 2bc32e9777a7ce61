#!/usr/bin/env bash
# Builds what the browser tests need and runs them in headless Chromium (node --test).
#
#   tests/browser/run.sh            # the engine in Chromium: isolated (simd-threads) and not (simd)
#   tests/browser/run.sh --slow     # also Memory64 past 4 GiB (minutes; about 11 GiB of memory)
#   tests/browser/run.sh FILE...    # only these test files (e.g. tests/browser/engine.test.mjs)
#
# Builds (incrementally) native ptl into $PTL_WASM_BUILD_DIR/native (unless PTL_NATIVE_BIN is
# given), the wasm builds the tests use (simd-threads, simd; memory64 with --slow), the engine's
# TypeScript API (web/engine/dist) and the classic worker bundle (build-browser/engine-worker.js).
# PTL_BROWSER_SKIP_BUILD=1 uses the builds as they are (it still fails if one is missing).
# Installs nothing: it fails with a message when Chromium, Emscripten, or the npm packages
# (npm --prefix web ci: web/ holds the one lock file of the project's npm packages) are missing.
# Environment: PTL_WASM_BUILD_DIR (default build-wasm), PTL_BROWSER_OUT (default build-browser),
# PTL_NATIVE_BIN, PTL_DATA_DIR, PTL_CHROMIUM (default /usr/bin/chromium).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/browser"
BUILD="${PTL_WASM_BUILD_DIR:-$ROOT/build-wasm}"
OUT="${PTL_BROWSER_OUT:-$ROOT/build-browser}"
export PTL_WASM_BUILD_DIR="$BUILD" PTL_BROWSER_OUT="$OUT"

slow=0
files=()
for a in "$@"; do
  case "$a" in
    --slow) slow=1 ;;
    -h|--help) sed -n 2,15p "${BASH_SOURCE[0]}"; exit 0 ;;
    *) files+=("$a") ;;
  esac
done

die() { echo "tests/browser/run.sh: $*" >&2; exit 1; }
command -v node >/dev/null 2>&1 || die "node not found (Node.js 20; Debian's emscripten package brings it)"
CHROMIUM="${PTL_CHROMIUM:-/usr/bin/chromium}"
[[ -x "$CHROMIUM" ]] || die "Chromium not found at $CHROMIUM: apt-get install -y chromium (or set PTL_CHROMIUM)"
NM="$ROOT/web/node_modules"
[[ -d "$NM/playwright-core" && -x "$NM/.bin/esbuild" && -x "$NM/.bin/tsc" ]] || die "npm packages missing: run 'npm --prefix web ci' first"

variants=(simd-threads simd)
((slow)) && variants+=(memory64)

if [[ "${PTL_BROWSER_SKIP_BUILD:-0}" != 1 ]]; then
  if [[ -z "${PTL_NATIVE_BIN:-}" ]]; then
    GEN=(); command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
    cmake -S "$ROOT" -B "$BUILD/native" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DPTL_BUILD_TESTS=OFF >/dev/null
    cmake --build "$BUILD/native" --target ptl
  fi
  command -v emcc >/dev/null 2>&1 || die "emcc not found: install Emscripten (Debian: apt-get install -y emscripten)"
  for v in "${variants[@]}"; do PTL_WASM_OUT="$BUILD" "$ROOT/wasm/build.sh" "$v"; done
  "$NM/.bin/tsc" -p "$ROOT/web/engine/tsconfig.json"
  mkdir -p "$OUT"
  # The engine worker: a classic script (loadModule loads the glue with importScripts).
  "$NM/.bin/esbuild" "$ROOT/web/engine/dist/browser-worker.js" --bundle --format=iife \
    --platform=browser '--external:node:*' --log-level=warning --outfile="$OUT/engine-worker.js"
fi
export PTL_NATIVE_BIN="${PTL_NATIVE_BIN:-$BUILD/native/ptl}"
[[ -x "$PTL_NATIVE_BIN" ]] || die "native ptl missing at $PTL_NATIVE_BIN"
for v in "${variants[@]}"; do
  [[ -f "$BUILD/$v/ptl_engine.wasm" ]] || die "$BUILD/$v/ptl_engine.wasm missing (wasm/build.sh $v)"
done
[[ -f "$OUT/engine-worker.js" && -f "$ROOT/web/engine/dist/index.js" ]] || die "web/engine/dist or $OUT/engine-worker.js missing (run without PTL_BROWSER_SKIP_BUILD)"

# Native reference runs, made fresh each time (they depend on the native build).
export PTL_WASM_FIXTURES="$OUT/fixtures"
rm -rf "$PTL_WASM_FIXTURES"
cd "$ROOT"
if ((${#files[@]} == 0)); then
  files=(tests/browser/*.test.mjs)
  ((slow)) && files+=(tests/browser/memory64.slow.mjs)
fi
exec node --test --test-concurrency=1 "${files[@]}"
