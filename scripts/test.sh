#!/usr/bin/env bash
# Every test: the format and lint check, the C++ suite (GoogleTest through CTest), the PyTorch parity suite,
# the tokenizers against their npm references in Node, the WebAssembly build in Node and in headless
# Chromium, the C++ suite under ASan + UBSan and the fuzz targets, the playground site in headless Chromium,
# and the WebGPU backend in Node on SwiftShader. The fast stages run first; each prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  ?*) echo "$0: takes no arguments (see --help)" >&2; exit 2 ;;
esac

# CPU seconds (user + system) of the finished child processes so far, from bash's `times` (run in
# this shell, not in a pipe's subshell, whose children are not the stages).
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
cpu_seconds() {  # sets cpu_now
  times >"$times_file"
  cpu_now=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$times_file")
}
times=()
stage() {  # stage "name" command...: runs the command, prints and records its wall and CPU time
  local name="$1" t0=$SECONDS c0
  cpu_seconds
  c0=$cpu_now
  shift
  echo "== $name"
  "$@"
  cpu_seconds
  local wall=$((SECONDS - t0)) cpu=$((cpu_now - c0))
  # CPU over wall: how busy the stage keeps the cores (2 on CI) - what overlapping stages could gain.
  times+=("$(printf '%5d s  (CPU %5d s)  %s' $wall $cpu "$name")")
  echo "-- $name: $wall s (CPU $cpu s)"
}

stage "Set-up and build (scripts/setup.sh)" scripts/setup.sh
stage "Format and lint check (clang-format, prettier, eslint, Ruff)" scripts/format.sh --check
stage "C++ tests (ctest)" ctest --test-dir build --output-on-failure -j "$(nproc)"
# Debian's torch lives in /usr/bin/python3, not in whatever python3 comes first on PATH.
stage "Kills and faults: SIGKILL and resume, disk full, read-only, a replaced checkpoint (tests/reliability)" \
  bash -c 'tests/reliability/kill_resume.sh --kills 30 --steps 2000 && tests/reliability/faults.sh'
stage "PyTorch reference and parity tests (pytest)" /usr/bin/python3 -m pytest tests/python -q
stage "Tokenizers against gpt-3-encoder, @huggingface/tokenizers and Rust tokenizers, in Node" \
  env PTL_NATIVE_BIN="$PWD/build/ptl" node --test tests/tokenizer/
stage "WebAssembly engine (SIMD + threads) against native, in Node" \
  env PTL_NATIVE_BIN="$PWD/build/ptl" tests/wasm/run.sh simd-threads
stage "WebAssembly engine in headless Chromium (Web Worker; isolated and not)" \
  env PTL_NATIVE_BIN="$PWD/build/ptl" tests/browser/run.sh
# One clang build (build-asan/, the asan preset) serves both: the engine compiled once with ASan, UBSan and
# libFuzzer's coverage, linked by the GoogleTest suite and by the fuzz targets, which run 2 at a time.
stage "Sanitizers: the C++ suite's quick subset under ASan + UBSan, then each libFuzzer target for 60 s" \
  bash -c 'scripts/test-asan.sh --quick && PTL_FUZZ_BUILD=build-asan PTL_FUZZ_PARALLEL=2 scripts/fuzz.sh 60'
stage "The playground site in headless Chromium (WebAssembly and WebGPU on SwiftShader)" \
  env PTL_NATIVE_BIN="$PWD/build/ptl" web/site/tests/run.sh
stage "WebGPU backend against the CPU engine, in Node on SwiftShader" \
  env PTL_BUILD_DIR="$PWD/build" npm --prefix web/webgpu test

echo "== Stage times"
printf '%s\n' "${times[@]}"
