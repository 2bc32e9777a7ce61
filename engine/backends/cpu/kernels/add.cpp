// y = a + alpha * b (residual connections; alpha = -1 gives a difference).
// Element-wise and memory-bound: plain loops the compiler vectorises, threaded over ranges.
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

void add_forward(float* y, const float* a, const float* b, float alpha, int64_t n) {
  parallel_ranges(n, grain_for(n, 2), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) y[i] = a[i] + alpha * b[i];
  });
}

void add_backward(float* da, bool acc_a, float* db, bool acc_b, const float* dy, float alpha, int64_t n) {
  // dy/da = 1 and dy/db = alpha, element by element.
  parallel_ranges(n, grain_for(n, 2), [&](int64_t i0, int64_t i1) {
    if (da) {
      if (acc_a)
        for (int64_t i = i0; i < i1; i++) da[i] += dy[i];
      else
        for (int64_t i = i0; i < i1; i++) da[i] = dy[i];
    }
    if (db) {
      if (acc_b)
        for (int64_t i = i0; i < i1; i++) db[i] += alpha * dy[i];
      else
        for (int64_t i = i0; i < i1; i++) db[i] = alpha * dy[i];
    }
  });
}

}  // namespace ptl::cpu
