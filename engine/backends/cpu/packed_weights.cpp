#include "engine/backends/cpu/packed_weights.h"

#include "engine/backends/cpu/kernels.h"

namespace ptl::cpu {

const float* PackedWeights::get(const float* W, int64_t N, int64_t K) {
  Pack& p = packs_[W];
  if (p.N != N || p.K != K || !p.panels.data()) {
    p.panels = Buffer(linear_packed_floats(N, K) * sizeof(float));
    p.N = N;
    p.K = K;
    linear_pack_weight(static_cast<float*>(p.panels.data()), W, N, K);
  }
  return static_cast<const float*>(p.panels.data());
}

size_t PackedWeights::bytes() const {
  size_t n = 0;
  for (const auto& [_, p] : packs_) n += p.panels.bytes();
  return n;
}

}  // namespace ptl::cpu
