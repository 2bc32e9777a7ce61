#!/usr/bin/env bash
# Every test: the C++ suite (GoogleTest through CTest), the PyTorch parity suite, the
# WebAssembly build in Node and in headless Chromium, the playground site in headless Chromium,
# and the WebGPU backend in Node on SwiftShader.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  ?*) echo "$0: takes no arguments (see --help)" >&2; exit 2 ;;
esac
scripts/setup.sh
echo "== C++ tests (ctest)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "== PyTorch reference and parity tests (pytest)"
# Debian's torch lives in /usr/bin/python3, not in whatever python3 comes first on PATH.
/usr/bin/python3 -m pytest tests/python -q
echo "== WebAssembly engine (SIMD + threads) against native, in Node"
PTL_NATIVE_BIN="$PWD/build/ptl" tests/wasm/run.sh simd-threads
echo "== WebAssembly engine in headless Chromium (Web Worker; isolated and not)"
PTL_NATIVE_BIN="$PWD/build/ptl" tests/browser/run.sh
echo "== The playground site in headless Chromium (WebAssembly and WebGPU on SwiftShader)"
PTL_NATIVE_BIN="$PWD/build/ptl" web/site/tests/run.sh
echo "== WebGPU backend against the CPU engine, in Node on SwiftShader"
PTL_BUILD_DIR="$PWD/build" npm --prefix web/webgpu test
