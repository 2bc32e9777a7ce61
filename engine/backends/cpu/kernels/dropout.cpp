// Dropout (docs/model.md, "Dropout"): element i is kept, times 1 / (1 - p), or zeroed, by the
// counter-based mask of engine/dropout.h. The mask is a function of (seed, step, stream, i), so
// the backward regenerates it instead of the forward storing it, and a thread split cannot
// change it. Element-wise: threaded over ranges like add.
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

void dropout_forward(float* y, const float* x, int64_t n, const dropout::Mask& mask) {
  // The hash is a dozen integer operations per element, not a load: grain as for a cheap map.
  parallel_ranges(n, grain_for(n, 8), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) y[i] = mask.keep(uint32_t(i)) ? x[i] * mask.scale : 0.0f;
  });
}

void dropout_backward(float* dx, bool acc, const float* dy, int64_t n, const dropout::Mask& mask) {
  // y = x * scale where kept, else 0: the gradient passes through the same mask and scale.
  parallel_ranges(n, grain_for(n, 8), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      const float g = mask.keep(uint32_t(i)) ? dy[i] * mask.scale : 0.0f;
      dx[i] = acc ? dx[i] + g : g;
    }
  });
}

}  // namespace ptl::cpu
