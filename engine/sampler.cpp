#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/error.h"

namespace ptl {

Sampler::Sampler(const SamplingOptions& opt) : opt_(opt), rng_(rng_for(opt.seed, "sampler")) {
  check(std::isfinite(opt.temperature) && opt.temperature >= 0, "temperature must be 0 or positive");
  check(opt.top_k >= 0, "top-k must be 0 (off) or positive");
  check(opt.top_p > 0 && opt.top_p <= 1, "top-p must be in (0, 1]");
}

static int argmax(const float* logits, int vocab) {
  return int(std::max_element(logits, logits + vocab) - logits);  // first of equal maxima
}

std::vector<double> Sampler::distribution(const float* logits, int vocab) const {
  std::vector<double> p(vocab, 0.0);
  if (opt_.temperature == 0.0) {
    p[argmax(logits, vocab)] = 1.0;
    return p;
  }
  // Candidates in order of decreasing logit (ties: lower byte first).
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const int k = opt_.top_k > 0 ? std::min(opt_.top_k, vocab) : vocab;
  // Softmax of logits / temperature over the top k.
  const double mx = logits[order[0]] / opt_.temperature;
  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += (p[order[i]] = std::exp(logits[order[i]] / opt_.temperature - mx));
  for (int i = 0; i < k; ++i) p[order[i]] /= sum;
  // Nucleus: the smallest prefix whose mass reaches top_p (at least one token).
  if (opt_.top_p < 1.0) {
    double cum = 0.0;
    int keep = 0;
    while (keep < k) {
      cum += p[order[keep++]];
      if (cum >= opt_.top_p) break;
    }
    for (int i = keep; i < k; ++i) p[order[i]] = 0.0;
    for (int i = 0; i < keep; ++i) p[order[i]] /= cum;
  }
  return p;
}

int Sampler::sample(const float* logits, int vocab) {
  if (opt_.temperature == 0.0) return argmax(logits, vocab);
  const std::vector<double> p = distribution(logits, vocab);
  const double u = rng_.uniform();
  double cum = 0.0;
  int last = 0;
  for (int i = 0; i < vocab; ++i) {
    if (p[i] <= 0.0) continue;
    last = i;
    cum += p[i];
    if (u < cum) return i;
  }
  return last;  // u landed in the rounding gap at the top
}

}  // namespace ptl
