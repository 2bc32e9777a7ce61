#!/usr/bin/env bash
# Every measurement of docs/performance.md, one after the other (never two at once), into docs/bench/:
#   bench/run_all.sh [presets]        (default tiny,small,medium,large,xl,huge; massive is always
#                                     added to the thread-scaling and matmul parts)
# PTL_BENCH_ROUNDS (default 2): rounds of the alternated runs of steps 1 and 2.
# PTL_BENCH_OUT (default docs/bench): the folder for the JSON and machine.txt, so that a run
# which is not to replace the run of record (another CPU, a trial) goes straight to a folder of
# its own, e.g. PTL_BENCH_OUT=docs/bench/run_Z_<cpu>_<commit>; bench/table.py reads any folder.
# Then: /usr/bin/python3 bench/plot.py docs/bench/cpu_vs_pytorch_2t.jsonl --scaling docs/bench/ptl_threads.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
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
# SCHED_FIFO (chrt -f 50) only with PTL_BENCH_REALTIME=1. It was the default until session 13,
# against a build or test suite taking a core mid-step, but the kernel's RT throttling
# (sched_rt_runtime_us 950000 of every 1000000) then stalls each busy CPU for 50 ms a second: a
# 1-thread run's wall time came out 5% above its CPU time, which the 1 -> 2 ratio's 1-thread side
# leaves out and its 2-thread wall time keeps in; and a process started while a CPU was throttled
# got both its threads on one CPU (2-thread Medium at 1-thread speed, CPU time = wall time, in 3
# of 14 runs that followed a 1-thread run; none of 8 without chrt). Run nothing else meanwhile.
RT=(); RTFLAG=()
if [[ "${PTL_BENCH_REALTIME:-0}" == 1 ]] && chrt -f 50 true 2>/dev/null; then RT=(chrt -f 50); RTFLAG=(--realtime); fi
OUT="${PTL_BENCH_OUT:-docs/bench}"
mkdir -p "$OUT"
# The model name here is only "AMD EPYC"; family and model tell the CPUs apart: the figures of
# record are from a Zen 5 (family 26, full-width AVX-512), but this VM has also come up on a Zen 4
# (family 25, model 17), whose AVX-512 runs at half that rate.
{ date -u; uname -a; grep -m1 "model name" /proc/cpuinfo; grep -m1 "cpu family" /proc/cpuinfo; grep -m1 -P "^model\t" /proc/cpuinfo
  nproc; uptime; echo "realtime: ${RT[*]:-no}"; } > "$OUT/machine.txt"
# 1. ptl alone, 1 and 2 threads (thread scaling), with the measured matmul peak and --ops. Preset
#    by preset, the thread counts alternated round by round (1 2, 2 1, ...), so that a preset's
#    1- and 2-thread runs are seconds apart: the host's slow spells last minutes.
: > "$OUT/ptl_threads.jsonl"
ROUNDS="${PTL_BENCH_ROUNDS:-2}"
# The matmul peak for MFU (ptl bench measures a 2048^3 product at 1 thread): the best of three.
PEAK="$(for i in 1 2 3; do "${RT[@]}" "$PTL" bench --json --presets tiny --threads 1 --steps 1 --warmup 0; done |
  /usr/bin/python3 -c 'import json,sys; print(max(json.loads(l)["peak_gflops"] for l in sys.stdin))')"
IFS=, read -ra ALL <<< "$WITH_MASSIVE"
for p in "${ALL[@]}"; do
  for ((round = 1; round <= ROUNDS; round++)); do
    order=(1 2); ((round % 2 == 0)) && order=(2 1)
    for t in "${order[@]}"; do
      "${RT[@]}" "$PTL" bench --json --ops --presets "$p" --threads $t --steps 5 --warmup 2 --peak-gflops "$PEAK" >> "$OUT/ptl_threads.jsonl"
    done
  done
done
# 2. ptl against PyTorch (OpenBLAS SkylakeX), A/B alternated, 1 and 2 threads.
for t in 1 2; do
  : > "$OUT/cpu_vs_pytorch_${t}t.jsonl"
  /usr/bin/python3 bench/cpu_vs_pytorch --presets "$PRESETS" --threads $t --steps 5 --warmup 2 --rounds "$ROUNDS" \
    --ptl "$PTL" "${RTFLAG[@]}" --json-out "$OUT/cpu_vs_pytorch_${t}t.jsonl" > /dev/null
done
# 3. The matmuls against OpenBLAS sgemm: 1 thread in ROUNDS rounds (single products move by 10-20%
#    between passes on this host; bench/table.py takes the median per product), 2 threads once.
: > "$OUT/matmul_vs_openblas_1t.jsonl"
for ((round = 1; round <= ROUNDS; round++)); do
  bench/matmul_vs_openblas --threads 1 --reps 7 --presets "$WITH_MASSIVE" >> "$OUT/matmul_vs_openblas_1t.jsonl"
done
bench/matmul_vs_openblas --threads 2 --reps 7 --presets "$WITH_MASSIVE" > "$OUT/matmul_vs_openblas_2t.jsonl"
uptime >> "$OUT/machine.txt"
