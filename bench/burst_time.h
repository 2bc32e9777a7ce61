#pragma once
// Seconds per call of f, timed the way products run inside a training step on several threads:
// 2 ms of untimed calls first (they wake this library's workers and outlast the idle workers of
// whatever ran before, which spin on after its calls: ours for 300 us, OpenBLAS's for
// 2^OPENBLAS_THREAD_TIMEOUT cycles, set to 2^20 by the scripts), then the mean of calls back to
// back over at least 10 ms (a small product takes well under a millisecond, and a virtual CPU
// can be away for longer than that). Timed one call at a time, alternating two libraries, every
// call shared the cores with the other's spinning workers (docs/lessons.md, "Two threads on a
// virtual machine: time bursts, not calls").
#include <chrono>

namespace bench {

inline double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double burst_seconds_per_call(F&& f) {
  const double w0 = seconds();
  do f();
  while (seconds() - w0 < 0.002);
  int n = 0;
  const double t0 = seconds();
  do {
    f();
    n++;
  } while (seconds() - t0 < 0.01);
  return (seconds() - t0) / n;
}

}  // namespace bench
