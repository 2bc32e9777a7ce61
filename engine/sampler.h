#pragma once
// Turning logits into the next byte: greedy, or temperature, then top-k, then top-p (nucleus),
// then a draw from a seeded generator (docs/model.md, "Generation").
#include <cstdint>
#include <vector>

#include "engine/rng.h"

namespace ptl {

struct SamplingOptions {
  double temperature = 0.8;  // 0 = greedy (argmax)
  int top_k = 0;             // 0 = off
  double top_p = 1.0;        // 1 = off
  uint64_t seed = 1337;
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& opt);
  int sample(const float* logits, int vocab);
  // The distribution sample() draws from (after temperature, top-k and top-p), for display and tests.
  std::vector<double> distribution(const float* logits, int vocab) const;

 private:
  SamplingOptions opt_;
  Rng rng_;
};

}  // namespace ptl
