// y = a + alpha * b (residual connections; alpha = -1 gives a difference).
#include "engine/backends/cpu/kernels.h"

namespace ptl::cpu {

void add_forward(float* y, const float* a, const float* b, float alpha, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + alpha * b[i];
}

void add_backward(float* da, bool acc_a, float* db, bool acc_b, const float* dy, float alpha, int64_t n) {
    // dy/da = 1 and dy/db = alpha, element by element.
    if (da)
        for (int64_t i = 0; i < n; i++) da[i] = acc_a ? da[i] + dy[i] : dy[i];
    if (db)
        for (int64_t i = 0; i < n; i++) db[i] = acc_b ? db[i] + alpha * dy[i] : alpha * dy[i];
}

}  // namespace ptl::cpu
