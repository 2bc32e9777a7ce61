#include "engine/backends/cpu/packed_weights.h"

#include "engine/backends/cpu/kernels.h"
#include "engine/error.h"

namespace ptl::cpu {

const float* PackedWeights::get(const float* W, int64_t N, int64_t K) {
  Pack& p = packs_[W];
  if (p.N != N || p.K != K || (!p.panels.data() && !p.failed)) {
    p = Pack{N, K, Buffer(), false};
    try {
      p.panels = Buffer(linear_packed_floats(N, K) * sizeof(float));
    } catch (const Error&) {
      // Out of memory (the WebAssembly heap's 4 GiB holds a large model's weights, not twice).
      p.failed = true;
      return nullptr;
    }
    linear_pack_weight(static_cast<float*>(p.panels.data()), W, N, K);
  }
  return p.failed ? nullptr : static_cast<const float*>(p.panels.data());
}

size_t PackedWeights::bytes() const {
  size_t n = 0;
  for (const auto& [_, p] : packs_) n += p.panels.bytes();
  return n;
}

}  // namespace ptl::cpu
