#!/usr/bin/env bash
# scripts/test-asan.sh [CTEST_ARGS...]: builds the GoogleTest suite with AddressSanitizer and
# UndefinedBehaviorSanitizer (CMakePresets.json, preset "asan": RelWithDebInfo, build-asan/) and
# runs it through ctest (2 at a time); CTEST_ARGS pass on, e.g. -R SafeTensors; --ci for every test
# but the shipped model's (what CI runs), or --quick for the subset that fits a few minutes on 2 cores
# (docs/reliability.md). Any sanitizer report fails the test that made it. Prints the build and test times.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
args=("$@")
targets=()
if [[ "${1:-}" == "--quick" ]]; then
  # Everything but the CLI tests (they run the sanitized `ptl` binary, training and saving, and
  # take 60% of the sanitized test time), the shipped model's (the sanitized `ptl` evaluating and
  # sampling the 19 MB model: minutes), and the kernel tests' copies at narrower vector widths,
  # which are not built (their engines would be two more compiles): only ptl_tests and the ptl
  # binary that some of its other tests run.
  args=(-E '^(avx2|simd128)/|_NOT_BUILT$|^Cli|^DropoutCli|^TokenizerCli|^ShippedModel\.' "${@:2}")
  targets=(--target ptl_tests ptl)
fi
if [[ "${1:-}" == "--ci" ]]; then
  # Everything but ShippedModel.*: the sanitized `ptl` evaluating and sampling the shipped 19 MB model
  # takes about 10 minutes of test time, through the code that the CLI tests run on small models.
  args=(-E '_NOT_BUILT$|^ShippedModel\.' "${@:2}")
fi
t0=$SECONDS
cmake --preset asan >/dev/null
cmake --build --preset asan "${targets[@]}"
echo "-- asan build: $((SECONDS - t0)) s"
t1=$SECONDS
status=0
ctest --preset asan "${args[@]}" || status=$?
echo "-- asan tests: $((SECONDS - t1)) s"
exit $status
