// A run of rows of a tensor, copied: y[i, :] = x[first + i, :] for i < n, rows of C floats.
//
// Generation uses it on a prompt: every row of the prompt goes through the blocks (each one's keys
// and values fill the KV cache), but only the last row's features are needed for the next token,
// so the final LayerNorm and the output projection (for GPT-2, a [rows, 768] x [768, 50257]
// product) run on that row alone (engine/model.cpp, build_features).
#include <cstring>

#include "engine/backends/cpu/kernels.h"

namespace ptl::cpu {

void slice_rows(float* y, const float* x, int64_t first, int64_t n, int64_t C) {
  std::memcpy(y, x + first * C, size_t(n * C) * sizeof(float));
}

}  // namespace ptl::cpu
