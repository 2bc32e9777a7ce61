#!/usr/bin/env bash
# Builds what the WebAssembly tests need and runs them with Node's test runner.
#
#   tests/wasm/run.sh [variant]     (default simd-threads; or $PTL_WASM_VARIANT)
#
# Needs (installs nothing): Emscripten (Debian: apt-get install -y emscripten), cmake, ninja or
# make, a C++20 compiler for the native `ptl`, and the npm packages of web/ (npm --prefix web ci).
# Environment: PTL_NATIVE_BIN (an existing native ptl), PTL_DATA_DIR (folder with
# tinyshakespeare.txt), PTL_WASM_BUILD_DIR (default build-wasm).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VARIANT="${1:-${PTL_WASM_VARIANT:-simd-threads}}"
BUILD="${PTL_WASM_BUILD_DIR:-$ROOT/build-wasm}"
export PTL_WASM_VARIANT="$VARIANT" PTL_WASM_BUILD_DIR="$BUILD"

die() { echo "tests/wasm/run.sh: $*" >&2; exit 1; }
command -v emcc >/dev/null 2>&1 || die "emcc not found: install Emscripten (Debian: apt-get install -y emscripten)"
command -v node >/dev/null 2>&1 || die "node not found (Debian's emscripten package brings it)"
[[ -x "$ROOT/web/node_modules/.bin/tsc" ]] || die "TypeScript not installed: run 'npm --prefix web ci' first"

# The native ptl the tests compare against.
if [[ -z "${PTL_NATIVE_BIN:-}" ]]; then
  GEN=(); command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD/native" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DPTL_BUILD_TESTS=OFF >/dev/null
  cmake --build "$BUILD/native" --target ptl -j "$(nproc 2>/dev/null || echo 2)"
  export PTL_NATIVE_BIN="$BUILD/native/ptl"
fi

PTL_WASM_OUT="$BUILD" "$ROOT/wasm/build.sh" "$VARIANT"
"$ROOT/web/node_modules/.bin/tsc" -p "$ROOT/web/engine/tsconfig.json"

# Fixtures (native runs) are made fresh each time: they depend on the native build.
rm -rf "$BUILD/test-fixtures"
cd "$ROOT"
# Memory64 needs the flag in Node 20 (main thread and workers inherit it).
NODE_FLAGS=()
[[ "$VARIANT" == memory64 ]] && NODE_FLAGS=(--experimental-wasm-memory64)
exec node "${NODE_FLAGS[@]}" --test --test-concurrency=1 tests/wasm/
