// AdamW (decoupled weight decay), in the operation order of PyTorch's torch.optim.AdamW
// (foreach=False), so that both produce the same floats step after step.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine/backends/cpu/fma_exact.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

namespace {

// The hyperparameters arrive as float, while PyTorch keeps them as Python (double) numbers:
// 0.9f is 0.89999997..., so 1 - beta1 would come out as 0.10000002 instead of 0.1. Reading the
// float back through its shortest decimal form ("0.9") gives the double a user typing the same
// number into Python gets.
double as_typed_uncached(float f) {
  char buf[32];
#ifdef __EMSCRIPTEN__
  // Emscripten 3.1.6's libc++ has no floating-point to_chars: the shortest "%.*g" that reads
  // back as the same float is the same decimal (correctly rounded, fewest digits).
  for (int digits = 1; digits <= 9; digits++) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
#else
  const auto res = std::to_chars(buf, buf + sizeof(buf) - 1, f);
  *res.ptr = '\0';
#endif
  return std::strtod(buf, nullptr);
}

// AdamW runs once per parameter tensor with the same four hyperparameters, and the decimal
// round trip costs microseconds (snprintf and strtod in WebAssembly: more than the update of a
// small model's tensors), so the last few conversions are kept, per thread.
double as_typed(float f) {
  struct Entry {
    float f;
    double d;
  };
  static thread_local Entry cache[8];
  static thread_local int used = 0, next = 0;
  for (int i = 0; i < used; i++)
    if (std::memcmp(&cache[i].f, &f, sizeof f) == 0) return cache[i].d;
  const double d = as_typed_uncached(f);
  cache[next] = {f, d};
  next = (next + 1) % 8;
  used = used < 8 ? used + 1 : 8;
  return d;
}

}  // namespace

namespace {

// Squares summed in double over one chunk, in 8 interleaved partial sums (which the compiler
// vectorises, as the order is fixed by the source), then the partials in order.
double chunk_sum_squares(const float* x, int64_t n) {
  constexpr int64_t L = 8;
  double part[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int64_t l = 0; l < L; l++) part[l] += static_cast<double>(x[i + l]) * x[i + l];
  for (; i < n; i++) part[i % L] += static_cast<double>(x[i]) * x[i];
  double s = 0.0;
  for (int64_t l = 0; l < L; l++) s += part[l];
  return s;
}

}  // namespace

double sum_squares(const float* x, int64_t n) { return sum_squares_many(&x, &n, 1); }

double sum_squares_many(const float* const* xs, const int64_t* ns, int64_t count) {
  // Fixed chunks of kChunk elements of every tensor, one partial each, added in order on one
  // thread: the split into chunks never depends on the thread count, so neither does the sum.
  constexpr int64_t kChunk = 16384;
  std::vector<std::pair<const float*, int64_t>> chunks;
  for (int64_t k = 0; k < count; k++)
    for (int64_t off = 0; off < ns[k]; off += kChunk) chunks.push_back({xs[k] + off, std::min(kChunk, ns[k] - off)});
  std::vector<double> part(chunks.size());
  parallel_for(int64_t(chunks.size()),
               [&](int64_t c) { part[size_t(c)] = chunk_sum_squares(chunks[c].first, chunks[c].second); });
  double s = 0.0;
  for (double p : part) s += p;
  return s;
}

