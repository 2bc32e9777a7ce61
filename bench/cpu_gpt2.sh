#!/usr/bin/env bash
# GPT-2 124M on the CPU against PyTorch (docs/performance.md, "CPU: GPT-2 124M against PyTorch"):
# three runs of bench/cpu_vs_pytorch --presets gpt2, each alternating ptl and PyTorch processes,
# into bench/results/cpu_gpt2.jsonl (bench/header.py's line, then one line per measurement):
#   the full training step (AdamW on every weight), B 4 x T 64;
#   the LoRA step, rank 16 on qkv,o,fc_in,fc_out (GPT-2's c_attn, attn.c_proj, c_fc, mlp.c_proj);
#   greedy generation with the KV cache, 128 tokens after a 64-token prompt.
#
#   bench/cpu_gpt2.sh [--threads 2] [--rounds 2] [--realtime]   (options go to every run)
#
# Environment: PTL (the ptl measured; default build-perf/ptl, else build/ptl), PTL_GPT2_STEPS
# (timed steps per training process, default 5), PTL_GPT2_TOKENS (generated tokens, default 128),
# PTL_GPT2_RESULTS (the file to write; - for stdout). The results are written to a scratch file
# first: a failed run leaves the file of record as it was.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ -z "${PTL:-}" ]]; then
  PTL=build/ptl
  [[ -x build-perf/ptl ]] && PTL=build-perf/ptl
fi
[[ -x "$PTL" ]] || { echo "bench/cpu_gpt2.sh: no ptl at $PTL: build it, or set PTL" >&2; exit 1; }
STEPS="${PTL_GPT2_STEPS:-5}"
TOKENS="${PTL_GPT2_TOKENS:-128}"
RESULTS="${PTL_GPT2_RESULTS:-bench/results/cpu_gpt2.jsonl}"
run() {
  /usr/bin/python3 bench/header.py cpu_gpt2 --ptl "$PTL" --command "$(printf '%q ' bench/cpu_gpt2.sh "$@")" \
    --peer "PyTorch (python_ref.model.TinyGPT)" --blas "OpenBLAS, OPENBLAS_CORETYPE=SkylakeX, OMP_WAIT_POLICY=PASSIVE"
  local common=(--ptl "$PTL" --presets gpt2 "$@")
  /usr/bin/python3 bench/cpu_vs_pytorch "${common[@]}" --steps "$STEPS" --warmup 2
  /usr/bin/python3 bench/cpu_vs_pytorch "${common[@]}" --steps "$STEPS" --warmup 2 \
    --lora-rank 16 --lora-targets qkv,o,fc_in,fc_out
  /usr/bin/python3 bench/cpu_vs_pytorch "${common[@]}" --warmup 4 --generate "$TOKENS" --prompt 64
}
if [[ "$RESULTS" == - ]]; then run "$@"; exit; fi
tmp="$(mktemp)"; trap 'rm -f "$tmp"' EXIT
run "$@" > "$tmp"
mkdir -p "$(dirname "$RESULTS")" && mv "$tmp" "$RESULTS"
echo "bench/cpu_gpt2.sh: wrote $RESULTS" >&2
