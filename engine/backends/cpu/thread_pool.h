#pragma once
// The CPU backend's thread pool: a few persistent worker threads shared by every kernel.
//
// A kernel splits its work into independent tasks and calls parallel_for(n, task). The calling
// thread runs tasks too. Thread k starts on the k-th contiguous share of the tasks (so a kernel
// that numbers its tasks along rows keeps each thread on the rows it touched in the previous
// op, in its own cache) and then takes what is left of the others' shares, so which thread runs
// which task can change from run to run. Determinism therefore rests on the kernels:
//   - a task writes only its own outputs, and computes each of them in an order fixed by the
//     source (never by the partition), so no two threads write the same float;
//   - a reduction over many tasks (a loss, a norm) uses chunks of a fixed size that does not
//     depend on the thread count, stores one partial per chunk, and sums the partials serially
//     in chunk order afterwards.
// Then the same inputs give bitwise the same outputs with 1, 2 or 16 threads.
//
// Workers are created once (and again only when the thread count changes). Between jobs a
// worker spins for a short while, since the next op usually follows within microseconds, and
// then parks on a condition variable so an idle engine costs no CPU.
#include <cstdint>
#include <type_traits>

namespace ptl::cpu {

// Threads used by the kernels (the caller included). n <= 0 restores the default: $PTL_THREADS
// if set, otherwise std::thread::hardware_concurrency(). Not to be called while a kernel runs.
void set_num_threads(int n);
int num_threads();
// The default thread count described above.
int default_num_threads();

namespace detail {
// Runs fn(ctx, i) for every i in [0, n) on the pool. Called by parallel_for.
void run_tasks(int64_t n, void (*fn)(void*, int64_t), void* ctx);
bool inside_pool_task();
}  // namespace detail

// Calls f(i) once for every i in [0, n), spread over the pool's threads. Returns when all are done.
// A parallel_for inside a task runs serially on that thread.
template <class F>
void parallel_for(int64_t n, F&& f) {
  if (n <= 0) return;
  if (n == 1 || num_threads() == 1 || detail::inside_pool_task()) {
    for (int64_t i = 0; i < n; i++) f(i);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  detail::run_tasks(
      n, [](void* c, int64_t i) { (*static_cast<Fn*>(c))(i); }, const_cast<void*>(static_cast<const void*>(&f)));
}

// Splits [0, n) into ranges of `grain` items (the last one shorter) and calls f(begin, end) for
// each, in parallel. Use it where the partition does not change any result (element-wise ops,
// independent rows); the grain only trades scheduling overhead against load balance.
template <class F>
void parallel_ranges(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t tasks = (n + grain - 1) / grain;
  parallel_for(tasks, [&](int64_t t) {
    const int64_t begin = t * grain;
    f(begin, begin + grain < n ? begin + grain : n);
  });
}

// A grain for parallel_ranges over n items costing roughly `cost` each (in simple flops): about
// 4 tasks per thread, but no task smaller than ~16k flops, where scheduling would cost more
// than it saves, and a whole number of tasks per thread where that makes fewer.
int64_t grain_for(int64_t n, int64_t cost = 1);

}  // namespace ptl::cpu
