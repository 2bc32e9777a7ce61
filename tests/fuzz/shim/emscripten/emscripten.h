#pragma once
// Native stand-in for Emscripten's header, so that wasm/api.cpp compiles into the C API fuzz
// target (tests/fuzz/fuzz_c_api.cpp).
#define EMSCRIPTEN_KEEPALIVE
