# Helpers for the WebAssembly build (included by the top-level CMakeLists.txt when EMSCRIPTEN).
#
# nlohmann_json is header-only. The host's CMake package cannot be used as is: Emscripten's
# toolchain only searches its own sysroot, and adding the host's /usr/include to a wasm
# compile would let host C/C++ headers shadow Emscripten's libc/libc++. So we expose only the
# `nlohmann/` folder, through a symlink in the build tree.
set(PTL_NLOHMANN_INCLUDE "/usr/include" CACHE PATH "Folder that holds nlohmann/json.hpp (host headers)")
if(NOT EXISTS "${PTL_NLOHMANN_INCLUDE}/nlohmann/json.hpp")
  message(FATAL_ERROR "nlohmann/json.hpp not found under ${PTL_NLOHMANN_INCLUDE} "
                      "(install nlohmann-json3-dev or set -DPTL_NLOHMANN_INCLUDE=...)")
endif()
set(_ptl_json_inc "${CMAKE_BINARY_DIR}/ptl-json-include")
file(MAKE_DIRECTORY "${_ptl_json_inc}")
if(NOT EXISTS "${_ptl_json_inc}/nlohmann")
  file(CREATE_LINK "${PTL_NLOHMANN_INCLUDE}/nlohmann" "${_ptl_json_inc}/nlohmann" SYMBOLIC)
endif()
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_ptl_json_inc}")

# The variant (wasm/build.sh sets it): scalar | simd | simd-threads | memory64.
set(PTL_WASM_VARIANT "simd-threads" CACHE STRING "WebAssembly build variant")
set_property(CACHE PTL_WASM_VARIANT PROPERTY STRINGS scalar simd simd-threads memory64)

# Compile flags for every object of the variant (the engine library and the API). Threads and
# SIMD must be on for all objects: wasm-ld refuses shared memory when any object lacks atomics.
# -fexceptions: the engine reports errors with C++ exceptions (ptl::Error), which the C API
# catches and hands to JavaScript; Emscripten's default would abort on the first throw.
set(PTL_WASM_COMPILE_FLAGS -fexceptions)
if(PTL_WASM_VARIANT STREQUAL "scalar")
elseif(PTL_WASM_VARIANT STREQUAL "simd")
  list(APPEND PTL_WASM_COMPILE_FLAGS -msimd128)
elseif(PTL_WASM_VARIANT STREQUAL "simd-threads")
  list(APPEND PTL_WASM_COMPILE_FLAGS -msimd128 -pthread)
elseif(PTL_WASM_VARIANT STREQUAL "memory64")
  # No -msimd128: LLVM 14 (Debian's Emscripten 3.1.6) cannot compile SIMD for wasm64; any lane
  # extract fails with "Cannot select: f32 = extract_vector_elt ..., Constant:i64<0>" (the
  # wasm64 lane index is i64 and the backend only has i32 patterns). See docs/wasm.md.
  # No -pthread either: this Emscripten's threaded libc does not compile for wasm64
  # (pthread_create.c: "cast to 'void *' from smaller integer type", -Werror).
  list(APPEND PTL_WASM_COMPILE_FLAGS -sMEMORY64=1)
else()
  message(FATAL_ERROR "PTL_WASM_VARIANT must be scalar, simd, simd-threads or memory64 (got '${PTL_WASM_VARIANT}')")
endif()
add_compile_options(${PTL_WASM_COMPILE_FLAGS})
