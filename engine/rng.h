#pragma once
// Random numbers that are the same on every platform (x86, WebAssembly) and every compiler.
// std::mt19937 is portable but std::normal_distribution is not (its algorithm is left to the
// library), and libm's log differs in the last bit between glibc and musl. So: splitmix64 for
// bits, and a normal draw that uses only +, -, *, / and sqrt, which IEEE 754 rounds exactly.
#include <cstdint>
#include <string>

namespace ptl {

// splitmix64: one 64-bit word of state, so it is trivial to save in a checkpoint.
struct Rng {
  uint64_t state = 0;

  explicit Rng(uint64_t seed = 0) : state(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n). The modulo bias is below 2^-40 for any n we use.
  uint64_t below(uint64_t n) { return next_u64() % n; }
  double normal();  // N(0, 1), Marsaglia's polar method with a portable log

  std::string to_hex() const;
  static Rng from_hex(const std::string&);  // throws ptl::Error on malformed input
};

// Stream for a named purpose: the same (seed, name) always gives the same sequence, and
// adding a tensor to the model never changes the draws of the others.
Rng rng_for(uint64_t seed, const std::string& name);

// Natural log with basic arithmetic only (frexp range reduction + atanh series); accurate to
// a few ulp, identical everywhere.
double portable_log(double x);

}  // namespace ptl
