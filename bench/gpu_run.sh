#!/usr/bin/env bash
# The GPU benchmarks of record in one command on the GPU machine: WebGPU (Dawn, Node) matmuls
# and training steps, the PyTorch CUDA peer (cuBLAS fp32, TF32 off; python_ref's model, eager) and
# the WebAssembly SIMD+threads build on the machine's CPU cores, then bench/gpu_merge.py puts
# them side by side (JSON lines with ratio / speedup fields).
#
#   bench/gpu_run.sh sweep|sweep2|sweep3|matmul3|layernorm|gpu|wasm|full|train|time_to_loss|long_run|gpt2|generate [OUTDIR]
# Results (bench/header.py's line first, <card> from nvidia-smi's name: h200, h100, ...):
#   full: OUTDIR/webgpu_vs_cuda_<card>.jsonl   matmul3: OUTDIR/webgpu_matmul_<card>.jsonl
#   layernorm: OUTDIR/webgpu_layernorm_<card>.jsonl   gpt2: OUTDIR/gpt2_vs_cuda_<card>.jsonl;
#   generate: OUTDIR/webgpu_generate_<card>.jsonl;
#   every stage's raw output in OUTDIR/raw/.
# OUTDIR defaults to bench/results (raw/ there is ignored by git); on a machine whose files come
# back from one folder, give that folder and copy the results file into bench/results/.
#
# Needs (docs/performance.md, "Running the GPU benchmark"): .gpu/ made by bench/gpu_pack.sh (Node,
# Dawn, the Vulkan loader, the static ptl in .gpu/bin, tinyshakespeare.txt in .gpu/data),
# web/webgpu/dist, and for full / wasm web/engine/dist and build-wasm/simd-threads; carry [".gpu",
# "web/webgpu/dist", "web/engine/dist", "build-wasm/simd-threads"].
#   sweep: the kernel tests on the real driver, matmul variants (tile 64, 128 with BK 8 / 16,
#          auto, auto without Dawn's robustness checks) at 5 presets' shapes and 4096^3, cuBLAS
#          at the same shapes, smoke runs of the PyTorch and WASM step benchmarks.
#   sweep3: the generated matmul kernel's configurations (V4 at 4096^3, VR without robustness, VP
#          at the presets' shapes; comma lists, see linear_gen.ts), the FMA ceiling, cuBLAS, the
#          kernel tests on the real driver with TESTS=1 (carry [".gpu", "web/webgpu/dist"] suffices).
#   matmul3: the matmul benchmark of record: the default ("auto") and variants at 4096^3 (median of
#          3) and at every preset's shapes, cuBLAS in the same run, the kernel tests on the driver.
#   layernorm: LayerNorm forward + backward with the subgroup reductions (kernels/common/
#          reduce_subgroup.wgsl) next to the workgroup tree (reduce.wgsl), interleaved per shape, median
#          of 3, at LN_SHAPES (default 8192x768,65536x1024), then the kernel tests on the real driver
#          (TESTS=0 skips them; carry [".gpu", "web/webgpu/dist"] suffices). LOCAL=1 skips the .gpu setup
#          and uses this machine's node and Vulkan driver (a smoke test on SwiftShader with tiny LN_SHAPES).
#   gpu:   every preset: WebGPU matmuls (3 layouts; 4096^3 median of 3), training steps, the
#          matmul variants, PyTorch (cuBLAS matmuls, training steps); wasm: the WASM steps.
#   full:  gpu then wasm, then the merge.
#   train: a training run on the GPU with web/webgpu/bin/train.mjs (the WebAssembly engine drives
#          it: data, schedule, validation on the CPU, checkpoints): TRAIN_ARGS are its options (e.g.
#          TRAIN_ARGS="--preset medium --steps 5000 --eval-every 250"); into OUTDIR/train/: model.tinygpt,
#          metrics.jsonl, samples.txt, train.log (its progress), result.json (its summary line).
#          It stops itself (SIGINT: saves, exits) after TRAIN_S seconds (default 540); continue
#          with TRAIN_ARGS="--resume OUTDIR/train/model.tinygpt --out OUTDIR/train" on a later call
#          (the checkpoint and logs carried back). Needs carry [".gpu", "web/webgpu/dist",
#          "web/engine/dist", "build-wasm/simd-threads"] (bench/gpu_pack.sh --wasm).
#   time_to_loss: bench/time_to_loss (TTL_ARGS, default "--max-s 270": native ptl on 2 CPU threads,
#          then WebGPU, each stopped at its lowest target or after 270 s) into
#          OUTDIR/time_to_loss_<card>.jsonl, the runs in OUTDIR/raw/time_to_loss/. Same carry as train.
#   long_run: bench/long_run (LONG_ARGS, default "--steps 20000 --every 100": Small with the native ptl
#          on every core, then WebGPU) into OUTDIR/long_run_<card>.jsonl, the runs in
#          OUTDIR/raw/long_run/. Same carry as train.
#   gpt2:  GPT-2 124M (gpt2) and 355M (gpt2-medium) training steps at B 8 x T 1024, full fine-tuning
#          (AdamW over every parameter) and LoRA (r 16, alpha 32 on c_attn, attn.c_proj, c_fc, mlp.c_proj),
#          random weights: WebGPU (bench/webgpu_bench.mjs --gpt2, one process per model and variant) and
#          PyTorch CUDA fp32, TF32 off, eager (bench/pytorch_cuda.py --gpt2, python_ref's model and adapters),
#          the FMA ceiling (bench/webgpu_fma_peak.mjs), then bench/gpu_merge.py: per model and variant both
#          sides' ms/step and tokens/s, ratio = PyTorch ms / WebGPU ms (> 1: WebGPU faster), and the fraction
#          of the card's fp32 peak (gpu_merge.py's peak_fp32_tflops: 67 TFLOP/s for H100 SXM and H200).
#          Every stage has a time limit, and all of them together at most GPT2_TOTAL_S (default 480) seconds;
#          GPT2_MODELS (default gpt2,gpt2-medium), GPT2_STEPS (10), GPT2_WARMUP (3), GPT2_WARM_S (WebGPU's
#          untimed seconds, 0.3), GPT2_STAGE_S (each WebGPU stage's limit; 100 s, gpt2-medium 150 s, PyTorch
#          30 s more). Carry [".gpu", "web/webgpu/dist"] suffices. LOCAL=1 (with PTL_BIN=build/ptl, PYTHON=/usr/bin/python3): this
#          machine's node and Vulkan driver, PyTorch on the CPU where there is no CUDA: a smoke test with
#          GPT2_MODELS=gpt2-test (2 layers, d 64, vocab 50,257, B 1 x T 32).
#   generate: generation with the KV cache at GPT-2's shapes, random weights (bench/webgpu_bench.mjs
#          --generate GEN_MODELS, default gpt2,gpt2-medium): a 64-token prompt one token a run and 32 a run
#          (the prefill program), then 64 greedy tokens. Carry [".gpu", "web/webgpu/dist"] suffices.
# Not -e: a stage that fails (a timeout, a crashed benchmark) is logged and the next one still runs,
# so that one run of the machine's time brings back every figure it could.
set -uo pipefail
usage() { sed -n '7,65p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in
  sweep|sweep2|sweep3|matmul3|layernorm|gpu|wasm|full|train|time_to_loss|long_run|gpt2|generate) ;;
  -h|--help) usage; exit 0 ;;
  *) echo "bench/gpu_run.sh: the first argument is the mode (sweep, sweep2, sweep3, matmul3, layernorm, gpu, wasm, full, train, time_to_loss, long_run, gpt2 or generate), got '${1:-}'" >&2; exit 2 ;;
