#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [TARGET...]: builds the libFuzzer targets of tests/fuzz (clang,
# ASan + UBSan, build-fuzz/) and runs each on its corpus, tests/fuzz/corpus/<target>/, for
# SECONDS (default 60), one at a time on one core. Prints a JSON line per target: {target,
# seconds, execs, execs_per_s, coverage (edges), features, corpus_size, crashes}. New inputs go
# to build-fuzz/corpus/<target>/ (the committed seeds stay as they are); a crash, leak or
# sanitizer report is written to build-fuzz/crashes/<target>/ and makes the script exit 1.
# TARGET names a target (fuzz_checkpoint) or all of them when none is given. docs/reliability.md.
# Environment: PTL_FUZZ_JOBS (default 2) for the build, PTL_FUZZ_ARGS for extra libFuzzer flags,
# PTL_FUZZ_PARALLEL (default 1) for how many targets run at a time (one core each), PTL_FUZZ_BUILD
# for the build folder: build-asan uses the asan preset's (the engine of the sanitized test suite,
# built once for both; what scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
seconds=60
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then seconds="$1"; shift; fi

build="${PTL_FUZZ_BUILD:-build-fuzz}"
parallel="${PTL_FUZZ_PARALLEL:-1}"
if [[ "$build" == build-asan ]]; then
  cmake --preset asan >/dev/null
elif [[ ! -f "$build/CMakeCache.txt" ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTL_FUZZ=ON \
    -DPTL_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target fuzz_all -j "${PTL_FUZZ_JOBS:-2}" >&2

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi

for t in "${targets[@]}"; do
  [[ -x "$build/tests/fuzz/$t" ]] || { echo "$0: no fuzz target $t (tests/fuzz/$t.cpp)" >&2; exit 2; }
done

# Runs target $1 for $seconds and writes its JSON line to $build/logs/$1.json.
run_target() {
  local t="$1"
  local bin="$build/tests/fuzz/$t" seeds="tests/fuzz/corpus/$t" work="$build/corpus/$t"
  local crashes="$build/crashes/$t" log="$build/logs/$t.log"
  mkdir -p "$seeds" "$work" "$crashes" "$(dirname "$log")"
  # One process on one core (no -jobs: libFuzzer forks nothing). The writable corpus comes first (libFuzzer adds
  # new inputs to it), then the committed seeds (read only).
  local rc=0
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$seconds" -print_final_stats=1 -timeout=25 -rss_limit_mb=2560 -max_len=65536 \
    -artifact_prefix="$crashes/" ${PTL_FUZZ_ARGS:-} "$work" "$seeds" >"$log" 2>&1 || rc=$?
  local crash_count
  crash_count=$(find "$crashes" -type f | wc -l)
  python3 - "$t" "$seconds" "$log" "$crash_count" "$rc" >"$build/logs/$t.json" <<'PY'
import json, re, sys
target, seconds, log, crashes, rc = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
text = open(log, errors="replace").read()
def last(pattern, default=None):
    found = re.findall(pattern, text)
    return int(found[-1]) if found else default
execs = last(r"stat::number_of_executed_units:\s*(\d+)", 0)
rate = last(r"stat::average_exec_per_sec:\s*(\d+)", 0)
# A run that stopped on a crash prints no "Done" line: its time follows from its rate.
spent = last(r"Done \d+ runs in (\d+) second", round(execs / rate) if rate else seconds)
print(json.dumps({
    "target": target,
    "seconds": spent,
    "execs": execs,
    "execs_per_s": rate or round(execs / max(spent, 1)),
    "coverage": last(r"cov: (\d+)"),
    "features": last(r"ft: (\d+)"),
    "corpus_size": last(r"corp: (\d+)/"),
    "crashes": crashes,
    "exit": rc,
}))
PY
}

# PTL_FUZZ_PARALLEL targets at a time; the lines print in the order of the targets once all have run.
running=0
for t in "${targets[@]}"; do
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
  rm -f "$build/logs/$t.json"
  run_target "$t" &
  running=$((running + 1))
done
wait

status=0
for t in "${targets[@]}"; do
  json="$build/logs/$t.json"
  if [[ ! -s "$json" ]]; then
    echo "$0: $t left no result (see $build/logs/$t.log)" >&2
    status=1
    continue
  fi
  cat "$json"
  read -r rc crash_count < <(python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(j["exit"], j["crashes"])' "$json")
  [[ $rc -eq 0 && $crash_count -eq 0 ]] || status=1
  if [[ $rc -ne 0 ]]; then
    echo "$0: $t stopped (exit $rc): see $build/logs/$t.log and $build/crashes/$t/" >&2
    grep -m1 -E "ERROR: |runtime error|fuzz property|SUMMARY" "$build/logs/$t.log" >&2 || true
  fi
done
exit $status
