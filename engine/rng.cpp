#include "engine/rng.h"

#include <cmath>
#include <cstdio>

#include "engine/error.h"

namespace ptl {

double portable_log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);   // x = m * 2^e, m in [0.5, 1): exact
  if (m < 0.70710678118654752) {  // keep m in [sqrt(1/2), sqrt(2)) so the series converges fast
    m *= 2.0;
    e -= 1;
  }
  // log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  double term = s, sum = 0.0;
  for (int k = 1; k < 40; k += 2) {
    sum += term / k;
    term *= s2;
  }
  return 2.0 * sum + e * 0.69314718055994530942;
}

double Rng::normal() {
  for (;;) {
    const double u = 2.0 * uniform() - 1.0, v = 2.0 * uniform() - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * portable_log(s) / s);
  }
}

std::string Rng::to_hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(state));
  return buf;
}

Rng Rng::from_hex(const std::string& hex) {
  check(hex.size() == 16 && hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos,
        "malformed RNG state '" + hex + "' (expected 16 hex digits)");
  return Rng(std::stoull(hex, nullptr, 16));
}

Rng rng_for(uint64_t seed, const std::string& name) {
  // FNV-1a of the name, mixed with the seed through one splitmix step.
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  Rng mix(seed ^ h);
  return Rng(mix.next_u64());
}

}  // namespace ptl
