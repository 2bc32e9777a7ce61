#!/usr/bin/env bash
# Installs what posttrainllm needs (Debian packages) and builds it into build/.
# Safe to run again: it installs only what is missing and rebuilds incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  ?*) echo "$0: takes no arguments (see --help)" >&2; exit 2 ;;
esac

# The benchmarks (docs/performance.md) add: libopenblas-dev (bench/matmul_vs_openblas and
# bench/linear_ab link -lopenblas), python3-matplotlib (bench/plot*.py, bench/wasm_table.py --svg),
# xz-utils (bench/gpu_pack.sh), bible-kjv (bench/lora_defaults --corpus kjv: another author's
# text). The tests add clang: the sanitizer and fuzzing stage's build (CMakePresets.json, preset asan).
# ccache: every build compiles through it (CMakeLists.txt, PTL_CCACHE), so that a fresh checkout on a
# machine that built the same sources before (CI's clone) rebuilds in seconds.
packages=(g++ cmake ninja-build libgtest-dev libcli11-dev nlohmann-json3-dev
          python3-torch python3-numpy python3-pytest libopenblas0-pthread
          emscripten chromium libvulkan1 clang-format clang
          ccache libopenblas-dev python3-matplotlib xz-utils bible-kjv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v node >/dev/null || { echo "setup: Node.js 20 is needed (node not found)" >&2; exit 1; }
# npm packages (versions locked in web/package-lock.json, the one lock of the npm workspaces under
# web/: the engine's TypeScript API, the WebGPU backend, the site; and the browser tests' tools).
[[ web/node_modules/.package-lock.json -nt web/package-lock.json ]] || npm --prefix web ci --no-audit --no-fund

# Warnings are errors, here as in CI, so that the build stays -Wall -Wextra clean (and CI's clone
# compiles with the same flags as a developer's checkout: the compiler cache serves both).
# PTL_WERROR=OFF for a compiler newer than Debian's that warns of more.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTL_WERROR="${PTL_WERROR:-ON}" >/dev/null
cmake --build build
