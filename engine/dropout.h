#pragma once
// Dropout's random numbers (docs/model.md, "Dropout"): a counter-based generator, so that every
// backend (C++, WGSL, the PyTorch reference) draws the same mask for an element from its index
// alone, in any order and on any thread, and a backward op regenerates the forward's mask
// instead of storing it. Everything is u32 arithmetic, wrapping mod 2^32 (WGSL has no u64).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>

#include "engine/error.h"

namespace ptl::dropout {

// A 32-bit integer hash (the "lowbias32" finaliser): each output bit depends on every input bit.
constexpr uint32_t hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// FNV-1a 32 of a site's name ("blocks.0.attn.drop"): sites draw independent masks.
constexpr uint32_t stream_of(std::string_view name) {
  uint32_t h = 2166136261u;
  for (char c : name) {
    h ^= uint32_t(uint8_t(c));
    h *= 16777619u;
  }
  return h;
}

// The run's key, from its u64 seed: both halves count.
constexpr uint32_t key_of(uint64_t seed) { return uint32_t(seed) ^ uint32_t(seed >> 32); }

// One op's base for one step ("dropout.seed" = {key, step}): masks differ from step to step.
constexpr uint32_t base_of(uint32_t stream, uint32_t key, uint32_t step) {
  return hash(hash(hash(stream) ^ step) ^ key);
}

// Element `index` (its flat row-major index) is kept iff its top 24 random bits reach the
// threshold: P(drop) = threshold / 2^24, exactly representable and the same in every language.
constexpr bool keep(uint32_t base, uint32_t index, uint32_t threshold) {
  return (hash(base ^ hash(index)) >> 8) >= threshold;
}

// Throws unless p is a rate dropout can use: 0 <= p < 1 (p = 1 would drop everything and scale by
// infinity). `what` names the setting ("dropout", "LoRA dropout").
inline void check_rate(double p, const std::string& what) {
  if (std::isfinite(p) && p >= 0.0 && p < 1.0) return;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", p);
  fail(what + " must be at least 0 and below 1, got " + buf);
}

inline uint32_t threshold_of(double p) { return uint32_t(std::floor(p * 16777216.0 + 0.5)); }
inline float scale_of(double p) { return float(1.0 / (1.0 - p)); }

// The attributes of a dropout site with rate p and stream name `name`: "p", "threshold",
// "scale" and "stream", all exact in a double.
inline std::map<std::string, double> attrs(double p, const std::string& name) {
  return {{"p", p},
          {"threshold", double(threshold_of(p))},
          {"scale", double(scale_of(p))},
          {"stream", double(stream_of(name))}};
}

// What a kernel needs, read from an op's attributes and its "dropout.seed" input; off (p = 0)
// when the op has no such input or a zero threshold.
struct Mask {
  uint32_t base = 0, threshold = 0;
  float scale = 1.0f;
  bool on() const { return threshold > 0; }
  bool keep(uint32_t index) const { return dropout::keep(base, index, threshold); }
  // scale where element `index` is kept, else 0.
  float factor(uint32_t index) const { return keep(index) ? scale : 0.0f; }
};

}  // namespace ptl::dropout
