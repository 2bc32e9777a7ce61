#!/usr/bin/env bash
# Prepares a checkout for bench/gpu_run.sh on a GPU machine that has no compiler and no Node:
#
#   bench/gpu_pack.sh [--wasm]
#
# Into the ignored folder .gpu/:
#   bin/ptl, bin/tests/ptl_program_run   static, portable builds (build-static/, -DPTL_NATIVE=OFF)
#   data/tinyshakespeare.txt             the corpus ($PTL_DATA_DIR or ../shared/data)
#   node.xz                              this machine's Node binary, compressed
#   webgpu/, dawn.node.xz                the npm package `webgpu` and its Linux x64 Dawn binary
#   gl/*.deb                             the Vulkan / EGL loader packages (apt-get download)
#   engine-version                       `git describe` of this checkout, for the results' header
# and builds web/webgpu/dist; with --wasm also build-wasm/simd-threads and web/engine/dist: the WASM side
# of `bench/gpu_run.sh full`, and the engine that drives `bench/gpu_run.sh train` and `time_to_loss`
# (web/webgpu/bin/train.mjs). Those modes need all four carried: [".gpu", "web/webgpu/dist",
# "web/engine/dist", "build-wasm/simd-threads"]. Needs what scripts/setup.sh installs (the npm
# packages included). Then prints the paths to carry to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
wasm=0
case "${1:-}" in
  "") ;;
  --wasm) wasm=1 ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench/gpu_pack.sh: unknown argument '$1' (--wasm, --help)" >&2; exit 2 ;;
esac
(($# <= 1)) || { echo "bench/gpu_pack.sh: one argument at most" >&2; exit 2; }
nm=""
for c in web/node_modules; do [[ -f $c/webgpu/package.json ]] && nm=$c && break; done
dawn=$nm/webgpu/dist/linux-x64/dawn.node
[[ -n $nm && -f $dawn ]] || { echo "bench/gpu_pack.sh: the npm package webgpu is not installed (run scripts/setup.sh)" >&2; exit 1; }
data="${PTL_DATA_DIR:-../shared/data}/tinyshakespeare.txt"
[[ -f $data ]] || { echo "bench/gpu_pack.sh: $data not found (set PTL_DATA_DIR to the folder of tinyshakespeare.txt)" >&2; exit 1; }

# 1. The native tools, static: the GPU machine's libraries and CPU are not this machine's.
cmake -S . -B build-static -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTL_NATIVE=OFF -DCMAKE_EXE_LINKER_FLAGS=-static >/dev/null
cmake --build build-static --target ptl ptl_program_run
mkdir -p .gpu/bin/tests .gpu/data .gpu/gl
cp build-static/ptl .gpu/bin/ptl
cp build-static/tests/ptl_program_run .gpu/bin/tests/ptl_program_run
cp "$data" .gpu/data/tinyshakespeare.txt
git describe --always --dirty > .gpu/engine-version 2>/dev/null || .gpu/bin/ptl --version > .gpu/engine-version

# 2. Node, Dawn and the Vulkan loader (gpu_run.sh unpacks them there).
rm -rf .gpu/webgpu && mkdir -p .gpu/webgpu/dist/linux-x64
(cd "$nm/webgpu" && tar cf - --exclude=./dist .) | (cd .gpu/webgpu && tar xf -)
[[ -s .gpu/node.xz && .gpu/node.xz -nt "$(command -v node)" ]] || xz -T2 -6 -c "$(command -v node)" > .gpu/node.xz
[[ -s .gpu/dawn.node.xz && .gpu/dawn.node.xz -nt $dawn ]] || xz -T2 -6 -c "$dawn" > .gpu/dawn.node.xz
if ! ls .gpu/gl/libvulkan1_*.deb >/dev/null 2>&1; then
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64-lists)
  mkdir -p /tmp/amd64-lists/partial
  apt-get "${o[@]}" update >/dev/null
  (cd .gpu/gl && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null 2>&1)
fi

# 3. The WebGPU backend's JavaScript, and for --wasm the WebAssembly engine.
npm --prefix web/webgpu run --silent build
carry='".gpu", "web/webgpu/dist"'
if ((wasm)); then
  wasm/build.sh simd-threads
  npm --prefix web run --silent build
  carry+=', "web/engine/dist", "build-wasm/simd-threads"'
fi
du -sh .gpu
echo "carry to the GPU machine: [$carry] (64 MiB in all at most), then run there: bench/gpu_run.sh full|matmul3|train|... OUTDIR"
