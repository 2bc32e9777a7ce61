#!/usr/bin/env bash
# Builds the WebAssembly engine from the same sources as the native one.
#
#   wasm/build.sh [scalar|simd|simd-threads|memory64|all]   (default: simd-threads)
#
# Output: build-wasm/<variant>/ptl_engine.js + ptl_engine.wasm (+ ptl_engine.worker.js for the
# threaded variants). Needs Emscripten (Debian: apt-get install emscripten); installs nothing.
# See docs/wasm.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${PTL_WASM_OUT:-$ROOT/build-wasm}"
target="${1:-simd-threads}"
case "$target" in
  scalar|simd|simd-threads|memory64) variants=("$target") ;;
  all) variants=(scalar simd simd-threads memory64) ;;
  -h|--help) sed -n 2,9p "${BASH_SOURCE[0]}"; exit 0 ;;
  *) echo "wasm/build.sh: unknown variant '$target' (scalar, simd, simd-threads, memory64 or all)" >&2; exit 2 ;;
esac

for tool in emcmake emcc cmake node; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "wasm/build.sh: '$tool' not found. Install Emscripten (Debian: apt-get install -y emscripten; it brings node, clang and binaryen) and cmake." >&2
    exit 1
  fi
done
GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)

# Debian's emcc loads Debian's acorn from /usr/share/nodejs.
export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"

# Memory64 needs system libraries that Debian's frozen cache does not have: a writable copy of
# the Emscripten config with its own cache (built once, ~2.5 minutes on 2 cores), and a node
# wrapper, because this Emscripten calls node with --experimental-wasm-bigint (Node 20 rejects
# it; BigInt integration is on by default) and Memory64 needs --experimental-wasm-memory64.
setup_memory64_config() {
  local dir="$OUT/.emscripten"
  if [[ ! -d "$dir/cache" ]]; then
    mkdir -p "$dir"
    # Start from the system's prebuilt wasm32 libraries (CMake's compiler checks link wasm32
    # programs), so that only the wasm64 ones are compiled.
    local frozen
    frozen="$(em-config CACHE 2>/dev/null || echo /usr/share/emscripten/cache)"
    if [[ -d "$frozen" ]]; then cp -r "$frozen" "$dir/cache"; rm -f "$dir/cache/cache.lock"; else mkdir -p "$dir/cache"; fi
  fi
  local sys_config
  sys_config="$(em-config EMSCRIPTEN_ROOT >/dev/null 2>&1 && python3 - <<'PY'
import os
for p in (os.environ.get('EM_CONFIG'), '/usr/share/emscripten/.emscripten', os.path.expanduser('~/.emscripten')):
    if p and os.path.isfile(p):
        print(p); break
PY
)"
  [[ -n "$sys_config" ]] || sys_config=/usr/share/emscripten/.emscripten
  cat > "$dir/node" <<'SH'
#!/bin/sh
# Node wrapper for Emscripten 3.1.6 + Node 20 (wasm/build.sh).
for a in "$@"; do
  shift
  case "$a" in
    --experimental-wasm-bigint) set -- "$@" --experimental-wasm-memory64 ;;
    *) set -- "$@" "$a" ;;
  esac
done
exec node "$@"
SH
  chmod +x "$dir/node"
  grep -v -E '^(FROZEN_CACHE|CACHE|NODE_JS) *=' "$sys_config" > "$dir/config"
  cat >> "$dir/config" <<PY
FROZEN_CACHE = False
CACHE = '$dir/cache'
NODE_JS = '$dir/node'
PY
  export EM_CONFIG="$dir/config"
}

# The compiler cache (CMakeLists.txt): emcc runs clang through ccache; PTL_CCACHE=OFF turns it off.
if [[ "${PTL_CCACHE:-ON}" != OFF ]] && command -v ccache >/dev/null 2>&1; then
  export EM_COMPILER_WRAPPER=ccache CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
fi

for v in "${variants[@]}"; do
  dir="$OUT/$v"
  echo "== wasm/build.sh: $v -> $dir" >&2
  (
    if [[ "$v" == memory64 ]]; then setup_memory64_config; fi
    emcmake cmake -S "$ROOT" -B "$dir" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DPTL_BUILD_TESTS=OFF \
      -DPTL_WASM_VARIANT="$v" -DPTL_WERROR="${PTL_WERROR:-ON}" >/dev/null
    cmake --build "$dir" --target ptl_engine_wasm -j "${PTL_WASM_JOBS:-$(nproc 2>/dev/null || echo 2)}"
  )
  ls -l "$dir"/ptl_engine.* >&2
done