namespace {

// One AdamW step over elements [i0, i1). The arrays are passed as restrict-qualified arguments
// (not captured by a lambda) so the compiler knows the stores to p, m and v cannot change g or
// the constants, and vectorises the loop; sqrt and division are exact IEEE operations, so the
// vector lanes round exactly as the scalar code would.
struct Update {
  float decay, one_minus_b1, b2f, one_minus_b2, neg_step, bc2_sqrt, eps, grad_scale;
  void run(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t i0,
           int64_t i1) const {
    for (int64_t i = i0; i < i1; i++) {
      const float gi = g[i] * grad_scale;  // the clipping coefficient (1 when not clipped)
      // Decoupled weight decay: shrink the parameter directly, p *= 1 - lr * wd, instead of
      // adding wd * p to the gradient (which Adam's normalisation would then rescale).
      const float pi = p[i] * decay;
      // m = beta1 m + (1 - beta1) g, written as PyTorch's lerp m + (1 - beta1)(g - m); its
      // vectorised CPU kernel rounds that with one fused multiply-add. (For weights >= 0.5,
      // i.e. beta1 <= 0.5, lerp switches to another form; real betas never get there.)
      const float mi = fma_exact(one_minus_b1, gi - m[i], m[i]);
      // v = beta2 v + (1 - beta2) g^2.
      const float vi = v[i] * b2f + one_minus_b2 * gi * gi;
      // p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps).
      const float denom = std::sqrt(vi) / bc2_sqrt + eps;
      m[i] = mi;
      v[i] = vi;
      p[i] = pi + neg_step * mi / denom;
    }
  }
};

// The float constants of one tensor's update.
Update constants(const AdamWTensor& a) {
  const double lr_d = as_typed(a.lr), b1 = as_typed(a.beta1), b2 = as_typed(a.beta2);
  // Scalars are formed in double, then rounded to float once, as PyTorch does when it hands a
  // Python number to a float tensor op.
  const float decay = static_cast<float>(1.0 - lr_d * as_typed(a.weight_decay));
  const float one_minus_b1 = static_cast<float>(1.0 - b1);
  const float b2f = static_cast<float>(b2);
  const float one_minus_b2 = static_cast<float>(1.0 - b2);
  // Bias corrections: m and v start at 0, so after t steps they are (1 - beta^t) times too small
  // on average. Dividing m by bc1 and sqrt(v) by sqrt(bc2) undoes that.
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(a.t));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(a.t));
  const float neg_step = static_cast<float>(-(lr_d / bc1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  return Update{.decay = decay,
                .one_minus_b1 = one_minus_b1,
                .b2f = b2f,
                .one_minus_b2 = one_minus_b2,
                .neg_step = neg_step,
                .bc2_sqrt = bc2_sqrt,
                .eps = a.eps,
                .grad_scale = a.grad_scale};
}

}  // namespace

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int64_t t, float grad_scale) {
  const AdamWTensor a{.p = p,
                      .g = g,
                      .m = m,
                      .v = v,
                      .n = n,
                      .lr = lr,
                      .beta1 = beta1,
                      .beta2 = beta2,
                      .eps = eps,
                      .weight_decay = weight_decay,
                      .t = t,
                      .grad_scale = grad_scale};
  adamw_update_many(&a, 1);
}

void adamw_update_many(const AdamWTensor* ts, int64_t count) {
  // Every element is independent, so the tensors are cut into ranges of about the same work
  // and all of them go to the pool in one pass: most parameter tensors (LayerNorm weights,
  // biases, a small model's matrices) are below any sensible grain alone, and one pass per
  // tensor would run each on one thread, with a fork/join each.
  std::vector<Update> u(static_cast<size_t>(count));
  int64_t total = 0;
  for (int64_t k = 0; k < count; k++) {
    u[size_t(k)] = constants(ts[k]);
    total += ts[k].n;
  }
  const int64_t grain = grain_for(total, 12);
  struct Range {
    int64_t tensor, i0, i1;
  };
  std::vector<Range> ranges;
  for (int64_t k = 0; k < count; k++)
    for (int64_t i0 = 0; i0 < ts[k].n; i0 += grain) ranges.push_back({k, i0, std::min(ts[k].n, i0 + grain)});
  parallel_for(int64_t(ranges.size()), [&](int64_t r) {
    const Range& g = ranges[size_t(r)];
    const AdamWTensor& a = ts[g.tensor];
    u[size_t(g.tensor)].run(a.p, a.g, a.m, a.v, g.i0, g.i1);
  });
}

}  // namespace ptl::cpu
