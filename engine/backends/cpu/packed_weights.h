#pragma once
// Linear weights kept packed between runs, for programs that read the same weights many times
// (generation: every weight once per token). The forward's micro-kernel reads W^T in column
// panels (gemm.h); packing them from W's rows is an in-register transpose of all of W, which
// costs more than the product itself when a token is a single row. Packed once, a panel is then
// read straight from memory by every token, with the same multiply-adds in the same order
// (linear_forward_packed): the outputs are bitwise those of linear_forward.
//
// The packs are copies, so they are only right while the weights are unchanged: the TensorStore
// that owns them empties them (clear()) whenever any of its tensors may have been written
// (TensorStore::changed()). Memory: about the packed weights' size again.
#include <cstddef>
#include <cstdint>
#include <map>

#include "engine/backends/cpu/buffer.h"

namespace ptl::cpu {

class PackedWeights {
 public:
  // The panels of W [N, K] as linear_pack_weight lays them out, packed on first use (on the
  // pool's threads); null where their memory could not be allocated (then the products pack W
  // as they go: slower, the same floats).
  const float* get(const float* W, int64_t N, int64_t K);
  void clear() { packs_.clear(); }
  size_t count() const { return packs_.size(); }
  size_t bytes() const;

 private:
  struct Pack {
    int64_t N = 0, K = 0;
    Buffer panels;
    bool failed = false;  // no memory for the panels: not tried again until clear()
  };
  std::map<const float*, Pack> packs_;  // by the weight's address in the store
};

}  // namespace ptl::cpu
