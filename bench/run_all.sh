#!/usr/bin/env bash
# The CPU benchmarks of docs/performance.md, one after the other (never two at once), into
# bench/results/: cpu_threads.jsonl, cpu_vs_pytorch.jsonl, cpu_matmul_vs_openblas.jsonl.
#   bench/run_all.sh [presets]        (default tiny,small,medium,large,xl,huge; massive is always
#                                     added to the thread-scaling and matmul parts)
# PTL (default build-perf/ptl): the ptl measured; PTL_BUILD_DIR its build (for the matmul part).
# PTL_BENCH_ROUNDS (default 2): rounds of the alternated runs of each part.
# PTL_BENCH_OUT (default bench/results): the folder for the files, for a run that is not to
# replace the results of record (another CPU, a trial); bench/table.py reads any such folder.
# Then: /usr/bin/python3 bench/table.py and /usr/bin/python3 bench/plot.py
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; -*) echo "bench/run_all.sh: unknown option $1" >&2; usage >&2; exit 2 ;; esac
(($# <= 1)) || { echo "bench/run_all.sh: one argument at most (the presets, comma-separated)" >&2; exit 2; }
PRESETS="${1:-tiny,small,medium,large,xl,huge}"
PTL="${PTL:-build-perf/ptl}"
# Everything is checked before a file of record is touched.
[[ -x "$PTL" ]] || { echo "bench/run_all.sh: no ptl at $PTL (build it, or set PTL=<path to ptl>)" >&2; exit 1; }
IFS=, read -ra GIVEN <<< "$PRESETS"
for p in "${GIVEN[@]}"; do
  "$PTL" info --preset "$p" > /dev/null || { echo "bench/run_all.sh: unknown preset '$p'" >&2; exit 1; }
done
# Massive joins the thread-scaling and matmul parts once, whether or not it was listed.
WITH_MASSIVE="$PRESETS"; [[ ",$PRESETS," == *,massive,* ]] || WITH_MASSIVE="$PRESETS,massive"
# SCHED_FIFO (chrt -f 50) only with PTL_BENCH_REALTIME=1: it keeps a build or test suite from
# taking a core mid-step, but the kernel's RT throttling (sched_rt_runtime_us 950000 of every
# 1000000) stalls each busy CPU for 50 ms a second, so a 1-thread run's wall time comes out about
# 5% above its CPU time, and a process started while a CPU is throttled can get both its threads
# on one CPU (a 2-thread step at 1-thread speed). Run at normal priority, with nothing else running.
RT=(); RTFLAG=()
if [[ "${PTL_BENCH_REALTIME:-0}" == 1 ]] && chrt -f 50 true 2>/dev/null; then RT=(chrt -f 50); RTFLAG=(--realtime); fi
OUT="${PTL_BENCH_OUT:-bench/results}"
mkdir -p "$OUT"
# Each file starts with bench/header.py's line: the machine (CPU model with its family and model
# numbers: one model name covers CPUs of different speeds), the engine's version, the command.
# The parts write to a scratch folder; the files of record are replaced only at the end.
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
CMD="$(printf '%q ' "$0" "$@")"; [[ -n "${PTL_BENCH_ROUNDS:-}" ]] && CMD="PTL_BENCH_ROUNDS=$PTL_BENCH_ROUNDS $CMD"
[[ -n "${RT[*]}" ]] && CMD="PTL_BENCH_REALTIME=1 $CMD"
BLAS="OpenBLAS $(dpkg-query -W -f '${Version}' libopenblas0-pthread 2>/dev/null || echo '?') (libopenblas0-pthread), OPENBLAS_CORETYPE=SkylakeX"
header() { /usr/bin/python3 bench/header.py "$1" --ptl "$PTL" --command "${CMD% }" "${@:2}"; }
# 1. ptl alone, 1 and 2 threads (thread scaling), with the measured matmul peak and --ops. Preset
#    by preset, the thread counts alternated round by round (1 2, 2 1, ...), so that a preset's
#    1- and 2-thread runs are seconds apart: the host's slow spells last minutes.
header cpu_threads > "$TMP/cpu_threads.jsonl"
ROUNDS="${PTL_BENCH_ROUNDS:-2}"
# The matmul peak for MFU (ptl bench measures a 2048^3 product at 1 thread): the best of three.
PEAK="$(for i in 1 2 3; do "${RT[@]}" "$PTL" bench --json --presets tiny --threads 1 --steps 1 --warmup 0; done |
  /usr/bin/python3 -c 'import json,sys; print(max(json.loads(l)["peak_gflops"] for l in sys.stdin))')"
IFS=, read -ra ALL <<< "$WITH_MASSIVE"
for p in "${ALL[@]}"; do
  for ((round = 1; round <= ROUNDS; round++)); do
    order=(1 2); ((round % 2 == 0)) && order=(2 1)
    for t in "${order[@]}"; do
      "${RT[@]}" "$PTL" bench --json --ops --presets "$p" --threads $t --steps 5 --warmup 2 --peak-gflops "$PEAK" >> "$TMP/cpu_threads.jsonl"
    done
  done
done
# 2. ptl against PyTorch (OpenBLAS SkylakeX), A/B alternated, 1 and 2 threads, into one file.
header cpu_vs_pytorch --blas "$BLAS, OMP_WAIT_POLICY=PASSIVE" \
  --peer "PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?'), python_ref.model.TinyGPT" \
  > "$TMP/cpu_vs_pytorch.jsonl"
for t in 1 2; do
  /usr/bin/python3 bench/cpu_vs_pytorch --presets "$PRESETS" --threads $t --steps 5 --warmup 2 --rounds "$ROUNDS" \
    --ptl "$PTL" "${RTFLAG[@]}" --json-out "$TMP/cpu_vs_pytorch.jsonl" > /dev/null
done
# 3. The matmuls against OpenBLAS sgemm: 1 thread in ROUNDS rounds (single products move by 10-20%
#    between passes on this host; bench/table.py takes the median per product), 2 threads once.
header cpu_matmul_vs_openblas --blas "$BLAS; OPENBLAS_THREAD_TIMEOUT=20 at 2 threads" --peer "OpenBLAS cblas_sgemm" \
  > "$TMP/cpu_matmul_vs_openblas.jsonl"
for ((round = 1; round <= ROUNDS; round++)); do
  bench/matmul_vs_openblas --threads 1 --reps 7 --presets "$WITH_MASSIVE" >> "$TMP/cpu_matmul_vs_openblas.jsonl"
done
bench/matmul_vs_openblas --threads 2 --reps 7 --presets "$WITH_MASSIVE" >> "$TMP/cpu_matmul_vs_openblas.jsonl"
mv "$TMP"/*.jsonl "$OUT"/
