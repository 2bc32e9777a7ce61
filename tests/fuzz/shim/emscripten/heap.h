#pragma once
// Native stand-in for Emscripten's heap functions (wasm/api.cpp's reserve_heap): a fixed 4 GiB
// "heap" that never needs to grow, as in a wasm32 build at its limit.
#include <cstddef>

inline size_t emscripten_get_heap_size() { return size_t(4) << 30; }
inline size_t emscripten_get_heap_max() { return size_t(4) << 30; }
inline int emscripten_resize_heap(size_t) { return 1; }
