#!/usr/bin/env bash
# Builds the WebAssembly variants, native ptl and native128 (ptl with 128-bit vectors only), then
# runs bench/wasm.mjs into bench/results/wasm.jsonl (bench/header.py's line, then one JSON line per
# preset, build and environment; progress on stderr). PTL_WASM_RESULTS=FILE writes elsewhere
# (a trial that is not to replace the results of record), PTL_WASM_RESULTS=- to stdout.
#
#   bench/wasm.sh [bench/wasm.mjs options]
#   e.g. bench/wasm.sh --presets tiny,small --builds scalar,simd,simd-threads --env node,chromium
#
# Then: /usr/bin/python3 bench/wasm_table.py [--svg docs/img/wasm_speed.svg]
# Native is built into $PTL_WASM_BUILD_DIR/native (or PTL_NATIVE_BIN), native128 into
# build-native128/ (-DPTL_SIMD128=ON; or PTL_NATIVE128_BIN). --env chromium needs
# `npm --prefix web ci` and Debian's chromium.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PTL_WASM_BUILD_DIR:-$ROOT/build-wasm}"
OUT="${PTL_BROWSER_OUT:-$ROOT/build-browser}"
export PTL_WASM_BUILD_DIR="$BUILD" PTL_BROWSER_OUT="$OUT"
# --help, and options wasm.mjs refuses, before the builds (minutes) rather than after.
for a in "$@"; do [[ "$a" == --help || "$a" == -h ]] && exec node "$ROOT/bench/wasm.mjs" --help; done
node "$ROOT/bench/wasm.mjs" "$@" --check || exit 2
builds="scalar,simd,simd-threads"
envs="node"
prev=""
for a in "$@"; do
  [[ "$prev" == --builds ]] && builds="$a"
  [[ "$prev" == --env ]] && envs="$a"
  prev="$a"
done
GEN=(); command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
if [[ -z "${PTL_NATIVE_BIN:-}" ]]; then
  cmake -S "$ROOT" -B "$BUILD/native" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DPTL_BUILD_TESTS=OFF >/dev/null
  cmake --build "$BUILD/native" --target ptl >&2
  export PTL_NATIVE_BIN="$BUILD/native/ptl"
fi
if [[ -z "${PTL_NATIVE128_BIN:-}" ]]; then
  cmake -S "$ROOT" -B "$ROOT/build-native128" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DPTL_BUILD_TESTS=OFF -DPTL_SIMD128=ON >/dev/null
  cmake --build "$ROOT/build-native128" --target ptl >&2
  export PTL_NATIVE128_BIN="$ROOT/build-native128/ptl"
fi
IFS=, read -ra list <<< "$builds"
if [[ "${PTL_BENCH_SKIP_BUILD:-0}" != 1 ]]; then
  for b in "${list[@]}"; do PTL_WASM_OUT="$BUILD" "$ROOT/wasm/build.sh" "$b" >&2; done
  [[ -x "$ROOT/web/node_modules/.bin/tsc" ]] || { echo "bench/wasm.sh: run 'npm --prefix web ci' first" >&2; exit 1; }
  "$ROOT/web/node_modules/.bin/tsc" -p "$ROOT/web/engine/tsconfig.json"
  if [[ ",$envs," == *",chromium,"* ]]; then
    mkdir -p "$OUT"
    "$ROOT/web/node_modules/.bin/esbuild" "$ROOT/web/engine/dist/browser-worker.js" --bundle --format=iife \
      --platform=browser '--external:node:*' --log-level=warning --outfile="$OUT/engine-worker.js"
  fi
fi
NODE_FLAGS=()
[[ ",$builds," == *",memory64,"* ]] && NODE_FLAGS=(--experimental-wasm-memory64)
RESULTS="${PTL_WASM_RESULTS:-$ROOT/bench/results/wasm.jsonl}"
# The header names the benchmark by its file (wasm_gpt2.jsonl: wasm_gpt2).
NAME=wasm
[[ "$RESULTS" != - ]] && NAME="$(basename "$RESULTS" .jsonl)"
run() {
  python3 "$ROOT/bench/header.py" "$NAME" --ptl "$PTL_NATIVE_BIN" --command "$(printf '%q ' bench/wasm.sh "$@")" \
    --peer "native ptl ($PTL_NATIVE_BIN) and native128 ($PTL_NATIVE128_BIN)"
  node "${NODE_FLAGS[@]}" "$ROOT/bench/wasm.mjs" "$@"
}
if [[ "$RESULTS" == - ]]; then run "$@"; exit; fi
# Into a scratch file first: a run that fails leaves the results of record as they were.
tmp="$(mktemp)"; trap 'rm -f "$tmp"' EXIT
run "$@" > "$tmp"
mkdir -p "$(dirname "$RESULTS")" && mv "$tmp" "$RESULTS"
echo "bench/wasm.sh: wrote $RESULTS" >&2
