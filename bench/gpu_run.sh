#!/usr/bin/env bash
# The H200 benchmark of record in one command on the GPU machine: WebGPU (Dawn, Node) matmuls
# and training steps, the PyTorch CUDA peer (cuBLAS fp32, TF32 off; python_ref's model, eager) and
# the WebAssembly SIMD+threads build on the machine's CPU cores, then bench/gpu_merge.py puts
# them side by side (JSON lines with ratio / speedup fields).
#
#   bench/gpu_run.sh sweep|sweep2|gpu|wasm|full OUTDIR
# (gpu + wasm = full, in two commands; then: python3 bench/gpu_merge.py --webgpu webgpu.jsonl --torch torch.jsonl --wasm wasm.jsonl)
#
# Needs (see docs/performance.md, "WebGPU on an H200"): .gpu/ from shared/tools/gpu-webgpu-pack
# (Node, Dawn, the Vulkan loader) with the static ptl in .gpu/bin and tinyshakespeare.txt in
# .gpu/data, web/webgpu/dist (npm run build), web/dist (the WASM engine's TypeScript) and
# build-wasm/simd-threads (wasm/build.sh simd-threads); carry [".gpu", "web/webgpu/dist",
# "web/dist", "build-wasm/simd-threads"].
#   sweep: the kernel tests on the real driver, matmul variants (tile 64, 128 with BK 8 / 16,
#          auto, auto without Dawn's robustness checks) at 5 presets' shapes and 4096^3, cuBLAS
#          at the same shapes, smoke runs of the PyTorch and WASM step benchmarks.
#   gpu:   every preset: WebGPU matmuls (3 layouts; 4096^3 median of 3), training steps, the
#          matmul variants, PyTorch (cuBLAS matmuls, training steps); wasm: the WASM steps.
#   full:  gpu then wasm, then the merge.
set -uo pipefail
mode=${1:?sweep|full}
out=${2:?OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
root=$PWD
# Node, Dawn and the Vulkan loader from .gpu (shared/tools/gpu-webgpu-pack's prefix).
for f in .gpu/gl/*.deb; do dpkg -x "$f" /; done; ldconfig
mkdir -p /tmp/n; xz -dc .gpu/node.xz > /tmp/n/node; chmod +x /tmp/n/node; export PATH=/tmp/n:$PATH
nm=web/webgpu/node_modules; mkdir -p $nm; rm -rf $nm/webgpu; cp -r .gpu/webgpu $nm/webgpu
xz -dc .gpu/dawn.node.xz > $nm/webgpu/dist/linux-x64/dawn.node
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp
export PTL_WEBGPU_NATIVE=1 PTL_BUILD_DIR=$root/.gpu/bin PTL_DATA_DIR=$root/.gpu/data PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; lscpu | grep 'Model name'; python3 -c 'import torch; print("torch", torch.__version__)'; node --version; } > "$out/env.txt" 2>&1
wb() { node bench/webgpu_bench.mjs --ptl .gpu/bin/ptl "$@"; }
if [[ $mode == sweep ]]; then
  (cd web/webgpu && timeout 120 node test/run-all.mjs kernels) > "$out/kernels_test.log" 2>&1; echo "kernel tests rc=$?" >> "$out/env.txt"
  P=medium,xl,huge,mega,behemoth
  common=(--presets $P --matmul preset,4096 --layouts fwd,dx,dW --train 0 --warm-s 0.15 --min-ms 100)
  {
    timeout 100 node bench/webgpu_bench.mjs "${common[@]}" --tile 64 --tag t64
    timeout 100 node bench/webgpu_bench.mjs "${common[@]}" --tile 128 --bk 8 --tag t128bk8
    timeout 100 node bench/webgpu_bench.mjs "${common[@]}" --tile 128 --bk 16 --tag t128bk16
    timeout 100 node bench/webgpu_bench.mjs "${common[@]}" --tag auto
    timeout 100 node bench/webgpu_bench.mjs "${common[@]}" --tile 128 --bk 8 --tag t128bk8_norobust --dawn 'enable-dawn-features=allow_unsafe_apis,disable_robustness'
  } > "$out/webgpu_sweep.jsonl" 2>> "$out/stderr.log"
  timeout 150 python3 bench/pytorch_cuda.py --presets $P --train 0 > "$out/torch_sweep.jsonl" 2>> "$out/stderr.log"
  timeout 60 python3 bench/pytorch_cuda.py --presets tiny,xl --matmul none --steps 5 >> "$out/torch_sweep.jsonl" 2>> "$out/stderr.log"
  timeout 60 node --no-experimental-fetch bench/wasm_steps.mjs --presets tiny,small --steps 3 --budget-s 5 --total-s 40 > "$out/wasm_sweep.jsonl" 2>> "$out/stderr.log"
  python3 bench/gpu_merge.py --webgpu "$out/webgpu_sweep.jsonl" --torch "$out/torch_sweep.jsonl" > "$out/sweep_merged.jsonl" 2>> "$out/stderr.log"
  exit 0
fi
if [[ $mode == sweep2 ]]; then
  # The 128-tile variants at 4096^3 (median of 3) and the forward at the larger presets' shapes.
  c4=(--presets xl --matmul 4096 --layouts fwd,dx,dW --train 0 --warm-s 0.5 --min-ms 300 --repeat 3)
  cp=(--presets xl,huge,mega,behemoth --matmul preset --layouts fwd --train 0 --warm-s 0.2 --min-ms 150)
  {
    timeout 60 node bench/webgpu_bench.mjs "${c4[@]}" --tile 64 --tag t64
    timeout 60 node bench/webgpu_bench.mjs "${c4[@]}" --tile 128 --tag t128nt
    timeout 60 node bench/webgpu_bench.mjs "${c4[@]}" --tile 128 --nt 0 --tag t128wide
    timeout 60 node bench/webgpu_bench.mjs "${c4[@]}" --tile 128 --tag t128nt_norobust --dawn 'enable-dawn-features=allow_unsafe_apis,disable_robustness'
    timeout 60 node bench/webgpu_bench.mjs "${cp[@]}" --tile 64 --tag t64
    timeout 60 node bench/webgpu_bench.mjs "${cp[@]}" --tile 128 --tag t128nt
  } > "$out/webgpu_sweep2.jsonl" 2>> "$out/stderr.log"
  exit 0
fi
P=${PRESETS:-tiny,small,medium,large,xl,huge,massive,mega,behemoth}
if [[ $mode == full || $mode == gpu ]]; then
  timeout 200 node bench/webgpu_bench.mjs --ptl .gpu/bin/ptl --presets $P --matmul preset,4096 --layouts fwd,dx,dW --repeat 3 \
    --steps 30 --warm-s 0.3 --min-ms 200 > "$out/webgpu.jsonl" 2>> "$out/stderr.log"
  # The matmul variants next to the default: 4096^3 (median of 3) and the forward at the larger presets.
  c4=(--presets xl --matmul 4096 --layouts fwd,dx,dW --train 0 --warm-s 0.5 --min-ms 300 --repeat 3)
  cp=(--presets xl,huge,mega,behemoth --matmul preset --layouts fwd --train 0 --warm-s 0.2 --min-ms 150)
  {
    timeout 60 node bench/webgpu_bench.mjs "${c4[@]}" --tile 64 --tag t64
    timeout 60 node bench/webgpu_bench.mjs "${c4[@]}" --tile 128 --nt 0 --tag t128wide
    timeout 60 node bench/webgpu_bench.mjs "${c4[@]}" --tile 128 --tag t128nt_norobust --dawn 'enable-dawn-features=allow_unsafe_apis,disable_robustness'
    timeout 60 node bench/webgpu_bench.mjs "${cp[@]}" --tile 128 --tag t128nt
  } > "$out/webgpu_variants.jsonl" 2>> "$out/stderr.log"
  timeout 150 python3 bench/pytorch_cuda.py --presets $P --steps 20 > "$out/torch.jsonl" 2>> "$out/stderr.log"
fi
if [[ $mode == full || $mode == wasm ]]; then
  timeout ${WASM_S:-230} node --no-experimental-fetch bench/wasm_steps.mjs --presets ${WASM_PRESETS:-$P} \
    --steps 10 --budget-s ${WASM_BUDGET:-25} --total-s $(( ${WASM_S:-230} - 15 )) > "$out/wasm.jsonl" 2>> "$out/stderr.log"
fi
[[ -s $out/webgpu.jsonl && -s $out/torch.jsonl ]] && python3 bench/gpu_merge.py --webgpu "$out/webgpu.jsonl" --torch "$out/torch.jsonl" --wasm "$out/wasm.jsonl" > "$out/h200-webgpu.jsonl" 2>> "$out/stderr.log"
exit 0
