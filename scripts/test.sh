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

# How busy a stage keeps the machine's cores, from /proc/stat (every process counts, Chromium's and
# the GPU driver's included): busy jiffies over all jiffies, times the core count.
cpu_jiffies() {  # sets busy_now and total_now
  local _cpu user nice system idle iowait irq softirq steal _guest
  read -r _cpu user nice system idle iowait irq softirq steal _guest </proc/stat
  busy_now=$((user + nice + system + irq + softirq + steal))  # guest time is inside user's
  total_now=$((busy_now + idle + iowait))
}
times=()
stage() {  # stage "name" command...: runs the command, prints and records its wall time and busy cores
  local name="$1" t0=$SECONDS b0 s0
  cpu_jiffies
  b0=$busy_now s0=$total_now
  shift
  echo "== $name"
  "$@"
  cpu_jiffies
  local wall=$((SECONDS - t0)) cores
  # Busy cores over the stage (of nproc, 2 on CI): what overlapping stages could gain.
  cores=$(awk -v b=$((busy_now - b0)) -v t=$((total_now - s0)) -v n="$(nproc)" \
    'BEGIN { printf "%.1f", (t > 0 ? b / t * n : 0) }')
  times+=("$(printf '%5d s  (%s of %d cores busy)  %s' $wall "$cores" "$(nproc)" "$name")")
  echo "-- $name: $wall s ($cores of $(nproc) cores busy)"
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
# libFuzzer's coverage, linked by the GoogleTest suite and by the fuzz targets.
stage "Sanitizers: the C++ suite under ASan + UBSan (all but the shipped model's); the fuzz targets built" \
  bash -c 'scripts/test-asan.sh --ci && cmake --build --preset asan --target fuzz_all'
# The fuzz targets run for 60 s each, 2 at a time, at the lowest priority, beside the site's tests: those
# leave part of a core idle (their stage's line says how busy the machine was), which the fuzzers take.
# They still slow the site's tests (by about 130 s in a measured run, docs/reliability.md), less than the
# 300 s they took on their own; their wall time is fixed, only their executions are fewer.
# Their own session (setsid) so that one kill ends them all; with the kernel's autogroups on, a session is
# a scheduling group of its own, which nice alone does not lower: the new session nices its autogroup too.
fuzz_log=$(mktemp)
setsid bash -c '{ echo 19 >/proc/self/autogroup; } 2>/dev/null
  exec nice -n 19 env PTL_FUZZ_BUILD=build-asan PTL_FUZZ_PARALLEL=2 scripts/fuzz.sh 60' >"$fuzz_log" 2>&1 &
fuzz_pid=$!
# (Under set -e a failing command in the trap would become the script's exit status: the kill fails
# whenever the fuzzers have ended.)
trap 'kill -- -"$fuzz_pid" 2>/dev/null || true; rm -f "$fuzz_log"' EXIT
fuzz_wait() {  # the fuzz targets' result: their JSON lines, and the exit status of scripts/fuzz.sh
  local rc=0
  wait "$fuzz_pid" || rc=$?
  cat "$fuzz_log"
  return $rc
}
stage "The playground site in headless Chromium (WebAssembly and WebGPU on SwiftShader)" \
  env PTL_NATIVE_BIN="$PWD/build/ptl" web/site/tests/run.sh
stage "Each libFuzzer target for 60 s under ASan + UBSan (ran beside the site's tests)" fuzz_wait
stage "WebGPU backend against the CPU engine, in Node on SwiftShader" \
  env PTL_BUILD_DIR="$PWD/build" npm --prefix web/webgpu test

echo "== Stage times"
printf '%s\n' "${times[@]}"
