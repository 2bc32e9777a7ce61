#!/usr/bin/env bash
# Builds the WebAssembly variants and native ptl, then runs bench/wasm.mjs (JSON lines on stdout).
#   bench/wasm.sh [bench/wasm.mjs options]   e.g. --presets tiny,small --builds simd,simd-threads
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PTL_WASM_BUILD_DIR:-$ROOT/build-wasm}"
builds="scalar,simd,simd-threads"
prev=""
for a in "$@"; do [[ "$prev" == --builds ]] && builds="$a"; prev="$a"; done
if [[ -z "${PTL_NATIVE_BIN:-}" ]]; then
  GEN=(); command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD/native" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DPTL_BUILD_TESTS=OFF >/dev/null
  cmake --build "$BUILD/native" --target ptl >&2
  export PTL_NATIVE_BIN="$BUILD/native/ptl"
fi
IFS=, read -ra list <<< "$builds"
for b in "${list[@]}"; do PTL_WASM_OUT="$BUILD" "$ROOT/wasm/build.sh" "$b" >&2; done
[[ -x "$ROOT/web/node_modules/.bin/tsc" ]] || { echo "bench/wasm.sh: run 'npm --prefix web ci' first" >&2; exit 1; }
"$ROOT/web/node_modules/.bin/tsc" -p "$ROOT/web/tsconfig.json"
NODE_FLAGS=()
[[ ",$builds," == *",memory64,"* ]] && NODE_FLAGS=(--experimental-wasm-memory64)
exec node "${NODE_FLAGS[@]}" "$ROOT/bench/wasm.mjs" "$@"
