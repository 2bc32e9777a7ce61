// Gradients of a trainer's LoRA adapters against central finite differences of its loss.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/lora.h"
#include "engine/trainer.h"

namespace ptl::test {

// For every adapter tensor, the two entries of largest gradient (where a wrong derivative shows
// most) against (L(p + h) - L(p - h)) / 2h on batch `b`. The gradients must already be computed
// on `b` (with a learning rate of 0, so the weights are those the loss sees). Returns the number
// of entries checked.
inline int expect_adapter_gradients_match(Trainer& tr, const Batch& b) {
  int checked = 0;
  for (const auto& t : adapter_tensors(tr.model_config(), tr.lora_config())) {
    const float* g = tr.gradient(t.name);
    float* p = tr.store().find(t.name);
    std::vector<int64_t> idx(static_cast<size_t>(t.numel()));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(),
                      [&](int64_t a, int64_t c) { return std::abs(g[a]) > std::abs(g[c]); });
    for (int k = 0; k < 2; ++k) {
      const int64_t i = idx[static_cast<size_t>(k)];
      const float saved = p[i];
      const double h = 1e-2;
      p[i] = saved + float(h);
      const double lp = tr.batch_loss(b);
      p[i] = saved - float(h);
      const double lm = tr.batch_loss(b);
      p[i] = saved;
      const double numeric = (lp - lm) / (2 * h);
      EXPECT_NEAR(g[i], numeric, 0.05 * std::abs(numeric) + 1e-3) << t.name << "[" << i << "]";
      ++checked;
    }
  }
  return checked;
}

}  // namespace ptl::test