esac
mode=$1
(($# <= 2)) || { echo "bench/gpu_run.sh: two arguments at most (the mode and the output folder)" >&2; exit 2; }
cd "$(dirname "$0")/.."
root=$PWD
results=${2:-bench/results}
mkdir -p "$results/raw"
results=$(cd "$results" && pwd)  # a relative OUTDIR is taken from the repository root, where the stages run
out=$results/raw
if [[ ${LOCAL:-0} != 1 ]]; then
  # This replaces web/node_modules/webgpu and installs the Vulkan loader: the GPU machine only.
  [[ -d .gpu ]] || { echo "bench/gpu_run.sh: no .gpu/ here (made by bench/gpu_pack.sh for the GPU machine; LOCAL=1 runs with this machine's node)" >&2; exit 1; }
  # Node, Dawn and the Vulkan loader from .gpu (bench/gpu_pack.sh).
  for f in .gpu/gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  mkdir -p /tmp/n; xz -dc .gpu/node.xz > /tmp/n/node; chmod +x /tmp/n/node; export PATH=/tmp/n:$PATH
  nm=web/node_modules; mkdir -p $nm; rm -rf $nm/webgpu; cp -r .gpu/webgpu $nm/webgpu
  xz -dc .gpu/dawn.node.xz > $nm/webgpu/dist/linux-x64/dawn.node
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp
  export PTL_WEBGPU_NATIVE=1 PTL_BUILD_DIR=$root/.gpu/bin PTL_DATA_DIR=$root/.gpu/data PYTHONUNBUFFERED=1
  # The engine's version, written by bench/gpu_pack.sh (the copy here may have no .git).
  [[ -s .gpu/engine-version ]] && export PTL_ENGINE_VERSION="$(cat .gpu/engine-version)"
fi
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; lscpu | grep 'Model name'; python3 -c 'import torch; print("torch", torch.__version__)'; node --version; } > "$out/env.txt" 2>&1
# The results files are named after the card that produced them.
card=$(python3 bench/header.py --card-slug 2>/dev/null || echo local)
torch_version=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')
header() {  # header BENCHMARK [header.py options]: the first line of a results file
  python3 bench/header.py "$1" --gpu --ptl .gpu/bin/ptl --command "bench/gpu_run.sh $mode" "${@:2}"
}
peer="PyTorch $torch_version, CUDA fp32, TF32 off (cuBLAS)"
wb() { node bench/webgpu_bench.mjs --ptl .gpu/bin/ptl "$@"; }
if [[ $mode == sweep ]]; then
  (cd web/webgpu && PTL_WEBGPU_VARIANTS=1 timeout 120 node test/run-all.mjs kernels) > "$out/kernels_test.log" 2>&1; echo "kernel tests rc=$?" >> "$out/env.txt"
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
if [[ $mode == sweep3 ]]; then
  # The generated kernel (linear_tiled, web/webgpu/src/linear_gen.ts): many configurations in one
  # process each (interleaved per shape), at 4096^3 and at the larger presets' shapes; the same
  # without Dawn's robustness; the FMA ceiling of this path; cuBLAS at the same shapes; the kernel
  # tests (with the tiled cases) on the real driver.
  V4=${V4:-auto,128x128/8x8/k8,128x128/8x8/k8/u0,128x128/8x8/k8/pad0,128x128/8x8/k8/map1,128x128/8x8/k8/sw1,128x128/8x8/k16/pad0,128x128/8x8/k16/pad0/u0,128x128/8x8/k16/pad0/map1/u0,128x128/8x8/k16/db0,128x128/8x8/k32/db0/pad0,128x128/8x8/k8/map1/sg1/u0,128x256/8x16/k8,128x256/8x16/k8/u0,256x128/16x8/k8/u0,128x128/8x16/k8/u0,128x128/16x8/k8/u0,128x64/8x4/k16/u0,64x128/4x8/k16/u0,64x64/4x4/k16}
  VR=${VR:-auto,128x128/8x8/k8,128x128/8x8/k8/u0,128x128/8x8/k16/pad0/u0,128x256/8x16/k8/u0}
  VP=${VP:-auto,64x64/4x4/k16,128x64/8x4/k16/u0,128x128/8x8/k8/u0}
  timeout 30 node bench/webgpu_fma_peak.mjs > "$out/fma.jsonl" 2>> "$out/stderr.log"
  c4=(--presets xl --matmul 4096 --layouts fwd,dx,dW --train 0 --warm-s 0.3 --min-ms 200)
  {
    timeout 260 node bench/webgpu_bench.mjs "${c4[@]}" --tiled "$V4"
    timeout 60 node bench/webgpu_bench.mjs "${c4[@]}" --tiled "$VR" --tag norobust --dawn 'enable-dawn-features=allow_unsafe_apis,disable_robustness,disable_workgroup_init'
    timeout 150 node bench/webgpu_bench.mjs --presets large,xl,huge,massive,mega,behemoth --matmul preset --layouts fwd,dx,dW --train 0 --warm-s 0.05 --min-ms 40 --tiled "$VP"
  } > "$out/webgpu_sweep3.jsonl" 2>> "$out/stderr.log"
  timeout 120 python3 bench/pytorch_cuda.py --presets large,xl,huge,massive,mega,behemoth --train 0 > "$out/torch_sweep3.jsonl" 2>> "$out/stderr.log"
  python3 bench/gpu_merge.py --webgpu "$out/webgpu_sweep3.jsonl" --torch "$out/torch_sweep3.jsonl" > "$out/sweep3_merged.jsonl" 2>> "$out/stderr.log"
  if [[ ${TESTS:-0} == 1 ]]; then (cd web/webgpu && PTL_WEBGPU_VARIANTS=1 timeout 150 node test/run-all.mjs kernels) > "$out/kernels_test.log" 2>&1; echo "kernel tests rc=$?" >> "$out/env.txt"; fi
  exit 0
fi
if [[ $mode == matmul3 ]]; then
  # The matmul benchmark of record after sweep3: the default choice ("auto") next to variants at
  # 4096^3 (median of 3) and at every preset's Linear shapes, cuBLAS at the same shapes in the same
  # run, the kernel tests on the real driver, and the default without Dawn's robustness.
  V4=${V4:-auto,off,128x128/8x8/k16/db0,128x128/8x8/k16/tr1,128x128/8x8/k16/pad0/u0/tr1,128x128/8x8/k16/db0/map1/tr1,128x128/8x8/k32/db0/pad0/tr1,128x256/8x16/k8/u0/tr1,256x128/16x8/k8/u0/tr1,128x128/8x8/k8/map1/sg1/u0/tr1}
  VP=${VP:-auto,t64,nt}
  timeout 200 node bench/webgpu_bench.mjs --presets xl --matmul 4096 --layouts fwd,dx,dW --train 0 --warm-s 0.3 --min-ms 200 --repeat 3 --tiled "$V4" > "$out/webgpu_4096.jsonl" 2>> "$out/stderr.log"
  timeout 100 python3 bench/pytorch_cuda.py --train 0 > "$out/torch.jsonl" 2>> "$out/stderr.log"
  timeout 120 node bench/webgpu_bench.mjs --matmul preset --layouts fwd,dx,dW --train 0 --warm-s 0.1 --min-ms 80 --tiled "$VP" > "$out/webgpu_presets.jsonl" 2>> "$out/stderr.log"
  (cd web/webgpu && PTL_WEBGPU_VARIANTS=1 timeout 150 node test/run-all.mjs kernels) > "$out/kernels_test.log" 2>&1; echo "kernel tests rc=$?" >> "$out/env.txt"
  timeout 40 node bench/webgpu_bench.mjs --presets xl --matmul 4096 --layouts fwd,dx,dW --train 0 --warm-s 0.3 --min-ms 200 --tiled auto --tag auto_norobust --dawn 'enable-dawn-features=allow_unsafe_apis,disable_robustness,disable_workgroup_init' >> "$out/webgpu_4096.jsonl" 2>> "$out/stderr.log"
  cat "$out/webgpu_4096.jsonl" "$out/webgpu_presets.jsonl" > "$out/webgpu_all.jsonl"
  [[ -s $out/webgpu_all.jsonl ]] && { header webgpu_matmul --peer "$peer"
    python3 bench/gpu_merge.py --webgpu "$out/webgpu_all.jsonl" --torch "$out/torch.jsonl"; } > "$results/webgpu_matmul_$card.jsonl" 2>> "$out/stderr.log"
  rm "$out/webgpu_all.jsonl"
  exit 0
fi
if [[ $mode == layernorm ]]; then
  # The row reductions of layernorm / layernorm_backward: subgroupAdd within each subgroup and one
  # step across them (the default where the device has 'subgroups') against the workgroup tree.
  LN=${LN_SHAPES:-8192x768,65536x1024}
  timeout ${LN_S:-200} node bench/webgpu_bench.mjs --matmul none --train 0 --layernorm "$LN" --ln-variants subgroup,workgroup \
    --repeat ${LN_REPEAT:-3} --warm-s ${LN_WARM:-0.3} --min-ms ${LN_MIN_MS:-200} > "$out/webgpu_layernorm.jsonl" 2>> "$out/stderr.log"
  echo "layernorm bench rc=$?" >> "$out/env.txt"
  # A results file only from a run that measured something (a failed stage leaves its log in raw/).
  [[ -s $out/webgpu_layernorm.jsonl ]] && { header webgpu_layernorm; cat "$out/webgpu_layernorm.jsonl"; } > "$results/webgpu_layernorm_$card.jsonl"
  if [[ ${TESTS:-1} == 1 ]]; then (cd web/webgpu && PTL_WEBGPU_VARIANTS=1 timeout 150 node test/run-all.mjs kernels) > "$out/kernels_test.log" 2>&1; echo "kernel tests rc=$?" >> "$out/env.txt"; fi
  exit 0
fi
if [[ $mode == generate ]]; then
  work=$(mktemp -d /tmp/ptl-gen.XXXXXX)  # the zero-weight checkpoints webgpu_bench.mjs makes for `ptl program`
  { header webgpu_generate
    timeout -k 10 "${GEN_S:-300}" node bench/webgpu_bench.mjs --ptl .gpu/bin/ptl --generate "${GEN_MODELS:-gpt2,gpt2-medium}" --work "$work"
  } > "$results/webgpu_generate_$card.jsonl" 2>> "$out/stderr.log"
  echo "generate rc=$? in $SECONDS s" >> "$out/env.txt"
  rm -rf "$work"
  exit 0
fi
if [[ $mode == gpt2 ]]; then
  models=${GPT2_MODELS:-gpt2,gpt2-medium}
  total=${GPT2_TOTAL_S:-480}
  py=${PYTHON:-python3}
  ptl=${PTL_BIN:-.gpu/bin/ptl}
  tdev=cuda
  $py -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null || tdev=cpu
  work=$(mktemp -d /tmp/ptl-gpt2.XXXXXX)  # the zero-weight checkpoints webgpu_bench.mjs makes for `ptl program`
  steps=(--steps "${GPT2_STEPS:-10}" --warmup "${GPT2_WARMUP:-3}")
  : > "$out/webgpu_gpt2.jsonl"; : > "$out/torch_gpt2.jsonl"
  # limit WANT: WANT seconds, or what is left of GPT2_TOTAL_S when that is less (0: skip the stage).
  limit() { local left=$(( total - SECONDS - 5 )); (( left < 15 )) && echo 0 || echo $(( left < $1 ? left : $1 )); }
  # stage FILE SECONDS LABEL KIND MODEL VARIANTS COMMAND...: runs COMMAND into FILE within its limit; for
  # each of VARIANTS that it printed no line of (killed at its limit, crashed, not run) a line
  # {"kind": KIND, "model", "variant", "error"} says why.
  stage() {
    local file=$1 want=$2 label=$3 kind=$4 model=$5 variants=$6; shift 6
    local lim t0=$SECONDS tmp why rc=-1 v; lim=$(limit "$want"); tmp=$(mktemp)
    if (( lim > 0 )); then
      timeout -k 10 "$lim" "$@" > "$tmp" 2>> "$out/stderr.log"
      rc=$?
      why="exit status $rc after $(( SECONDS - t0 )) s (limit $lim s)"
      cat "$tmp" >> "$file"
    else
      why="not run: the GPT2_TOTAL_S=$total seconds were spent"
    fi
    echo "$label rc=$rc in $(( SECONDS - t0 )) s (limit $lim s)" >> "$out/env.txt"
    for v in ${variants//,/ }; do
      grep -Eq "\"variant\": ?\"$v\"" "$tmp" ||
        echo "{\"kind\": \"$kind\", \"model\": \"$model\", \"variant\": \"$v\", \"error\": \"$why\"}" >> "$file"
    done
    rm -f "$tmp"
  }
  lim=$(limit 30); : > "$out/fma.jsonl"
  (( lim > 0 )) && timeout -k 5 "$lim" node bench/webgpu_fma_peak.mjs > "$out/fma.jsonl" 2>> "$out/stderr.log"
  for m in ${models//,/ }; do
    # gpt2-medium's steps take about 3x gpt2's.
    [[ $m == gpt2-medium ]] && w=150 || w=100
    w=${GPT2_STAGE_S:-$w}
    for v in full lora; do
      stage "$out/webgpu_gpt2.jsonl" $w "webgpu $m $v" gpt2_step "$m" $v \
        node bench/webgpu_bench.mjs --ptl "$ptl" --gpt2 "$m" --gpt2-variants "$v" "${steps[@]}" --warm-s "${GPT2_WARM_S:-0.3}" --work "$work"
    done
    stage "$out/torch_gpt2.jsonl" $(( w + 30 )) "pytorch $m" torch_gpt2_step "$m" full,lora \
      $py bench/pytorch_cuda.py --gpt2 "$m" --device $tdev "${steps[@]}"
  done
  rm -rf "$work"
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  peer="PyTorch $($py -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?'), ${tdev^^} fp32$([[ $tdev == cuda ]] && echo ', TF32 off')"
  { header gpt2_vs_cuda --peer "$peer; python_ref's TinyGPT (tanh GELU) and LoRA adapters, eager, on $tdev"
    $py bench/gpu_merge.py --webgpu "$out/webgpu_gpt2.jsonl" --torch "$out/torch_gpt2.jsonl" --fma "$out/fma.jsonl" --gpu-name "$gpu_name"
  } > "$results/gpt2_vs_cuda_$card.jsonl" 2>> "$out/stderr.log"
  echo "gpt2 mode: $SECONDS s" >> "$out/env.txt"
  exit 0
fi
if [[ $mode == train || $mode == time_to_loss || $mode == long_run ]]; then
  for p in web/engine/dist/index.js build-wasm/simd-threads/ptl_engine.wasm web/webgpu/dist/index.js; do
    [[ -f $p ]] || { echo "bench/gpu_run.sh $mode: $p is missing (bench/gpu_pack.sh --wasm makes it; carry it)" >&2; exit 1; }
  done
  # train.mjs imports the engine by its package name: the workspace link npm would make.
  mkdir -p web/node_modules/@posttrainllm
  [[ -e web/node_modules/@posttrainllm/engine ]] || ln -sfn ../../engine web/node_modules/@posttrainllm/engine
fi
if [[ $mode == train ]]; then
  mkdir -p "$results/train"
  # SIGINT first (the trainer saves its checkpoint and exits), a kill 30 s later if it hangs.
  # shellcheck disable=SC2086  # TRAIN_ARGS is a list of options
  timeout -s INT -k 30 "${TRAIN_S:-540}" node web/webgpu/bin/train.mjs --out "$results/train" --overwrite ${TRAIN_ARGS:-} \
    > "$results/train/result.json" 2> >(tee "$results/train/train.log" >&2)
  rc=$?
  echo "train rc=$rc" >> "$out/env.txt"
  exit $rc
fi
if [[ $mode == time_to_loss ]]; then
  # TTL_ARGS is split as the shell would (quotes group a value: --webgpu-args '--lr 1e-3 ...').
  eval "ttl=(${TTL_ARGS:---max-s 270})"
  python3 bench/time_to_loss --ptl "${PTL_BIN:-.gpu/bin/ptl}" --work "$out/time_to_loss" --out "$results/time_to_loss_$card.jsonl" \
    --header-command "bench/gpu_run.sh time_to_loss (TTL_ARGS=${TTL_ARGS:---max-s 270})" "${ttl[@]}" 2>&1 | tee "$out/time_to_loss.log"
  exit "${PIPESTATUS[0]}"
fi
if [[ $mode == long_run ]]; then
  eval "lr=(${LONG_ARGS:---steps 20000 --every 100})"
  python3 bench/long_run --ptl "${PTL_BIN:-.gpu/bin/ptl}" --work "$out/long_run" --out "$results/long_run_$card.jsonl" \
    --header-command "bench/gpu_run.sh long_run (LONG_ARGS=${LONG_ARGS:---steps 20000 --every 100})" "${lr[@]}" 2>&1 | tee "$out/long_run.log"
  exit "${PIPESTATUS[0]}"
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
if [[ -s $out/webgpu.jsonl && -s $out/torch.jsonl ]]; then
  { header webgpu_vs_cuda --peer "$peer; the WebAssembly SIMD+threads build on the $(nproc) cores"
    python3 bench/gpu_merge.py --webgpu "$out/webgpu.jsonl" --torch "$out/torch.jsonl" --wasm "$out/wasm.jsonl"
  } > "$results/webgpu_vs_cuda_$card.jsonl" 2>> "$out/stderr.log"
fi
exit 0
